"""Turn a Profile into tables (text, markdown, CSV, HTML) or JSON. Renders; never counts.

Every view is a list of rows of Python ints (exact at any size, never a fixed-width integer)
whose count columns add up to the profile's totals. Cells are formatted by their column's kind
(:class:`Kind`): text as is, counts with thousands separators, shares as percentages.

CSV: one row per view row, no total row. When the count fell back from meta to the CPU, the
first line is a comment, ``# fallback: <why>``, before the header (``pandas.read_csv(...,
comment="#")`` skips it); without a fallback the CSV has no comment line.
"""

from __future__ import annotations

import csv
import html
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from vitprof.core.records import COMPONENTS, Counts
from vitprof.count.result import Profile
from vitprof.render.schema import versioned

VIEWS = ("component", "block", "module", "op")
FORMATS = ("table", "markdown", "json", "csv")
CONVENTION = (
    "MACs = multiply-accumulates of matmul/linear/conv/attention products; FLOPs = 2 x MACs; "
    "vector FLOPs = element-wise work (LayerNorm, softmax, GELU, bias and residual adds) at the "
    "per-element costs of vitprof.count.formulas"
)


class Kind(StrEnum):
    """How a column's cells are written."""

    TEXT = "text"  # str(value); the total row leaves it empty (the first column says "total")
    COUNT = "count"  # an exact integer with thousands separators; the total row sums it
    SHARE = "share"  # a fraction of the total MACs, as a percentage; the total row sums it


@dataclass(frozen=True)
class Column:
    """One column of a view: the row key, its header and its kind."""

    key: str
    header: str
    kind: Kind


_TEXT = {name: Column(name, name, Kind.TEXT) for name in ("component", "block", "module", "op")}
_COUNTS = (
    Column("params", "params", Kind.COUNT),
    Column("macs", "MACs", Kind.COUNT),
    Column("flops", "FLOPs", Kind.COUNT),
    Column("vector_flops", "vector FLOPs", Kind.COUNT),
    Column("macs_share", "% MACs", Kind.SHARE),
)
_KEYS: dict[str, tuple[Column, ...]] = {
    "component": (_TEXT["component"],),
    "block": (_TEXT["block"], _TEXT["component"]),
    "module": (_TEXT["module"], _TEXT["component"]),
    "op": (_TEXT["op"], Column("calls", "calls", Kind.COUNT)),
}


def view_columns(by: str) -> tuple[Column, ...]:
    """The columns of one view: its keys, then the counts and the MACs share."""
    if by not in _KEYS:
        raise ValueError(f"unknown view {by}")
    return (*_KEYS[by], *_COUNTS)


def view_rows(profile: Profile, by: str) -> list[dict[str, Any]]:
    """Rows of one view whose count columns add up to the profile's totals.

    ``block`` adds an ``outside`` row per component for what no block holds; ``op`` adds a
    ``(parameters)`` row (parameters belong to no op).
    """
    rows = {
        "component": profile.component_rows,
        "block": lambda: _blocks_with_outside(profile),
        "module": profile.module_rows,
        "op": lambda: [*profile.op_rows(), _param_row(profile.totals.params)],
    }[by]()
    macs = profile.totals.macs
    return [{**row, "macs_share": row["macs"] / macs if macs else 0.0} for row in rows]


def _blocks_with_outside(profile: Profile) -> list[dict[str, Any]]:
    outside = dict(profile.components)
    for block in profile.blocks:
        for component, counts in block.components.items():
            outside[component] = _minus(outside[component], counts)
    return [*profile.block_rows(),
            *({"block": "outside", "component": str(c), **outside[c].as_dict()}
              for c in COMPONENTS if outside[c] != Counts())]


def _minus(a: Counts, b: Counts) -> Counts:
    return Counts(a.params - b.params, a.macs - b.macs, a.vector_flops - b.vector_flops)


def _param_row(params: int) -> dict[str, Any]:
    return {"op": "(parameters)", "calls": 0, **Counts(params=params).as_dict()}


