"""What every result turns into before it is written: a :class:`Document`.

A document is an ordered list of blocks -- :class:`Lines` (header lines, notes, summaries) and
:class:`Table` (typed columns and rows) -- plus the JSON data, the CSV comment lines and, for
results made of pass/fail checks, JUnit suites. The formats of :mod:`vitprof.render.formats`
write documents; results are turned into documents by the ``*_document`` functions of the
render modules (``profile_document``, ``budget_document``, ...). Renders; never counts.

Column vocabulary: every table's columns come from :class:`Col`, one entry per column name,
with its header and its :class:`Kind` in :data:`COLUMNS`. A cell is written by its column's
kind; ``None`` is an empty cell in every kind.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any


class Kind(StrEnum):
    """How a column's cells are written (``None``: an empty cell)."""

    TEXT = "text"  # str(value); a total row leaves it empty (its first column says "total")
    COUNT = "count"  # an exact integer with thousands separators (a float: %g); totals sum it
    SIGNED = "signed"  # a change: +1,234 or -1,234, and 0 without a sign
    SHARE = "share"  # a fraction as a percentage, two decimals (0.0407 -> 4.07%); totals sum it
    PERCENT = "percent"  # a fraction as a percentage, one decimal (0.407 -> 40.7%)
    GIGA = "giga"  # a count in billions, three decimals (:func:`giga`)
    MS = "ms"  # seconds written in milliseconds, three decimals
    RATE = "rate"  # per second, in billions (GFLOP/s), two decimals
    RATIO = "ratio"  # a plain ratio, two decimals
    MIB = "mib"  # bytes in MiB, two decimals


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


_WRITE: dict[Kind, Callable[[Any], str]] = {
    Kind.TEXT: str,
    Kind.COUNT: _count,
    Kind.SIGNED: lambda v: f"{v:+,}" if v else "0",
    Kind.SHARE: lambda v: f"{v:.2%}",
    Kind.PERCENT: lambda v: f"{v:.1%}",
    Kind.GIGA: giga,
    Kind.MS: lambda v: f"{v * 1e3:.3f}",
    Kind.RATE: lambda v: f"{v / 1e9:.2f}",
    Kind.RATIO: lambda v: f"{v:.2f}",
    Kind.MIB: lambda v: f"{v / 2**20:.2f}",
}


class Col(StrEnum):
    """Every column name of every table; the value is the row key (and the CSV header)."""

    # analysis views (analyze, formula)
    COMPONENT = "component"
    BLOCK = "block"
    MODULE = "module"
    PLACED_BY = "placed_by"  # the recognition rule that placed a row's records
    EVIDENCE = "evidence"
    OP = "op"
    CALLS = "calls"
    PARAMS = "params"
    MACS = "macs"
    FLOPS = "flops"
    VECTOR_FLOPS = "vector_flops"
    MACS_SHARE = "macs_share"
    # a training step's phases
    FORWARD_MACS = "forward_macs"
    BACKWARD_MACS = "backward_macs"
    MACS_RATIO = "macs_ratio"
    FORWARD_VECTOR = "forward_vector_flops"
    BACKWARD_VECTOR = "backward_vector_flops"
    VECTOR_RATIO = "vector_flops_ratio"
    # profile (measured)
    SECONDS = "seconds"
    TIME_SHARE = "time_share"
    GFLOPS = "gflops"
    ACHIEVED = "achieved"
    PEAK_SHARE = "peak_share"
    INTENSITY = "intensity"
    PARAM_BYTES = "param_bytes"
    ACTIVATION_BYTES = "activation_bytes"
    SAVED_BYTES = "saved_bytes"
    # crosscheck
    PEER = "peer"
    REPORTED = "reported"
    UNIT = "unit"
    DELTA_MACS = "delta_macs"
    RESIDUAL_MACS = "residual_macs"
    DELTA_PARAMS = "delta_params"
    RESIDUAL_PARAMS = "residual_params"
    # diff
    ROW = "row"
    A = "a"
    B = "b"
    CHANGE = "change"
    RELATIVE = "relative"
    # check (budgets): limits and values are written in their check's own unit
    CHECK = "check"
    LIMIT = "limit"
    ACTUAL = "actual"
    HEADROOM = "headroom"
    VERDICT = "verdict"
    # models
    NAME = "name"
    FAMILY = "family"
    SIZE = "size"
    DESCRIPTION = "description"


