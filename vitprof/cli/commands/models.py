"""``vitprof models``: every built-in model name, with what it is."""

from __future__ import annotations

import argparse
import json

from vitprof.cli.commands.common import write_output
from vitprof.models.entries import ZOO
from vitprof.render.tables import text_table


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("models", help="list the built-in models")
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.format == "json":
        rows = [{"name": e.name, "family": e.family, "image_size": e.image_size,
                 "description": e.description} for e in ZOO.values()]
        write_output(json.dumps(rows, indent=2), None)
        return 0
    rows = [[e.name, e.family, str(e.image_size), e.description] for e in ZOO.values()]
    table = text_table(["name", "family", "size", "description"], rows)
    footer = ("\nalso: timm:NAME, hf:path/to/config.json, path/to/file.py:factory, "
              "package.module:factory")
    write_output(table + footer, None)
    return 0
