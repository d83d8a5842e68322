"""``vitprof check``: hold models to the limits of a budget file; exit 1 when one is exceeded.

Exit codes: 0 every check holds, 1 at least one limit is exceeded, 2 a usage or budget-file error
(the file is missing, malformed or outside the schema, or a model fails to build or to run);
with 2 no report is written. ``--update-baselines`` writes the baselines once every entry has
been analysed and checked and the report is written (to stdout or ``--output``), all or none: a
run that stops (exit 2, stdout full or closed included, or 130 on Ctrl-C) leaves them as they
were. It refuses, before analysing anything, a baseline path that holds another file than a
vitprof profile (a model's ``.py`` named by mistake).

Each entry is analysed at the input it names, unless the input options override it for the run
(:data:`INPUT_NOTE`): then a warning says so, every report names the override per entry, and
``--update-baselines`` is refused (a baseline is recorded at the entry's own input).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from vitprof.cli.commands.common import (
    add_shape_options,
    given_shape_options,
    input_request,
    output_path,
    shape_conflicts,
    warn,
    write_output,
)
from vitprof.cli.commands.outputs import check_folder, check_writable
from vitprof.core.errors import UserError
from vitprof.core.progress import progress
from vitprof.render.formats import choices, render

if TYPE_CHECKING:  # `vitprof check --help` imports no torch
    from vitprof.checks.baseline import Baseline
    from vitprof.checks.budget import Budget, BudgetResult
    from vitprof.count.result import Profile

INPUT_NOTE = (
    "Each entry is analysed at the input its budget names (image_size, frames, in_chans, dtype; "
    "else the model's own): its limits were written for that input. The input options below put "
    "another input in place of every entry's for this run (the options not given stay the entry's; "
    "--input-shape replaces its whole input): a warning says the limits may not have been "
    "written for it, and every format names the override per entry. To hold another input to "
    "limits of its own, write an entry for it."
)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "check", help="check models against a budget file (exit 1 when a limit is exceeded)",
        description=f"Check models against the limits of a budget file. {INPUT_NOTE}",
    )
    parser.add_argument("budgets", metavar="BUDGETS.toml", help="budget file")
    parser.add_argument("--format", choices=choices("check"), default="table")
    parser.add_argument("--output", type=output_path, metavar="FILE",
                        help="write the report to FILE")
    parser.add_argument("--entry", action="append", metavar="NAME",
                        help="check only this entry (repeatable)")
    parser.add_argument("--update-baselines", action="store_true",
                        help="rewrite each entry's baseline profile from this analysis first "
                        "(at the entry's own input: not with an input option)")
    add_shape_options(parser.add_argument_group(
        "input override", "Check every entry at this input instead of its own, for this run."))
    parser.set_defaults(run=run, validate=_usage_error)


def _usage_error(args: argparse.Namespace) -> str | None:
    """The usage error of the options given together, if any: ``--input-shape`` with what it
    excludes, or an input option with ``--update-baselines``, which records each baseline at
    the entry's own input."""
    given = given_shape_options(args)
    if given and args.update_baselines:
        return (f"--update-baselines records each baseline at the entry's own input, not at "
                f"the input of {', '.join(given)}")
    return shape_conflicts(args)


def _override_warning(given: list[str]) -> str:
    """What an input override means for the limits checked."""
    return (f"{', '.join(given)}: every entry is checked at the command line's input, not at the "
            f"input its budget names, so its limits may not have been written for it")


def _refuse_to_overwrite(budgets: list[Budget], source: str) -> None:
    """Before anything is analysed: every baseline ``--update-baselines`` would write is
    missing or a vitprof profile (:func:`~vitprof.checks.baseline.refuse_to_overwrite`), and
    can be written there: its folder, created if missing, is writable (where its temporary
    file goes), and so is the file, if it exists."""
    from vitprof.checks.baseline import refuse_to_overwrite

    for budget in budgets:
        if budget.baseline is not None:
            path = budget.baseline.path
            try:
                refuse_to_overwrite(path)
                if path.parent.exists():
                    check_writable(path)
                else:  # created by the update
                    check_folder(path.parent)
            except UserError as error:
                raise UserError(f"{source}: entry '{budget.name}', key 'baseline': {error}"
                                ) from None


def _baselines(outcomes: list[BudgetResult]) -> list[tuple[str, Baseline, Profile]]:
    """The entry name, baseline and profile of every outcome whose entry names a baseline."""
    return [(o.budget.name, baseline, o.profile) for o in outcomes
            if (baseline := o.budget.baseline) is not None]


def run(args: argparse.Namespace) -> int:
    from vitprof.checks.baseline import updated_baselines
    from vitprof.checks.budget import at_input, evaluate, load_budgets
    from vitprof.render.budget import budget_document, summary

    if args.output:
        check_writable(args.output)
    budgets = load_budgets(args.budgets)
    if args.entry:
        known = [b.name for b in budgets]
        missing = [name for name in args.entry if name not in known]
        if missing:
            raise UserError(f"{args.budgets}: no entry named {', '.join(missing)}; "
                            f"entries: {', '.join(known)}")
        budgets = [b for b in budgets if b.name in args.entry]
    budgets = [at_input(budget, input_request(args)) for budget in budgets]
    if args.update_baselines and not any(b.baseline for b in budgets):
        warn("--update-baselines: no entry names a baseline; nothing to update")
    if args.update_baselines:
        _refuse_to_overwrite(budgets, args.budgets)
    outcomes = [evaluate(budget, args.update_baselines)
                for budget in progress(budgets, desc="check", unit="entry")]
    report = render(budget_document(outcomes), args.format)
    if given := given_shape_options(args):
        warn(_override_warning(given))
    for outcome in outcomes:
        if outcome.profile.fallback:
            warn(f"entry '{outcome.budget.name}': {outcome.profile.fallback}")
    written = _baselines(outcomes) if args.update_baselines else []
    with updated_baselines([(baseline, profile) for _, baseline, profile in written]):
        write_output(report, args.output)
    for name, baseline, _ in written:
        print(f"vitprof: wrote baseline {baseline.path} for entry '{name}'", file=sys.stderr)
    if args.output or args.format != "table":
        print(f"vitprof: {summary(outcomes)}", file=sys.stderr)
    return 0 if all(o.passed for o in outcomes) else 1
