"""Every recognition rule, in the order they decide: the list order is the precedence.

Core rules run first (they find the cores and place their records), then the block rules (they
group records into blocks), then the record rules, record by record, the first that places a
record deciding, then the position rules for what is left, then the parameter rules, and the
user's ``--map`` last. ``docs/recognition.md`` is generated from :data:`RULES`
(:func:`vitprof.recognize.rules.page.recognition_page`).
"""

from __future__ import annotations

from vitprof.recognize.rules import blocks, cores, params, positions, records
from vitprof.recognize.rules.base import Rule, RuleSet

ORDER: tuple[Rule, ...] = (*cores.CORE_RULES, *blocks.BLOCK_RULES, *records.RECORD_RULES,
                           *positions.POSITION_RULES, *params.PARAM_RULES)
RULES: dict[str, Rule] = {rule.name: rule for rule in ORDER}
if len(RULES) != len(ORDER):
    raise ValueError("a recognition rule is defined twice")


def check(rules: RuleSet) -> RuleSet:
    """``rules``, once every rule it switches off is known (else a KeyError naming them)."""
    unknown = sorted(rules.off - RULES.keys())
    if unknown:
        raise KeyError(f"no recognition rule {', '.join(unknown)}")
    return rules
