"""``zoo.md``: every built-in model with its params, GMACs, attention share and published figure.

A published figure *matches* when its parameter count equals vitprof's and its GMACs equal
vitprof's MACs rounded to the decimals it is printed with (torchvision prints three).
"""

from __future__ import annotations

from vitprof.analysis import analyze
from vitprof.core.records import Component
from vitprof.models.zoo import ZOO, Published, ZooEntry
from vitprof.render.pages.markdown import Page, n, pct
from vitprof.render.tables import CONVENTION, markdown_table


def matches(published: Published, params: int, macs: int) -> bool:
    """Same params, and the same GMACs at the precision the figure is printed with."""
    decimals = len(repr(published.gmacs).partition(".")[2])
    return published.params == params and round(macs / 1e9, decimals) == published.gmacs


def _row(entry: ZooEntry) -> list[str]:
    profile = analyze(entry.name)
    t, c = profile.totals, profile.components
    published = entry.published(entry.image_size, entry.num_classes)
    if published is None:
        shown = ["-", "-", "no published figure"]
    else:
        verdict = "yes" if matches(published, t.params, t.macs) else "no"
        shown = [n(published.params), f"{published.gmacs}", f"{verdict} ({published.source})"]
    return [
        entry.name, entry.family, str(entry.image_size), n(t.params), f"{t.macs / 1e9:.3f}",
        pct(profile.attention.macs, t.macs), pct(c[Component.ATTN_CORE].macs, t.macs), *shown,
    ]


def zoo_page() -> Page:
    """The zoo table, one row per built-in model at its default size and class count."""
    headers = ["model", "family", "image size", "params", "GMACs", "attention % MACs",
               "attn_core % MACs", "published params", "published GMACs", "matches"]
    lines = [
        "# The model zoo", "",
        "Every built-in model (`vitprof models`) at its default image size, batch 1, counted on "
        "the meta device. *attention* is q/k/v projections + attention core + output "
        "projection; *attn_core* is QK^T, softmax and AV alone. A published figure matches when "
        "its params are equal and its GMACs equal vitprof's MACs rounded as printed.", "",
        f"- convention: {CONVENTION}", "",
        markdown_table(headers, [_row(entry) for entry in ZOO.values()]),
    ]
    return Page("zoo.md", "\n".join(lines) + "\n")
