"""Budget results as a document (a table, JSON, JUnit suites). Renders; never counts or checks.

Every format names each check by its entry and dotted key as written in the budget file
(``vit_b_16.components.attn_core.max_share``), states the counting convention, and carries each
entry's fallback note when its model could not run on the meta device, the input it was analysed
at (its shape; each tensor's dtype where that is not one float32 tensor) and the input override
that replaced the entry's own (:func:`vitprof.checks.budget.at_input`), if any.

Headroom is how far the actual value is inside the limit (negative: past it), in the limit's unit:
a count (with its percentage of the limit when it is at most the limit itself), or percentage
points (pp) for a share.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from vitprof.checks.budget import SHARES, BudgetResult, CheckResult
from vitprof.core.vocab import Bound, Strategy, Verdict
from vitprof.render.document import BLANK, Block, Case, Col, Document, Suite, Table, columns, lines
from vitprof.render.tables import CONVENTION, inputs_text

SHARE_CONVENTION = "share = a component's share of the total MACs; params_share: of the params"
_SIGN = {Bound.MAX: "<=", Bound.MIN: ">="}


def check_name(result: CheckResult, entry: str) -> str:
    """``entry.key``, and the binding block of a per-block limit."""
    name = f"{entry}.{result.check.key}"
    return name if result.block is None else f"{name} (block {result.block})"


def _percent(fraction: float) -> str:
    """``fraction`` in percent, without the unit: two decimals (0.0407 -> ``4.07``); a nonzero
    value that two decimals would show as 0.00 keeps two significant digits (``-0.000019``), so
    a limit passed by a hair never reads as zero, and zero has no sign."""
    if fraction == 0:
        return "0.00"
    text = f"{fraction * 100:.2f}"
    if float(text) == 0:
        text = format(Decimal(f"{fraction * 100:.2g}"), "f")
    return text


def _value(result: CheckResult, value: int | float) -> str:
    return f"{_percent(value)}%" if result.check.metric in SHARES else f"{value:,}"


def _headroom(result: CheckResult) -> str:
    headroom = result.headroom
    if headroom is None:
        return ""
    if result.check.metric in SHARES:
        return f"{_percent(headroom)} pp"
    limit = result.check.limit
    relative = f" ({_percent(headroom / limit)}%)" if limit > 0 and abs(headroom) <= limit else ""
    return f"{headroom:,}{relative}"


def _actual(result: CheckResult) -> str:
    return "n/a" if result.actual is None else _value(result, result.actual)


def _limit(result: CheckResult) -> str:
    """The limit as written: a share keeps all its digits (0.0405 is 4.05%, not 4.1%; 1e-06 is
    0.0001%), and a zero (``-0.0`` included) is 0%."""
    check = result.check
    value = _value(result, check.limit)
    if check.metric in SHARES:
        percent = (Decimal(repr(check.limit)) * 100).normalize()
        value = format(percent if percent else Decimal(0), "f") + "%"
    shown = f"{_SIGN[check.bound]} {value}"
    return f"{shown} (default)" if check.implicit else shown


def _entry_line(outcome: BudgetResult) -> str:
    profile = outcome.profile
    shape = "x".join(str(n) for n in profile.input_shape)
    line = (f"{outcome.budget.name}: model {profile.model}, input {shape}"
            f"{inputs_text(profile.inputs)}, on {profile.device}")
    if outcome.budget.input_override:
        line += f" (input override: {outcome.budget.input_override})"
    if profile.fallback:
        line += f" (fallback: {profile.fallback})"
    step = dict(outcome.budget.memory)
    if step.get("strategy", Strategy.NONE) != Strategy.NONE:
        line += (f"; max_peak_bytes: one rank's peak under {step['strategy']} at world size "
                 f"{step.get('world_size', 1):,}")
    return line


def _notes(outcome: BudgetResult) -> list[str]:
    notes = [f"{outcome.budget.name}: warning: {w}" for w in outcome.profile.warnings]
    notes += [f"{check_name(r, outcome.budget.name)}: {r.note}" for r in outcome.results
              if r.note]
    return notes


def summary(outcomes: Sequence[BudgetResult]) -> str:
    """One line: how many checks passed, and which failed."""
    results = [(o.budget.name, r) for o in outcomes for r in o.results]
    failed = [check_name(r, entry) for entry, r in results if r.verdict is Verdict.FAIL]
    if not failed:
        budgets = "1 budget" if len(outcomes) == 1 else f"{len(outcomes)} budgets"
        return f"PASS: all {len(results)} checks of {budgets} hold"
    return f"FAIL: {len(failed)} of {len(results)} checks failed: {', '.join(failed)}"


_COLUMNS = columns(Col.CHECK, Col.LIMIT, Col.ACTUAL, Col.HEADROOM, Col.VERDICT)


def _table(outcomes: Sequence[BudgetResult]) -> Table:
    """One row per check: limit, actual, headroom (each in its check's unit) and verdict."""
    return Table(_COLUMNS, tuple(
        {"check": check_name(r, o.budget.name), "limit": _limit(r), "actual": _actual(r),
         "headroom": _headroom(r), "verdict": str(r.verdict)}
        for o in outcomes for r in o.results
    ))


def _result_dict(result: CheckResult, entry: str) -> dict[str, Any]:
    check = result.check
    return {
        "check": f"{entry}.{check.key}", "key": check.key, "scope": str(check.scope),
        "component": None if check.component is None else str(check.component),
        "bound": str(check.bound), "metric": str(check.metric), "limit": check.limit,
        "implicit": check.implicit, "actual": result.actual, "headroom": result.headroom,
        "block": result.block, "verdict": str(result.verdict), "note": result.note or None,
    }


def _data(outcomes: Sequence[BudgetResult]) -> dict[str, Any]:
    """``{"passed", "convention", "budgets": [{entry, model, input_shape, inputs,
    input_override, ..., "checks": [...]}]}``."""
    return {
        "passed": all(o.passed for o in outcomes),
        "convention": CONVENTION,
        "shares": SHARE_CONVENTION,
        "summary": summary(outcomes),
        "budgets": [
            {
                "entry": o.budget.name, "model": o.profile.model,
                "input_shape": list(o.profile.input_shape),
                "inputs": [{"name": i.name, "shape": list(i.shape), "dtype": i.dtype}
                           for i in o.profile.inputs],
                "input_override": o.budget.input_override or None, "device": o.profile.device,
                "fallback": o.profile.fallback, "warnings": list(o.profile.warnings),
                "passed": o.passed,
                "checks": [_result_dict(r, o.budget.name) for r in o.results],
            }
            for o in outcomes
        ],
    }


def _suite(outcome: BudgetResult) -> Suite:
    """An entry as a JUnit suite: a case per check, failed when its limit is exceeded; the
    fallback note goes to the suite's properties and its output."""
    entry, profile = outcome.budget.name, outcome.profile
    properties = (("model", profile.model),
                  ("input_shape", "x".join(str(n) for n in profile.input_shape)),
                  ("input_override", outcome.budget.input_override or None),
                  ("device", profile.device), ("convention", CONVENTION),
                  ("fallback", profile.fallback))
    cases = []
    for result in outcome.results:
        failure = None
        if result.verdict is Verdict.FAIL:
            failure = (f"{_actual(result)} is not {_limit(result)}",
                       f"{check_name(result, entry)}: limit {_limit(result)}, actual "
                       f"{_actual(result)}, headroom {_headroom(result) or 'n/a'}"
                       + (f"; {result.note}" if result.note else ""))
        cases.append(Case(result.check.key, failure))
    return Suite(entry, tuple(cases),
                 tuple((name, value) for name, value in properties if value is not None),
                 "\n".join([_entry_line(outcome), *_notes(outcome)]))


def budget_document(outcomes: Sequence[BudgetResult]) -> Document:
    """The conventions, each entry's model and input, one row per check, the notes and a
    summary; the JSON; a JUnit suite per entry."""
    notes = [note for o in outcomes for note in _notes(o)]
    blocks: list[Block] = [
        lines([f"convention: {CONVENTION}", f"shares: {SHARE_CONVENTION}", ""]),
        lines(_entry_line(o) for o in outcomes), BLANK, _table(outcomes),
        *([BLANK, lines(notes)] if notes else []), BLANK, lines([summary(outcomes)])]
    return Document(tuple(blocks), _data(outcomes), "check",
                    suites=tuple(_suite(o) for o in outcomes), suites_name="vitprof check",
                    failure_type="BudgetExceeded")
