"""``vitprof sweep``: one model's counts over image sizes, depths or widths, with a figure."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from vitprof.cli.commands.common import output_path, positive_int, warn, write_output
from vitprof.cli.commands.outputs import check_figure_path, check_folder
from vitprof.core.errors import UserError
from vitprof.core.vocab import SWEEP_AXES as AXES
from vitprof.render.formats import choices, render

if TYPE_CHECKING:
    from vitprof.sweep import Sweep


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "sweep", help="count one model over image sizes, depths or widths",
        description="Analyze MODEL at each value of one dimension (meta device) and print a "
        "table; --out or --figure also writes the figure. Image-size sweeps mark where the "
        "attention core's MACs overtake the MLP's.",
    )
    parser.add_argument("model", help="model name (see 'vitprof models')")
    axis = parser.add_mutually_exclusive_group(required=True)
    for name in AXES:
        axis.add_argument(f"--{name.replace('_', '-')}", dest=name, metavar="N,N,...",
                          help=f"comma-separated values of the {AXES[name]}")
    parser.add_argument("--batch-size", type=positive_int, default=1)
    parser.add_argument("--format", choices=choices("sweep"), default="table")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--out", type=output_path, metavar="DIR",
                       help="write the figure into DIR")
    where.add_argument("--figure", type=output_path, metavar="FILE",
                       help="write the figure to FILE (.png)")
    parser.set_defaults(run=run)


def _figure_path(args: argparse.Namespace, axis: str) -> Path | None:
    """Where the figure goes (``--figure``, or a file named after the model in ``--out``),
    checked to be writable before anything is counted; None without either option."""
    from vitprof.render.figures import file_stem

    if args.figure:
        return check_figure_path(args.figure, formats=("png",))
    if args.out:
        return check_folder(args.out) / f"{file_stem(args.model)}_{axis}_sweep.png"
    return None


def _save_figure(result: Sweep, path: Path) -> None:
    from vitprof.render import figures

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        figures.save(figures.sweep_macs(result), path)
    except OSError as error:  # its text would name the temporary file beside the figure
        raise UserError(f"cannot write the figure {path}: {error.strerror or error}") from None
    except ValueError as error:
        raise UserError(f"cannot write the figure {path}: {error}") from None


def run(args: argparse.Namespace) -> int:
    from vitprof.render.sweep import sweep_document
    from vitprof.sweep import parse_values, sweep

    axis = next(name for name in AXES if getattr(args, name) is not None)
    path = _figure_path(args, axis)
    result = sweep(args.model, axis, parse_values(getattr(args, axis)),
                   batch_size=args.batch_size)
    for message in result.warnings:
        warn(message)
    if path is not None:
        _save_figure(result, path)
    write_output(render(sweep_document(result), args.format), None)
    if path is not None:
        print(f"vitprof: figure written to {path}", file=sys.stderr)
    return 0
