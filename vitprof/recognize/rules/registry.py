"""Every recognition rule, in the order they decide: the list order is the precedence.

Core rules run first (they find the cores and place their records), then the block rules (they
group records into blocks), then the record rules, record by record, the first that places a
record deciding (:data:`RECORD_ORDER`: the record rules in the list's order, ``token-parameter``
and the position rules among them), then the parameter rules, parameter by parameter
(:data:`PARAM_ORDER`), and the user's ``--map`` last. ``docs/recognition.md`` is generated
from :data:`RULES` (:func:`vitprof.recognize.rules.page.recognition_page`).
"""

from __future__ import annotations

from vitprof.recognize.rules import blocks, cores, overrides, params, positions, records
from vitprof.recognize.rules.base import ParamRule, Rule, RuleSet
from vitprof.recognize.rules.records import RecordRule

ORDER: tuple[Rule, ...] = (*cores.CORE_RULES, *blocks.BLOCK_RULES, *records.RECORD_RULES,
                           *params.PARAM_RULES, *positions.POSITION_RULES, overrides.OVERRIDE)
RULES: dict[str, Rule] = {rule.name: rule for rule in ORDER}
if len(RULES) != len(ORDER):
    raise ValueError("a recognition rule is defined twice")
# the rules placing records, and those placing parameters, one by one: in the registry's order
RECORD_ORDER = tuple(rule for rule in ORDER if isinstance(rule, RecordRule))
PARAM_ORDER = tuple(rule for rule in ORDER if isinstance(rule, ParamRule))


def check(rules: RuleSet) -> RuleSet:
    """``rules``, once every rule it switches off is known and every rule it adds is new
    (else a KeyError naming them)."""
    unknown = sorted(rules.off - RULES.keys() - {rule.name for rule in rules.added})
    if unknown:
        raise KeyError(f"no recognition rule {', '.join(unknown)}")
    again = sorted(rule.name for rule in rules.added if rule.name in RULES)
    if again:
        raise KeyError(f"recognition rule {', '.join(again)} is listed already")
    return rules
