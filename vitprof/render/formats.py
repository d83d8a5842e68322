"""The one output-format registry: a format's name -> the function writing a document in it.

``render(document, fmt)`` writes any :class:`~vitprof.render.document.Document` in any format of
:data:`FORMATS`; a command's ``--format`` offers the formats whose entry names the command
(:func:`choices`). Adding a format is one entry here.

- ``table``: the lines as they are, tables aligned (text left, numbers right), a title as
  ``title:``; ``markdown``: lines as bullets, GitHub pipe tables, a title in bold; ``html``: the
  lines in one list, then the tables (a notebook's display). A line break in a table cell (a
  module's name may hold one) is written ``\\n`` in table and markdown, and a ``|`` is ``\\|`` in
  markdown, so that every row stays one row; HTML escapes cells, CSV quotes them.
- ``json``: the document's data (with ``schema_version`` first when it names a schema).
- ``csv``: the document's first table, one line per row (raw values: exact integers, no total
  row), through the csv module (a comma inside a cell is quoted, never lost), after its
  ``# comment`` lines.
- ``junit``: JUnit XML, a ``<testsuite>`` per suite, a ``<testcase>`` per check, ``<failure>``
  for a failed one.
"""

from __future__ import annotations

import csv
import html
import io
import json
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from vitprof.core.schema import versioned
from vitprof.render.document import Document, Lines, Table


def _on_one_line(cell: str) -> str:
    """A cell kept on its row: a line break in it (a module may be named ``"a\\nb"``) written
    visibly, as ``\\n`` (``\\r`` as ``\\r``)."""
    return cell.replace("\r", "\\r").replace("\n", "\\n")


def _markdown_cell(cell: str) -> str:
    """A cell of a pipe table: on one line, a ``|`` in it escaped as ``\\|``."""
    return _on_one_line(cell).replace("|", "\\|")


def text_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain aligned table: text left, numbers right, every cell on its row
    (:func:`_on_one_line`). No rows: the header and the rule."""
    headers = [_on_one_line(h) for h in headers]
    rows = [[_on_one_line(c) for c in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    numeric = [all(_is_number(r[i]) for r in rows) for i in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.rjust(w) if n else c.ljust(w) for c, w, n in zip(cells, widths, numeric, strict=True)
        ).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), rule, *(line(r) for r in rows)])


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub pipe table, numbers right-aligned, every cell on its row with its ``|``
    escaped (:func:`_markdown_cell`)."""
    headers = [_markdown_cell(h) for h in headers]
    rows = [[_markdown_cell(c) for c in row] for row in rows]
    numeric = [all(_is_number(r[i]) for r in rows) for i in range(len(headers))]
    align = ["---:" if n else ":---" for n in numeric]
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def html_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """An HTML table (escaped), numbers right-aligned: for notebook displays."""
    numeric = [all(_is_number(r[i]) for r in rows) for i in range(len(headers))]

    def line(tag: str, cells: Sequence[str]) -> str:
        return "<tr>" + "".join(
            f'<{tag} style="text-align: {"right" if n else "left"}">{html.escape(c)}</{tag}>'
            for c, n in zip(cells, numeric, strict=True)
        ) + "</tr>"

    body = "\n".join(line("td", r) for r in rows)
    return f"<table>\n<thead>{line('th', headers)}</thead>\n<tbody>\n{body}\n</tbody>\n</table>"


def _is_number(cell: str) -> bool:
    digits = cell.replace(",", "").replace(".", "").replace("%", "").lstrip("+-")
    return digits.isdigit() or not cell


def _lines(document: Document, fmt: str, markdown: bool) -> str:
    out: list[str] = []
    for block in document.shown(fmt):
        if isinstance(block, Lines):
            out += [f"- {line}" if markdown and block.bullets else line for line in block.lines]
        elif markdown:
            out += [f"**{block.title}**", ""] if block.title else []
            out.append(markdown_table(block.headers, block.cells()))
        else:
            out += [f"{block.title}:"] if block.title else []
            out.append(text_table(block.headers, block.cells()))
    return "\n".join(out) + "\n"


def write_table(document: Document) -> str:
    return _lines(document, "table", markdown=False)


def write_markdown(document: Document) -> str:
    return _lines(document, "markdown", markdown=True)


def write_html(document: Document) -> str:
    """The lines in one ``<ul>``, then the tables."""
    shown = document.shown("html")
    items = "".join(f"<li>{html.escape(line)}</li>" for block in shown
                    if isinstance(block, Lines) for line in block.lines if line)
    tables = [html_table(b.headers, b.cells()) for b in shown if isinstance(b, Table)]
    return "\n".join([f"<ul>{items}</ul>", *tables])


def write_json(document: Document) -> str:
    if document.data is None:
        raise ValueError("this result has no JSON form")
    data = document.data if document.schema is None else versioned(document.data,
                                                                    document.schema)
    return json.dumps(data, indent=2)


def write_csv(document: Document) -> str:
    tables = document.tables("csv")
    if not tables:
        raise ValueError("this result has no table to write as CSV")
    table = tables[0]
    out = io.StringIO()
    out.writelines(f"# {comment}\n" for comment in document.comments)
    writer = csv.DictWriter(out, [c.key for c in table.columns], lineterminator="\n")
    writer.writeheader()
    writer.writerows(table.rows)
    return out.getvalue()


def write_junit(document: Document) -> str:
    if not document.suites:
        raise ValueError("this result has no checks to write as JUnit")
    cases = [case for suite in document.suites for case in suite.cases]
    failures = sum(case.failure is not None for case in cases)
    root = ET.Element("testsuites", name=document.suites_name, tests=str(len(cases)),
                      failures=str(failures), errors="0")
    for suite in document.suites:
        failed = sum(case.failure is not None for case in suite.cases)
        element = ET.SubElement(root, "testsuite", name=suite.name, tests=str(len(suite.cases)),
                                failures=str(failed), errors="0", skipped="0")
        properties = ET.SubElement(element, "properties")
        for name, value in suite.properties:
            ET.SubElement(properties, "property", name=name, value=value)
        for case in suite.cases:
            test = ET.SubElement(element, "testcase", classname=suite.name, name=case.name)
            if case.failure is not None:
                message, text = case.failure
                ET.SubElement(test, "failure", message=message,
                              type=document.failure_type).text = text
        ET.SubElement(element, "system-out").text = suite.output
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


@dataclass(frozen=True)
class Format:
    """One output format: its writer and the commands whose ``--format`` offers it."""

    name: str
    write: Callable[[Document], str]
    commands: tuple[str, ...]


_EVERY = ("analyze", "check", "crosscheck", "diff", "formula", "models", "profile", "sweep",
          "memory")
_PROSE = ("analyze", "crosscheck", "diff", "formula", "profile", "sweep", "memory")
FORMATS: dict[str, Format] = {f.name: f for f in (
    Format("table", write_table, _EVERY),
    Format("markdown", write_markdown, _PROSE),
    Format("json", write_json, _EVERY),
    Format("csv", write_csv, ("analyze",)),
    Format("junit", write_junit, ("check",)),
    Format("html", write_html, ()),  # notebook displays (``_repr_html_``)
)}


def choices(command: str) -> tuple[str, ...]:
    """The formats ``command``'s ``--format`` offers, in the registry's order."""
    return tuple(name for name, f in FORMATS.items() if command in f.commands)


def render(document: Document, fmt: str = "table") -> str:
    """``document`` written in the format ``fmt`` (one of :data:`FORMATS`)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt}; choose from {', '.join(FORMATS)}")
    return FORMATS[fmt].write(document)
