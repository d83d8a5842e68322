"""``vitprof models``: every built-in model name, with what it is."""

from __future__ import annotations

import argparse

from vitprof.cli.commands.common import write_output
from vitprof.models.family import ENTRIES, LIBRARIES
from vitprof.render.document import Col, Document, Table, columns, lines
from vitprof.render.formats import choices, render

_COLUMNS = columns(Col.NAME, Col.FAMILY, Col.SIZE, Col.DESCRIPTION)
# the names each library builds outside the zoo's table
_ALSO = "also: " + ", ".join(name for library in LIBRARIES for name in library.names)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("models", help="list the built-in models")
    parser.add_argument("--format", choices=choices("models"), default="table")
    parser.set_defaults(run=run)


def models_document() -> Document:
    """The zoo: one row per model, then the other kinds of names (the JSON: the rows alone).
    Read from the family files' entries (the zoo's, in its order) without importing torch."""
    rows = tuple({"name": e.name, "family": e.family, "size": e.image_size,
                  "description": e.description} for e in ENTRIES)
    data = [{"name": r["name"], "family": r["family"], "image_size": r["size"],
             "description": r["description"]} for r in rows]
    return Document((Table(_COLUMNS, rows), lines([_ALSO], bullets=False)), data)


def run(args: argparse.Namespace) -> int:
    write_output(render(models_document(), args.format), None)
    return 0
