"""What the zoo page shows, computed: every built-in model's Profile at its default image size
and class count, its published figure and whether that figure matches vitprof's count.

A published figure *matches* when its parameter count equals vitprof's and its GMACs equal
vitprof's MACs rounded to the decimals it is printed with (torchvision prints three).
:func:`vitprof.study.pages.zoo_table.zoo_page` renders the rows without counting anything.
"""

from __future__ import annotations

from dataclasses import dataclass

from vitprof.analysis import analyze
from vitprof.count.result import Profile
from vitprof.models.libraries.base import Published
from vitprof.models.zoo import ZOO, ZooEntry


@dataclass(frozen=True)
class ZooRow:
    """One built-in model: its entry, its Profile, its published figure (None when there is
    none) and whether that figure matches (False when there is none)."""

    entry: ZooEntry
    profile: Profile
    published: Published | None
    matches: bool


def matches(published: Published, params: int, macs: int) -> bool:
    """Same params, and the same GMACs at the precision the figure is printed with."""
    decimals = len(repr(published.gmacs).partition(".")[2])
    return published.params == params and round(macs / 1e9, decimals) == published.gmacs


def zoo_row(entry: ZooEntry) -> ZooRow:
    """The entry analysed at its default size and class count, against its published figure."""
    profile = analyze(entry.name)
    published = entry.published(entry.image_size, entry.num_classes)
    found = published is not None and matches(published, profile.totals.params,
                                              profile.totals.macs)
    return ZooRow(entry, profile, published, found)


def zoo_rows() -> list[ZooRow]:
    """One row per built-in model, in the zoo's order."""
    return [zoo_row(entry) for entry in ZOO.values()]
