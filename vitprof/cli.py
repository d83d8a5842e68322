"""The ``vitprof`` command line: ``build_parser()`` and ``main(argv) -> int``.

User errors end in one line on stderr and exit code 2; usage errors are argparse's (exit 2).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from vitprof.errors import UserError

COMMANDS = ("analyze", "models", "check", "formula", "crosscheck", "profile", "report", "sweep")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
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
