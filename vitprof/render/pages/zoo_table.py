"""``zoo.md``: every built-in model with its params, GMACs, attention share and published figure,
from the rows :func:`vitprof.checks.zoo_rows.zoo_rows` computed (see there for *matches*)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from vitprof.core.records import Component
from vitprof.render.pages.markdown import Page, n, pct
from vitprof.render.tables import CONVENTION, markdown_table

if TYPE_CHECKING:
    from vitprof.checks.zoo_rows import ZooRow


def _row(row: ZooRow) -> list[str]:
    entry, profile, published = row.entry, row.profile, row.published
    t, c = profile.totals, profile.components
    if published is None:
        shown = ["-", "-", "no published figure"]
    else:
        verdict = "yes" if row.matches else "no"
        shown = [n(published.params), f"{published.gmacs}", f"{verdict} ({published.source})"]
    return [
        entry.name, entry.family, str(entry.image_size), n(t.params), f"{t.macs / 1e9:.3f}",
        pct(profile.attention.macs, t.macs), pct(c[Component.ATTN_CORE].macs, t.macs), *shown,
    ]


def zoo_page(rows: Sequence[ZooRow]) -> Page:
    """The zoo table, one line per row (each built-in model at its default size and class
    count)."""
    headers = ["model", "family", "image size", "params", "GMACs", "attention % MACs",
               "attn_core % MACs", "published params", "published GMACs", "matches"]
    lines = [
        "# The model zoo", "",
        "Every built-in model (`vitprof models`) at its default image size, batch 1, counted on "
        "the meta device. *attention* is q/k/v projections + attention core + output "
        "projection; *attn_core* is QK^T, softmax and AV alone. A published figure matches when "
        "its params are equal and its GMACs equal vitprof's MACs rounded as printed.", "",
        f"- convention: {CONVENTION}", "",
        markdown_table(headers, [_row(row) for row in rows]),
    ]
    return Page("zoo.md", "\n".join(lines) + "\n")
