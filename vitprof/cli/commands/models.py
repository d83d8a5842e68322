"""``vitprof models``: every built-in model name, with what it is."""

from __future__ import annotations

import argparse
import shutil
import textwrap
from typing import Any

from vitprof.cli.commands.common import write_output
from vitprof.models.libraries import ENTRIES, LIBRARIES
from vitprof.render.document import Col, Document, Table, columns, lines
from vitprof.render.formats import choices, render

_COLUMNS = columns(Col.NAME, Col.FAMILY, Col.SIZE, Col.DESCRIPTION)
# the names each library builds outside the zoo's table
_ALSO = "also: " + ", ".join(name for library in LIBRARIES for name in library.names)
_NARROWEST = 20  # the fewest columns a description is wrapped to, however narrow the terminal


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("models", help="list the built-in models")
    parser.add_argument("--format", choices=choices("models"), default="table")
    parser.set_defaults(run=run)


def models_document(width: int = 80) -> Document:
    """The zoo: one row per model, then the other kinds of names (the JSON: the rows alone).
    Read from the family files' entries (the zoo's, in its order) without importing torch.

    The table fits ``width`` columns: each model's name, family and size start its line, its
    description is wrapped on the lines below it, in its column, and the other kinds of names
    are wrapped between names; the JSON keeps each description whole. A terminal narrower than
    the name, family and size columns plus 20 gets lines of that much.
    """
    rows = tuple({"name": e.name, "family": e.family, "size": e.image_size,
                  "description": e.description} for e in ENTRIES)
    data = [{"name": r["name"], "family": r["family"], "image_size": r["size"],
             "description": r["description"]} for r in rows]
    # the columns before the description, each as wide as its widest cell, two spaces apart
    before = sum(max(len(c.header), *(len(str(r[c.key])) for r in rows)) + 2
                 for c in _COLUMNS[:-1])
    wrapped = tuple(part for row in rows for part in _wrapped(row, max(width - before, _NARROWEST)))
    also = textwrap.wrap(_ALSO, max(width, _NARROWEST), subsequent_indent="  ",
                         break_long_words=False, break_on_hyphens=False)
    return Document((Table(_COLUMNS, wrapped), lines(also, bullets=False)), data)


def _wrapped(row: dict[str, Any], width: int) -> list[dict[str, Any]]:
    """``row`` with its description cut into lines of ``width``: the first on the row, each
    further one a row of its own with the other cells empty."""
    parts = textwrap.wrap(row["description"], width, break_long_words=False,
                          break_on_hyphens=False) or [""]
    return [{**row, "description": parts[0]}, *({"description": part} for part in parts[1:])]


def run(args: argparse.Namespace) -> int:
    width = shutil.get_terminal_size().columns  # COLUMNS, the terminal's, else 80
    write_output(render(models_document(width), args.format), None)
    return 0
