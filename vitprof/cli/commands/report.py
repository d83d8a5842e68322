"""``vitprof report``: markdown reports with figures, or ``--check`` that they are up to date."""

from __future__ import annotations

import argparse
import sys

from vitprof.cli.commands.common import warn, write_output
from vitprof.cli.commands.outputs import check_folder


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "report", help="write markdown reports with figures (or check them)",
        description="Write one markdown report per model, figures beside it. --all writes the "
        "torchvision ViTs, note 002's Dynamic ViT, the zoo table, the corrections to the source "
        "notes and an index.",
    )
    parser.add_argument("models", nargs="*", metavar="MODEL",
                        help="model names (see 'vitprof models'), timm:NAME, hf:..., or "
                        "timm-published: timm's results table against vitprof (slow)")
    parser.add_argument("--all", action="store_true", dest="everything",
                        help="every torchvision ViT, note002_dynamic_vit, zoo.md, corrections.md "
                        "and README.md")
    parser.add_argument("--out", default="reports", metavar="DIR",
                        help="folder to write (or check) the reports in (default: reports)")
    parser.add_argument("--check", action="store_true",
                        help="regenerate into a temporary folder and fail (exit 1) if DIR "
                        "differs; without MODEL it checks everything")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from vitprof.cli.pages.check import check
    from vitprof.cli.pages.generate import pages, write

    everything = args.everything or (args.check and not args.models)
    if args.check:
        problems = check(args.out, args.models, everything)
        for problem in problems:
            print(f"vitprof: {problem}", file=sys.stderr)
        if problems:
            print(f"vitprof: {args.out} is out of date; regenerate with 'vitprof report "
                  f"{'--all' if everything else ' '.join(args.models)} --out {args.out}'",
                  file=sys.stderr)
            return 1
        write_output(f"{args.out} is up to date", None)
        return 0
    check_folder(args.out)
    found = pages(args.models, everything)
    for page in found:
        for message in page.warnings:
            warn(f"{page.name}: {message}")
    for path in write(found, args.out):
        write_output(str(path), None)
    return 0