# the one header and format table: column -> (header, kind)
COLUMNS: dict[Col, tuple[str, Kind]] = {
    Col.COMPONENT: ("component", Kind.TEXT),
    Col.BLOCK: ("block", Kind.TEXT),
    Col.MODULE: ("module", Kind.TEXT),
    Col.PLACED_BY: ("rule", Kind.TEXT),
    Col.EVIDENCE: ("evidence", Kind.TEXT),
    Col.OP: ("op", Kind.TEXT),
    Col.CALLS: ("calls", Kind.COUNT),
    Col.PARAMS: ("params", Kind.COUNT),
    Col.MACS: ("MACs", Kind.COUNT),
    Col.FLOPS: ("FLOPs", Kind.COUNT),
    Col.VECTOR_FLOPS: ("vector FLOPs", Kind.COUNT),
    Col.MACS_SHARE: ("% MACs", Kind.SHARE),
    Col.FORWARD_MACS: ("forward MACs", Kind.COUNT),
    Col.BACKWARD_MACS: ("backward MACs", Kind.COUNT),
    Col.MACS_RATIO: ("bwd/fwd MACs", Kind.RATIO),
    Col.FORWARD_VECTOR: ("forward vector FLOPs", Kind.COUNT),
    Col.BACKWARD_VECTOR: ("backward vector FLOPs", Kind.COUNT),
    Col.VECTOR_RATIO: ("bwd/fwd vector", Kind.RATIO),
    Col.SECONDS: ("time ms", Kind.MS),
    Col.TIME_SHARE: ("% time", Kind.PERCENT),
    Col.GFLOPS: ("GFLOPs", Kind.GIGA),
    Col.ACHIEVED: ("GFLOP/s", Kind.RATE),
    Col.PEAK_SHARE: ("% peak", Kind.PERCENT),
    Col.INTENSITY: ("FLOP/B", Kind.RATIO),
    Col.PARAM_BYTES: ("params MiB", Kind.MIB),
    Col.ACTIVATION_BYTES: ("activ. MiB", Kind.MIB),
    Col.SAVED_BYTES: ("saved MiB", Kind.MIB),
    Col.PEER: ("peer", Kind.TEXT),
    Col.REPORTED: ("reported", Kind.COUNT),
    Col.UNIT: ("unit", Kind.TEXT),
    Col.DELTA_MACS: ("delta MACs", Kind.COUNT),
    Col.RESIDUAL_MACS: ("residual MACs", Kind.COUNT),
    Col.DELTA_PARAMS: ("delta params", Kind.COUNT),
    Col.RESIDUAL_PARAMS: ("residual params", Kind.COUNT),
    Col.ROW: ("row", Kind.TEXT),
    Col.A: ("A", Kind.COUNT),
    Col.B: ("B", Kind.COUNT),
    Col.CHANGE: ("change", Kind.SIGNED),
    Col.RELATIVE: ("relative", Kind.TEXT),
    Col.CHECK: ("check", Kind.TEXT),
    Col.LIMIT: ("limit", Kind.TEXT),
    Col.ACTUAL: ("actual", Kind.TEXT),
    Col.HEADROOM: ("headroom", Kind.TEXT),
    Col.VERDICT: ("verdict", Kind.TEXT),
    Col.NAME: ("name", Kind.TEXT),
    Col.FAMILY: ("family", Kind.TEXT),
    Col.SIZE: ("size", Kind.TEXT),
    Col.DESCRIPTION: ("description", Kind.TEXT),
}
COUNT_COLUMNS = (Col.PARAMS, Col.MACS, Col.FLOPS, Col.VECTOR_FLOPS)


@dataclass(frozen=True)
class Column:
    """One column of a table: the row key, its header and its kind."""

    key: str
    header: str
    kind: Kind


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
        if col.kind is Kind.TEXT:
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
        cols = tuple(Column(str(i), h, Kind.TEXT) for i, h in enumerate(headers))
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
