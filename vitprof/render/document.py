"""What every result turns into before it is written: a :class:`Document`.

A document is an ordered list of blocks -- :class:`Lines` (header lines, notes, summaries) and
:class:`Table` (typed columns and rows) -- plus the JSON data, the CSV comment lines and, for
results made of pass/fail checks, JUnit suites. The formats of :mod:`vitprof.render.formats`
write documents; results are turned into documents by the ``*_document`` functions of the
render modules (``profile_document``, ``budget_document``, ...). Renders; never counts.

Column vocabulary: every table's columns come from :class:`Col`, one entry per column name,
with its header and its :class:`CellKind` in :data:`COLUMNS`. A cell is written by its column's
kind; ``None`` is an empty cell in every kind.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from vitprof.core.vocab import CellKind, Col


def giga(count: int) -> str:
    """A count in billions (GMACs, GFLOPs) with thousands separators and three decimals (as
    torchvision publishes them), rounded half up in integer arithmetic (exact at any size). A
    nonzero count below 0.0005 G is written in full (up to nine decimals), never as 0.000."""
    if 0 < count < 500_000:
        return f"0.{count:09d}".rstrip("0")
    thousandths = (count + 500_000) // 1_000_000
    return f"{thousandths // 1000:,}.{thousandths % 1000:03d}"


def _count(value: int | float) -> str:
    return f"{value:g}" if isinstance(value, float) else f"{value:,}"


_WRITE: dict[CellKind, Callable[[Any], str]] = {
    CellKind.TEXT: str,
    CellKind.COUNT: _count,
    CellKind.SIGNED: lambda v: f"{v:+,}" if v else "0",
    CellKind.SHARE: lambda v: f"{v:.2%}",
    CellKind.PERCENT: lambda v: f"{v:.1%}",
    CellKind.GIGA: giga,
    CellKind.MS: lambda v: f"{v * 1e3:.3f}",
    CellKind.RATE: lambda v: f"{v / 1e9:.2f}",
    CellKind.RATIO: lambda v: f"{v:.2f}",
    CellKind.MIB: lambda v: f"{v / 2**20:.2f}",
}


# the one header and format table: column -> (header, kind)
COLUMNS: dict[Col, tuple[str, CellKind]] = {
    Col.COMPONENT: ("component", CellKind.TEXT),
    Col.BLOCK: ("block", CellKind.TEXT),
    Col.MODULE: ("module", CellKind.TEXT),
    Col.PLACED_BY: ("rule", CellKind.TEXT),
    Col.EVIDENCE: ("evidence", CellKind.TEXT),
    Col.OP: ("op", CellKind.TEXT),
    Col.CALLS: ("calls", CellKind.COUNT),
    Col.PARAMS: ("params", CellKind.COUNT),
    Col.MACS: ("MACs", CellKind.COUNT),
    Col.FLOPS: ("FLOPs", CellKind.COUNT),
    Col.VECTOR_FLOPS: ("vector FLOPs", CellKind.COUNT),
    Col.MACS_SHARE: ("% MACs", CellKind.SHARE),
    Col.FORWARD_MACS: ("forward MACs", CellKind.COUNT),
    Col.BACKWARD_MACS: ("backward MACs", CellKind.COUNT),
    Col.MACS_RATIO: ("bwd/fwd MACs", CellKind.RATIO),
    Col.FORWARD_VECTOR: ("forward vector FLOPs", CellKind.COUNT),
    Col.BACKWARD_VECTOR: ("backward vector FLOPs", CellKind.COUNT),
    Col.VECTOR_RATIO: ("bwd/fwd vector", CellKind.RATIO),
    Col.SECONDS: ("time ms", CellKind.MS),
    Col.TIME_SHARE: ("% time", CellKind.PERCENT),
    Col.GFLOPS: ("GFLOPs", CellKind.GIGA),
    Col.ACHIEVED: ("GFLOP/s", CellKind.RATE),
    Col.PEAK_SHARE: ("% peak", CellKind.PERCENT),
    Col.INTENSITY: ("FLOP/B", CellKind.RATIO),
    Col.PARAM_BYTES: ("params MiB", CellKind.MIB),
    Col.ACTIVATION_BYTES: ("activ. MiB", CellKind.MIB),
    Col.SAVED_BYTES: ("saved MiB", CellKind.MIB),
    Col.PEER: ("peer", CellKind.TEXT),
    Col.REPORTED: ("reported", CellKind.COUNT),
    Col.UNIT: ("unit", CellKind.TEXT),
    Col.DELTA_MACS: ("delta MACs", CellKind.COUNT),
    Col.RESIDUAL_MACS: ("residual MACs", CellKind.COUNT),
    Col.DELTA_PARAMS: ("delta params", CellKind.COUNT),
    Col.RESIDUAL_PARAMS: ("residual params", CellKind.COUNT),
    Col.ROW: ("row", CellKind.TEXT),
    Col.A: ("A", CellKind.COUNT),
    Col.B: ("B", CellKind.COUNT),
    Col.CHANGE: ("change", CellKind.SIGNED),
    Col.RELATIVE: ("relative", CellKind.TEXT),
    Col.CHECK: ("check", CellKind.TEXT),
    Col.LIMIT: ("limit", CellKind.TEXT),
    Col.ACTUAL: ("actual", CellKind.TEXT),
    Col.HEADROOM: ("headroom", CellKind.TEXT),
    Col.VERDICT: ("verdict", CellKind.TEXT),
    Col.NAME: ("name", CellKind.TEXT),
    Col.FAMILY: ("family", CellKind.TEXT),
    Col.SIZE: ("size", CellKind.TEXT),
    Col.DESCRIPTION: ("description", CellKind.TEXT),
}
COUNT_COLUMNS = (Col.PARAMS, Col.MACS, Col.FLOPS, Col.VECTOR_FLOPS)


@dataclass(frozen=True)
class Column:
    """One column of a table: the row key, its header and its kind."""

    key: str
    header: str
    kind: CellKind


def column(col: Col, header: str | None = None) -> Column:
    """``col`` as the vocabulary writes it (``header`` replaces a header that depends on the
    result, as a sweep's axis)."""
    default, kind = COLUMNS[col]
    return Column(col.value, default if header is None else header, kind)


def columns(*cols: Col) -> tuple[Column, ...]:
    return tuple(column(c) for c in cols)


def cell(col: Column, value: Any) -> str:
    """One cell written by its column's kind; ``None`` is empty."""
    return "" if value is None else _WRITE[col.kind](value)


def total_row(cols: Sequence[Column], rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The sums of the non-text columns (Python ints: no overflow), "total" first."""
    total: dict[str, Any] = {}
    for col in cols:
        if col.kind is CellKind.TEXT:
            total[col.key] = "" if total else "total"
        else:
            total[col.key] = sum(row[col.key] for row in rows)
    return total


# ------------------------------------------------------------------------------ blocks


@dataclass(frozen=True)
class Lines:
    """Lines of text. Markdown writes each as a bullet unless ``bullets`` is off; ``formats``
    limits the formats that show them (None: every format)."""

    lines: tuple[str, ...]
    bullets: bool = True
    formats: frozenset[str] | None = None


@dataclass(frozen=True)
class Table:
    """A table of typed columns: ``rows`` are dicts keyed by the columns' keys (raw values:
    Python ints, floats, text or None); ``total`` is the row written last (not in CSV)."""

    columns: tuple[Column, ...]
    rows: tuple[dict[str, Any], ...]
    total: dict[str, Any] | None = None
    title: str = ""
    formats: frozenset[str] | None = None

    @classmethod
    def of_cells(cls, headers: Sequence[str], cells: Sequence[Sequence[str]]) -> Table:
        """A table of cells written already (text columns keyed by position): for views
        that other pages write the same way (a sweep's)."""
        cols = tuple(Column(str(i), h, CellKind.TEXT) for i, h in enumerate(headers))
        return cls(cols, tuple({c.key: v for c, v in zip(cols, row, strict=True)}
                               for row in cells))

    @property
    def headers(self) -> list[str]:
        return [c.header for c in self.columns]

    def cells(self) -> list[list[str]]:
        """Every row's cells, the total row last."""
        rows = [*self.rows, *([self.total] if self.total is not None else [])]
        return [[cell(c, row.get(c.key)) for c in self.columns] for row in rows]


Block = Lines | Table
BLANK = Lines(("",), bullets=False)


def lines(items: Iterable[str], *, bullets: bool = True,
          only: Iterable[str] | None = None) -> Lines:
    """A :class:`Lines` block; ``only``: the formats that show it."""
    return Lines(tuple(items), bullets, None if only is None else frozenset(only))


def only(block: Table, *formats: str) -> Table:
    """``block`` shown in ``formats`` alone."""
    return replace(block, formats=frozenset(formats))


@dataclass(frozen=True)
class Case:
    """One check as a JUnit test case; ``failure`` is (message, text) when it failed."""

    name: str
    failure: tuple[str, str] | None = None


@dataclass(frozen=True)
class Suite:
    """A group of checks (a JUnit ``<testsuite>``) with its properties and its output."""

    name: str
    cases: tuple[Case, ...]
    properties: tuple[tuple[str, str], ...] = ()
    output: str = ""


@dataclass(frozen=True)
class Document:
    """A result ready to be written in any of its formats.

    ``data`` is the JSON (validated against the schema ``schema`` and versioned when one is
    named); ``comments`` go first in CSV (``# ...``); ``suites`` are the JUnit test suites under
    ``<testsuites name=suites_name>`` with failures of type ``failure_type``.
    """

    blocks: tuple[Block, ...]
    data: Any = None
    schema: str | None = None
    comments: tuple[str, ...] = ()
    suites: tuple[Suite, ...] = ()
    suites_name: str = ""
    failure_type: str = ""

    def shown(self, fmt: str) -> list[Block]:
        """The blocks ``fmt`` writes, in order."""
        return [b for b in self.blocks if b.formats is None or fmt in b.formats]

    def tables(self, fmt: str) -> list[Table]:
        return [b for b in self.shown(fmt) if isinstance(b, Table)]
