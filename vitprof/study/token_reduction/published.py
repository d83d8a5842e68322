"""The token-reduction papers' published cost rows (``vitprof/data/token_reduction_published.csv``,
as printed in the papers' READMEs, each with its repository and commit), held against vitprof.

A row is **reproduced** when vitprof's MACs, the reduction's own included, round to the printed
figure, or lie within :data:`TOLERANCE` of it; otherwise the difference is named where
arithmetic explains it: the predictor's MACs left out, the figure cut rather than rounded. Every
figure is MACs: DynamicViT's column says FLOPs and holds MACs (2 x MACs would be twice it).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from decimal import ROUND_FLOOR, ROUND_HALF_UP, Decimal
from pathlib import Path

from vitprof.study.token_reduction.counts import BACKBONES, ReducedCount, count

DATA_FILE = Path(__file__).resolve().parents[2] / "data" / "token_reduction_published.csv"
TOLERANCE = 0.02
GIGA = 10**9


@dataclass(frozen=True)
class PublishedRow:
    """One printed row: the paper, where it is (repository file and commit, or the paper), the
    row's name, the backbone and reduction setting it counts, the figure as printed, its unit
    and the address it was read at."""

    paper: str
    source: str
    commit: str
    row: str
    backbone: str
    setting: str
    published: str  # as printed, in G
    unit: str
    url: str

    @property
    def value(self) -> Decimal:
        return Decimal(self.published)

    @property
    def built(self) -> bool:
        return self.backbone in BACKBONES


def load_rows(path: Path = DATA_FILE) -> list[PublishedRow]:
    """The rows of the shipped table, ``#`` lines skipped."""
    with path.open(newline="") as handle:
        lines = [line for line in handle if not line.startswith("#")]
    return [PublishedRow(**row) for row in csv.DictReader(lines)]


def printed(macs: int, like: Decimal, rounding: str = ROUND_HALF_UP) -> Decimal:
    """``macs`` in G at the printed figure ``like``'s decimals, rounded or (ROUND_FLOOR) cut."""
    return (Decimal(macs) / GIGA).quantize(like, rounding=rounding)


@dataclass(frozen=True)
class RowResult:
    """One published row against vitprof: its count (None: backbone not built) and the
    difference named."""

    row: PublishedRow
    count: ReducedCount | None

    @property
    def off(self) -> float:
        """vitprof's MACs / the published figure - 1."""
        assert self.count is not None
        return self.count.macs / (float(self.row.value) * GIGA) - 1

    @property
    def rounds(self) -> bool:
        """vitprof's MACs, the reduction's included, round to the printed figure."""
        return self.count is not None and printed(self.count.macs, self.row.value) == self.row.value

    @property
    def cut(self) -> bool:
        """They do not round to it but, cut to its decimals, equal it."""
        return (self.count is not None and not self.rounds
                and printed(self.count.macs, self.row.value, ROUND_FLOOR) == self.row.value)

    @property
    def without_reduction(self) -> bool:
        """They do not round to it, but the backbone's MACs alone do (the reduction's left
        out)."""
        found = self.count
        return (found is not None and not self.rounds and found.reduction_macs > 0
                and printed(found.backbone_macs, self.row.value) == self.row.value)

    @property
    def causes(self) -> list[str]:
        """The arithmetic that takes vitprof's count to the printed figure, each that holds."""
        found, value = self.count, self.row.value
        if found is None:
            return []
        causes = [f"{found.macs / GIGA:.3f} G rounds to {value}"] if self.rounds else []
        if self.cut:
            causes.append(f"printed cut, not rounded: {found.macs / GIGA:.3f} G cut to {value}")
        if self.without_reduction:
            causes.append(f"the {_reduction_name(found)} left out: {found.backbone_macs:,} "
                          f"MACs = {found.backbone_macs / GIGA:.3f} G rounds to {value}")
        return causes

    @property
    def reproduced(self) -> bool:
        return self.count is not None and (abs(self.off) <= TOLERANCE or bool(self.causes))


def _reduction_name(found: ReducedCount) -> str:
    kind = found.setting.partition("=")[0]
    return {"rho": "predictors' MACs", "keep": "fusion's MACs", "r": "matching's MACs"}[kind]


def published_results(rows: list[PublishedRow] | None = None) -> list[RowResult]:
    """Every row of the table, counted where its backbone is built."""
    rows = load_rows() if rows is None else rows
    return [RowResult(row, count(row.backbone, row.setting) if row.built else None)
            for row in rows]
