"""``zoo.md``: every built-in model with its params, GMACs, attention share and published figure,
from the rows :func:`vitprof.study.zoo_rows.zoo_rows` computed (see there for *matches*)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from matplotlib.figure import Figure

from vitprof.core.vocab import Component
from vitprof.render import figures
from vitprof.render.figures import FigureData
from vitprof.render.tables import CONVENTION, markdown_table
from vitprof.study.pages.markdown import Page, n, pct

if TYPE_CHECKING:
    from vitprof.study.zoo_rows import ZooRow


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


SCATTER = "zoo.png"
NEAR = 1.05  # points closer than this ratio in both params and GMACs share one label
# family: marker, size, colour; Hugging Face's copies of torchvision's ViTs are larger hollow
# squares, to be seen around the point they share
MARKERS = {"torchvision": ("o", 20, "#1f77b4"), "huggingface": ("s", 70, "#ff7f0e"),
           "notes": ("^", 30, "#2ca02c")}


def zoo_scatter(rows: Sequence[ZooRow]) -> FigureData:
    """Params against GMACs, one point per built-in model (at its default size), by family."""
    return FigureData("zoo", "The model zoo: params against GMACs", {
        "models": [row.entry.name for row in rows],
        "families": [row.entry.family for row in rows],
        "params": [row.profile.totals.params for row in rows],
        "macs": [row.profile.totals.macs for row in rows],
    })


def _draw(fig: Figure, data: dict) -> None:
    fig.set_size_inches(8.0, 6.0)
    ax = fig.add_subplot()
    xs = [m / 1e9 for m in data["macs"]]
    ys = [p / 1e6 for p in data["params"]]
    for family in sorted(set(data["families"])):
        mine = [i for i, f in enumerate(data["families"]) if f == family]
        marker, size, color = MARKERS.get(family, ("D", 20, "#7f7f7f"))
        hollow = family == "huggingface"
        ax.scatter([xs[i] for i in mine], [ys[i] for i in mine], s=size, marker=marker,
                   label=family, zorder=3, edgecolors=color,
                   facecolors="none" if hollow else color)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.margins(0.15)
    ax.autoscale_view()
    groups = figures.label_groups(xs, ys, NEAR)
    figures.place_labels(ax, [(xs[g[0]], ys[g[0]]) for g in groups],
                         ["\n".join(data["models"][i] for i in g) for g in groups],
                         list(zip(xs, ys, strict=True)))
    ax.set_xlabel("GMACs (batch 1, default image size; log scale)")
    ax.set_ylabel("params, millions (log scale)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="upper left", fontsize="small")


figures.register("zoo", _draw)


def zoo_page(rows: Sequence[ZooRow]) -> Page:
    """The zoo table, one line per row (each built-in model at its default size and class
    count)."""
    headers = ["model", "family", "image size", "params", "GMACs", "attention % MACs",
               "attn_core % MACs", "published params", "published GMACs", "matches"]
    scatter = zoo_scatter(rows)
    lines = [
        "# The model zoo", "",
        "Every built-in model (`vitprof models`) at its default image size, batch 1, counted on "
        "the meta device. *attention* is q/k/v projections + attention core + output "
        "projection; *attn_core* is QK^T, softmax and AV alone. A published figure matches when "
        "its params are equal and its GMACs equal vitprof's MACs rounded as printed.", "",
        f"- convention: {CONVENTION}", "",
        markdown_table(headers, [_row(row) for row in rows]), "",
        f"![{scatter.title}]({SCATTER})",
    ]
    return Page("zoo.md", "\n".join(lines) + "\n", ((SCATTER, scatter),))
