"""Budgets inside a test suite: one model with :func:`assert_budget`, a file with
:func:`assert_budget_file`.

::

    from vitprof.testing import assert_budget

    def test_my_vit_stays_in_budget():
        assert_budget(
            MyViT(), image_size=224, max_params=90_000_000, max_macs=18_000_000_000,
            components={"attn_core": {"min_macs": 1, "max_share": 0.05}},
            blocks={"max_macs": 1_500_000_000},
        )

The limits are the keys of a budget-file entry, validated by the same closed schema. A failed
check raises ``AssertionError`` whose message is the table ``vitprof check`` prints; a mistake
in the budget itself (an unknown key, a wrong type) or a model that cannot be analyzed raises
:class:`vitprof.UserError`, since that is a broken test rather than a failed one.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from torch import nn

from vitprof.checks.budget import BudgetResult, check_profile, evaluate, load_budgets, parse_budget
from vitprof.core.errors import UserError
from vitprof.count.families import Rule
from vitprof.count.result import Profile
from vitprof.render.budget import budget_document
from vitprof.render.formats import render


def _raise_on_failure(outcomes: Sequence[BudgetResult]) -> None:
    if not all(outcome.passed for outcome in outcomes):
        raise AssertionError(render(budget_document(outcomes)))


def assert_budget(
    model: str | nn.Module | Profile,
    *,
    name: str | None = None,
    image_size: int | tuple[int, int] | None = None,
    batch_size: int | None = None,
    num_classes: int | None = None,
    overrides: Sequence[Rule] = (),
    **limits: Any,
) -> BudgetResult:
    """Analyze ``model`` (a name, a module, or an existing :class:`Profile`) and check
    ``limits`` (``max_params=...``, ``components={...}``, ``blocks={...}``, ...).

    Returns the result when every check holds; raises ``AssertionError`` with the table
    otherwise.
    """
    settings = {"image_size": image_size, "batch_size": batch_size, "num_classes": num_classes}
    table: dict[str, Any] = {key: value for key, value in settings.items() if value is not None}
    if overrides:
        table["map"] = {regex: str(component) for regex, component in overrides}
    if isinstance(model, Profile):
        if table:
            raise UserError(f"{', '.join(table)} cannot apply to a Profile that is already "
                            "analyzed; analyze again or pass the model")
        budget = parse_budget(name or model.model, limits, model=model.model)
        outcome = check_profile(budget, model)
    else:
        entry = name or (model if isinstance(model, str) else type(model).__name__)
        outcome = evaluate(parse_budget(entry, {**table, **limits}, model=model))
    _raise_on_failure([outcome])
    return outcome


def assert_budget_file(
    path: str | Path, entries: Sequence[str] | None = None
) -> list[BudgetResult]:
    """Check every entry of the budget file ``path`` (or only ``entries``).

    Returns the results when every check holds; raises ``AssertionError`` with the table of all
    the checks otherwise.
    """
    budgets = load_budgets(path)
    if entries is not None:
        missing = sorted(set(entries) - {b.name for b in budgets})
        if missing:
            raise UserError(f"{path}: no entry named {', '.join(missing)}")
        budgets = [b for b in budgets if b.name in entries]
    outcomes = [evaluate(budget) for budget in budgets]
    _raise_on_failure(outcomes)
    return outcomes