def total_row(columns: Sequence[Column], rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The sums of the count and share columns (Python ints: no overflow), "total" first."""
    total: dict[str, Any] = {}
    for column in columns:
        if column.kind is Kind.TEXT:
            total[column.key] = "" if total else "total"
        else:
            total[column.key] = sum(row[column.key] for row in rows)
    return total


def cell(column: Column, value: Any) -> str:
    """One cell written by its column's kind."""
    if column.kind is Kind.COUNT:
        return f"{value:,}"
    if column.kind is Kind.SHARE:
        return f"{value:.2%}"
    return str(value)


def cells(columns: Sequence[Column], rows: Sequence[dict[str, Any]]) -> list[list[str]]:
    """Every row's cells, in the columns' order."""
    return [[cell(column, row[column.key]) for column in columns] for row in rows]


def giga(count: int) -> str:
    """A count in billions (GMACs, GFLOPs) with thousands separators and three decimals (as
    torchvision publishes them), rounded half up in integer arithmetic (exact at any size). A
    nonzero count below 0.0005 G is written in full (up to nine decimals), never as 0.000."""
    if 0 < count < 500_000:
        return f"0.{count:09d}".rstrip("0")
    thousandths = (count + 500_000) // 1_000_000
    return f"{thousandths // 1000:,}.{thousandths % 1000:03d}"


def text_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain aligned table: text left, numbers right. No rows: the header and the rule."""
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    numeric = [all(_is_number(r[i]) for r in rows) for i in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.rjust(w) if n else c.ljust(w) for c, w, n in zip(cells, widths, numeric, strict=True)
        ).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), rule, *(line(r) for r in rows)])


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub pipe table, numbers right-aligned."""
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


def input_text(shape: Sequence[int]) -> str:
    """An input shape ``(batch, channels, *spatial)`` of any rank: ``batch 1, 3x224x224``."""
    return f"batch {shape[0]}, {'x'.join(str(n) for n in shape[1:])}"


def header_lines(profile: Profile) -> list[str]:
    """What was counted, on what, under which convention."""
    lines = [
        f"model: {profile.model} (recognized as {profile.family})",
        f"input: {input_text(profile.input_shape)}; device {profile.device}; "
        f"torch {profile.torch_version}",
        f"attention: {profile.attention_implementation}",
        f"convention: {CONVENTION}",
    ]
    if profile.fallback:
        lines.append(f"fallback: {profile.fallback}")
    return lines


def summary_line(profile: Profile) -> str:
    """The totals in one line, exact integers (and the MACs in billions)."""
    t = profile.totals
    return (f"total: {t.params:,} params, {t.macs:,} MACs ({giga(t.macs)} GMACs), "
            f"{t.flops:,} FLOPs, {t.vector_flops:,} vector FLOPs")


def table_cells(profile: Profile, by: str) -> tuple[list[str], list[list[str]]]:
    """Headers and cells of one view, the total row last."""
    columns, rows = view_columns(by), view_rows(profile, by)
    return [c.header for c in columns], cells(columns, [*rows, total_row(columns, rows)])


def csv_text(profile: Profile, by: str) -> str:
    """One view as CSV (exact integers), after a ``# fallback: ...`` line if it fell back."""
    out = io.StringIO()
    if profile.fallback:
        out.write(f"# fallback: {profile.fallback}\n")
    columns = view_columns(by)
    writer = csv.DictWriter(out, [c.key for c in columns], lineterminator="\n")
    writer.writeheader()
    writer.writerows(view_rows(profile, by))
    return out.getvalue()


def render(profile: Profile, by: str = "component", fmt: str = "table") -> str:
    """The analysis of ``profile`` in one view and one format."""
    if fmt == "json":
        data = profile.to_dict()
        if by in ("module", "op"):
            data[f"by_{by}"] = view_rows(profile, by)
        return json.dumps(versioned(data, "profile"), indent=2)
    if fmt == "csv":
        return csv_text(profile, by)
    headers, rows = table_cells(profile, by)
    if fmt == "markdown":
        head = "\n".join(f"- {line}" for line in header_lines(profile))
        return f"{head}\n\n{markdown_table(headers, rows)}\n"
    return "\n".join([*header_lines(profile), summary_line(profile), "",
                      text_table(headers, rows)]) + "\n"


# ------------------------------------------------------------------------------ notebook / repr


def profile_repr(profile: Profile) -> str:
    """A short text: model, input, totals and the component table (``repr(profile)``)."""
    shape = "x".join(str(n) for n in profile.input_shape)
    head = (f"Profile({profile.model}, {profile.family}, input {shape} on {profile.device}, "
            f"{profile.mode})")
    extra = [f"fallback: {profile.fallback}"] if profile.fallback else []
    extra += [f"warning: {w}" for w in profile.warnings]
    return "\n".join([head, summary_line(profile), *extra, "",
                      text_table(*table_cells(profile, "component"))])


def profile_html(profile: Profile) -> str:
    """The header lines, the totals and the component table as HTML (a notebook's display)."""
    items = "".join(f"<li>{html.escape(line)}</li>"
                    for line in [*header_lines(profile), summary_line(profile)])
    return f"<ul>{items}</ul>\n{html_table(*table_cells(profile, 'component'))}"
