"""The vitprof pytest plugin (entry point ``pytest11``): budgets as test items, a profile fixture.

``pytest --vitprof-budgets budgets.toml`` collects one test item per entry of the budget file,
named after the entry; a failed item's message is the table ``vitprof check`` prints. A budget
file that cannot be read, or an entry whose model cannot be analyzed, is an error, never a pass.

The ``vitprof_profile`` fixture analyzes a model (``vitprof_profile("vit_b_16", image_size=384)``)
once per session and set of arguments. :mod:`vitprof.testing` stays for direct use.

pytest loads the plugin in every session of a project that installs vitprof, so it imports torch
(through vitprof's counting modules) only when a budget file is collected or the fixture is used.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from vitprof.core.errors import UserError

if TYPE_CHECKING:
    from vitprof.checks.budget import Budget
    from vitprof.count.result import Profile


class BudgetExceeded(Exception):
    """A budget entry with a failed check; its message is the check table."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("vitprof")
    group.addoption("--vitprof-budgets", metavar="BUDGETS.toml", action="append", default=[],
                    help="collect one test per entry of this vitprof budget file (repeatable)")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """Collect the budget files' items before selection (``-k``, ``--deselect``) applies, as
    pytest collects any file (each reported, and counted in "collected N items"); a file
    given twice (by any path) is collected once."""
    paths = dict.fromkeys(Path(name).resolve() for name in config.getoption("vitprof_budgets"))
    for path in paths:
        items.extend(session.genitems(BudgetFile.read(session, path)))


class BudgetFile(pytest.File):
    """A budget file: one item per entry, validated when read."""

    def __init__(self, *, budgets: list[Budget], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.budgets = budgets

    @classmethod
    def read(cls, session: pytest.Session, path: Path) -> BudgetFile:
        """The budget file at ``path``, validated: a broken one is a usage error."""
        from vitprof.checks.budget import load_budgets

        try:
            budgets = load_budgets(path)
        except UserError as error:
            raise pytest.UsageError(f"vitprof: error: {error}") from None
        return cls.from_parent(session, path=path, budgets=budgets)

    def collect(self) -> Iterator[BudgetItem]:
        for budget in self.budgets:
            yield BudgetItem.from_parent(self, name=budget.name, budget=budget)


class BudgetItem(pytest.Item):
    """One budget entry: passes when every check holds."""

    def __init__(self, *, budget: Budget, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.budget = budget

    def runtest(self) -> None:
        from vitprof.checks.budget import evaluate
        from vitprof.render.budget import budget_document
        from vitprof.render.formats import render

        outcome = evaluate(self.budget)
        if not outcome.passed:
            raise BudgetExceeded(render(budget_document([outcome])))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, BudgetExceeded):
            return str(excinfo.value)
        if isinstance(excinfo.value, UserError):
            return f"vitprof: error: {excinfo.value}"
        return super().repr_failure(excinfo, style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"vitprof budget {self.name}"


@pytest.fixture(scope="session")
def vitprof_profile() -> Callable[..., Profile]:
    """``vitprof_profile(model, **options) -> Profile``: :func:`vitprof.analyze`, each model
    name and set of options analyzed once per session (modules are analyzed every call)."""
    from vitprof.analysis import analyze

    cache: dict[tuple[Any, ...], Profile] = {}

    def profile(model: Any, **options: Any) -> Profile:
        if not isinstance(model, str):
            return analyze(model, **options)
        key = (model, *sorted((k, repr(v)) for k, v in options.items()))
        if key not in cache:
            cache[key] = analyze(model, **options)
        return cache[key]

    return profile
