"""The ``vitprof`` command line: ``build_parser()`` and ``main(argv) -> int``.

User errors and usage errors alike end in one line on stderr and exit code 2: the parser prints
the error and where to find the usage instead of argparse's multi-line usage block.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import NoReturn

from vitprof.errors import UserError

COMMANDS = ("analyze", "models", "check", "formula", "crosscheck", "profile", "report", "sweep",
            "diff")


class OneLineErrorParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose usage errors are one line on stderr (exit code 2).

    Sub-command parsers inherit the class (``add_subparsers`` uses the parent's type).
    """

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
        prog="vitprof",
        description="Exact params and MACs of Vision Transformers, per component.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"vitprof.commands.{name}").add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except UserError as error:
        print(f"vitprof: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("vitprof: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
