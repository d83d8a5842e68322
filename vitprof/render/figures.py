"""The figures of the pages and of ``vitprof sweep``, drawn with matplotlib's Agg canvas (no
display, no pyplot state).

Each figure is built in two steps: a :class:`FigureData` (the numbers plotted, JSON-ready) and
:func:`save`, which draws it. Drawing is deterministic: fixed size (7 x 4 in, or the size a
figure's drawing function sets) and dpi, matplotlib's default style whatever the user's
matplotlibrc says, and no timestamp or software tag in the PNG. The PNG carries the SHA-256 of
its data in a ``vitprof:data`` text chunk, so ``vitprof report --check`` compares figures by
what they show (the data) rather than by bytes, which a different freetype or matplotlib
version may change. A page module draws its own figures: it registers their drawing with
:func:`register`.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import matplotlib.style
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.transforms import Bbox
from PIL import Image

from vitprof.core.atomic_write import write_atomically
from vitprof.core.records import COMPONENTS
from vitprof.core.vocab import SweepAxis
from vitprof.count.result import Profile
from vitprof.sweep import AXES, Sweep

DPI = 100
SIZE_IN = (7.0, 4.0)
DIGEST_KEY = "vitprof:data"
COLORS: dict[str, str] = {
    "patch_embed": "#8c564b", "conv": "#ff7f0e", "tokens": "#e377c2", "attn_qkv": "#1f77b4",
    "attn_core": "#d62728", "attn_proj": "#17becf", "mlp": "#2ca02c", "norm": "#bcbd22",
    "head": "#9467bd", "other": "#7f7f7f",
}


@dataclass(frozen=True)
class FigureData:
    """What one figure plots: its kind (which drawing function), title and numbers."""

    kind: str
    title: str
    data: dict[str, Any]

    @property
    def digest(self) -> str:
        """SHA-256 of the kind, title and data: equal digests draw equal figures."""
        payload = json.dumps([self.kind, self.title, self.data], sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()


# ------------------------------------------------------------------------------- data


def file_stem(name: str) -> str:
    """A model name as a file name: ``timm:vit_tiny_patch16_224`` -> ``timm_vit_tiny_...``."""
    return re.sub(r"[^\w.-]", "_", name)


def component_shares(profile: Profile) -> FigureData:
    """Share of params and of MACs per component (components with neither are left out)."""
    rows = [
        (str(c), profile.share(v, "params"), profile.share(v, "macs"))
        for c, v in profile.components.items() if v.params or v.macs
    ]
    return FigureData("shares", f"{profile.model}: where params and MACs go", {
        "components": [r[0] for r in rows],
        "params": [round(r[1], 6) for r in rows],
        "macs": [round(r[2], 6) for r in rows],
    })


def block_macs(profile: Profile) -> FigureData:
    """MACs of every block, split by component (components with MACs in some block)."""
    present = [c for c in COMPONENTS if any(b.components[c].macs for b in profile.blocks)]
    return FigureData("blocks", f"{profile.model}: MACs per block", {
        "blocks": [b.index for b in profile.blocks],
        "series": {str(c): [b.components[c].macs for b in profile.blocks] for c in present},
    })


def sweep_macs(result: Sweep) -> FigureData:
    """MACs along a sweep: the total, the attention layer as a whole (q/k/v projections +
    attention core + output projection), its attention core alone, the MLP and the rest
    outside the attention layer and the MLP (total - attention layer - MLP: not the "other
    MACs" of :func:`~vitprof.render.sweep.sweep_cells`, which holds the projections
    too); for an image-size sweep the attention-core / MLP crossover and the sweep's
    :attr:`~vitprof.sweep.Sweep.marks` (the sizes the model is made for) that lie
    within the swept range."""
    points = sorted(result.points, key=lambda p: p.value)
    crossover = result.crossover()
    values = [p.value for p in points]
    attention = [p.attention.macs for p in points]
    marks = [s for s in result.marks if values[0] <= s <= values[-1]] \
        if result.axis == SweepAxis.IMAGE_SIZE else []
    return FigureData("sweep", f"{result.model}: MACs against {AXES[result.axis]}", {
        "axis": result.axis,
        "values": values,
        "total": [p.totals.macs for p in points],
        "attention": attention,
        "attn_core": [p.attn_core.macs for p in points],
        "mlp": [p.mlp.macs for p in points],
        "rest": [p.totals.macs - a - p.mlp.macs for p, a in zip(points, attention, strict=True)],
        "marks": marks,
        "crossover": round(crossover.image_size, 3) if crossover else None,
        "crossover_tokens": str(crossover.tokens) if crossover else None,
    })


# ------------------------------------------------------------------------------- drawing

# Where a point's label may go, in order of preference: a direction (unit offsets, the label's
# alignment) tried at each distance of _LABEL_RINGS (points); past the first ring a leader line
# joins the label to its point.
_LABEL_DIRECTIONS = ((1, 0.5, "left", "bottom"), (1, -0.5, "left", "top"),
                     (-1, 0.5, "right", "bottom"), (-1, -0.5, "right", "top"),
                     (0, 1, "center", "bottom"), (0, -1, "center", "top"),
                     (1, 1, "left", "bottom"), (-1, 1, "right", "bottom"),
                     (1, -1, "left", "top"), (-1, -1, "right", "top"))
_LABEL_RINGS = (4, 14, 26, 40, 56)
_LEADER = {"arrowstyle": "-", "lw": 0.5, "color": "#777777", "shrinkA": 0, "shrinkB": 2}
_POINT_BOX = 5.0  # half the side, in pixels, of the box a marker keeps free of labels


def _free(box: Bbox, taken: Sequence[Bbox], frame: Bbox) -> bool:
    inside = (frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0
              and box.y1 <= frame.y1)
    return inside and not any(box.overlaps(other) for other in taken)


def place_labels(ax: Axes, anchors: Sequence[tuple[float, float]], texts: Sequence[str],
                 points: Sequence[tuple[float, float]] = (), fontsize: float = 6) -> None:
    """Label each anchor (data coordinates; call once the axes' scales and limits are set) at
    the first place, nearest first (:data:`_LABEL_RINGS`, :data:`_LABEL_DIRECTIONS`), whose box
    lies inside the axes and overlaps no label placed before it and no marker of an anchor or
    of the other ``points`` drawn (the nearest place when none is free); a label away from its
    point gets a leader line."""
    renderer = ax.figure.canvas.get_renderer()  # type: ignore[attr-defined]
    frame = ax.get_window_extent(renderer)
    pixels = [ax.transData.transform(point) for point in [*anchors, *points]]
    taken = [Bbox.from_extents(x - _POINT_BOX, y - _POINT_BOX, x + _POINT_BOX, y + _POINT_BOX)
             for x, y in pixels]
    places = [(ring, *direction) for ring in _LABEL_RINGS for direction in _LABEL_DIRECTIONS]
    for anchor, text in zip(anchors, texts, strict=True):
        label = ax.annotate(text, anchor, xytext=(0, 0), textcoords="offset points",
                            fontsize=fontsize, linespacing=1.0, arrowprops=_LEADER)
        for ring, dx, dy, ha, va in [*places, places[0]]:  # the nearest when none is free
            label.set(position=(dx * ring, dy * ring), ha=ha, va=va)
            label.update_positions(renderer)
            box = Text.get_window_extent(label, renderer)  # the text alone, not its leader
            if _free(box, taken, frame):
                break
        assert label.arrow_patch is not None
        label.arrow_patch.set_visible(ring > _LABEL_RINGS[0])
        taken.append(box)


def share_label(percent: float) -> str:
    """A share in percent with two decimals, or two significant digits for a small non-zero
    one (0.0044%)."""
    return f"{percent:.2f}%" if percent >= 0.01 else f"{percent:.2g}%"


def label_groups(xs: Sequence[float], ys: Sequence[float], near: float,
                 near_y: float | None = None) -> list[list[int]]:
    """Indices of the points of a log-log plot, each grouped with the first earlier group whose
    first point is within the ratio ``near`` of it on the x axis and ``near_y`` (default
    ``near``) on the y axis: one label per group."""
    near_y = near if near_y is None else near_y
    groups: list[list[int]] = []
    for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
        home = next((g for g in groups if max(x / xs[g[0]], xs[g[0]] / x) < near
                     and max(y / ys[g[0]], ys[g[0]] / y) < near_y), None)
        if home is None:
            groups.append([i])
        else:
            home.append(i)
    return groups


TINY = 0.01  # a bar shorter than this fraction of the axis gets a marker to be seen


def _draw_shares(fig: Figure, data: dict[str, Any]) -> None:
    """Two bars per component (params, MACs), the axis up to the largest share, each non-zero
    bar labelled with its value and a tiny one marked; zero bars are left out."""
    ax = fig.add_subplot()
    names = data["components"]
    largest = 100 * max(data["params"] + data["macs"], default=0.0) or 100.0
    ax.set_xlim(0, 1.2 * largest)  # room for the labels
    for key, offset, label, color in (("params", -0.2, "% of params", "#4c72b0"),
                                      ("macs", 0.2, "% of MACs", "#dd8452")):
        bars = [(y + offset, 100 * v) for y, v in enumerate(data[key]) if v > 0]
        ax.barh([y for y, _ in bars], [v for _, v in bars], height=0.4, label=label, color=color)
        for y, v in bars:
            if v < TINY * largest:
                ax.plot(v, y, marker="o", markersize=4, color=color, markeredgecolor="black",
                        markeredgewidth=0.5, clip_on=False, zorder=3)
            ax.annotate(share_label(v), (v, y), xytext=(4, 0), textcoords="offset points",
                        va="center", fontsize="x-small")
    ax.set_yticks(range(len(names)), names)
    for tick, name in zip(ax.get_yticklabels(), names, strict=True):
        tick.set_color(COLORS.get(name, COLORS["other"]))
    ax.set_ylim(len(names) - 0.5, -0.5)  # first component on top
    ax.set_xlabel("share of the model total (%)")
    ax.legend(loc="lower right")


def _draw_blocks(fig: Figure, data: dict[str, Any]) -> None:
    ax = fig.add_subplot()
    bottom = [0.0] * len(data["blocks"])
    for name, macs in data["series"].items():
        gmacs = [m / 1e9 for m in macs]
        ax.bar(data["blocks"], gmacs, bottom=bottom, label=name, color=COLORS[name])
        bottom = [b + g for b, g in zip(bottom, gmacs, strict=True)]
    ax.set_xlabel("block")
    ax.set_ylabel("GMACs")
    step = math.ceil(len(data["blocks"]) / 16)
    ticks = data["blocks"][::step]
    ax.set_xticks(ticks, [str(b) for b in ticks], fontsize="small")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")


_SWEEP_LINES = (  # key, label, colour, line style
    ("total", "total", "black", "-"),
    ("attention", "attention layer (qkv + core + proj)", COLORS["attn_qkv"], "-"),
    ("attn_core", "of which attention core (QK^T, AV)", COLORS["attn_core"], "--"),
    ("mlp", "MLP", COLORS["mlp"], "-"),
    ("rest", "outside attention layer and MLP", COLORS["other"], "-"),
)


def _draw_sweep(fig: Figure, data: dict[str, Any]) -> None:
    fig.set_size_inches(9.0, 4.0)  # room for the legend beside the axes
    ax = fig.add_subplot()
    xs = data["values"]
    for key, label, color, style in _SWEEP_LINES:
        ax.plot(xs, [v / 1e9 for v in data[key]], marker="o", markersize=3, label=label,
                color=color, linestyle=style)
    for i, size in enumerate(data["marks"]):
        ax.axvline(size, color="#999999", linestyle=":", linewidth=1,
                   label="sizes the model is made for" if i == 0 else None)
        ax.annotate(f"{size}", xy=(size, 1.0), xycoords=("data", "axes fraction"),
                    xytext=(0, 2), textcoords="offset points", ha="center", va="bottom",
                    fontsize="x-small", color="#555555")
    if data["crossover"] is not None:
        tokens = Fraction(data["crossover_tokens"])
        shown = f"{tokens}" if tokens.denominator == 1 else f"{float(tokens):,.1f}"
        ax.axvline(data["crossover"], color="black", linestyle="--", linewidth=1)
        ax.annotate(
            f"core = MLP at {data['crossover']:.0f} px\n({shown} tokens)",
            xy=(data["crossover"], 0.2), xycoords=("data", "axes fraction"),
            xytext=(6, 0), textcoords="offset points", fontsize="small",
        )
    ax.set_yscale("log")
    ax.set_xlabel(AXES[data["axis"]])
    ax.set_ylabel("GMACs (log scale)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")


_DRAW: dict[str, Callable[[Figure, dict[str, Any]], None]] = {
    "shares": _draw_shares, "blocks": _draw_blocks, "sweep": _draw_sweep,
}


def png(figure: FigureData) -> bytes:
    """``figure`` drawn as a PNG, deterministically, with its data digest."""
    with matplotlib.style.context("default"):
        fig = Figure(figsize=SIZE_IN, dpi=DPI)
        FigureCanvasAgg(fig)
        _DRAW[figure.kind](fig, figure.data)
        fig.suptitle(figure.title)
        fig.tight_layout()
        drawn = io.BytesIO()
        fig.savefig(drawn, dpi=DPI, format="png",
                    metadata={"Software": None, DIGEST_KEY: figure.digest})
    return drawn.getvalue()


def save(figure: FigureData, path: str | Path) -> None:
    """Draw ``figure`` into the PNG ``path`` (:func:`png`), written whole or not at all
    (:mod:`vitprof.core.atomic_write`)."""
    write_atomically(path, png(figure))


def read_digest(path: str | Path) -> str | None:
    """The data digest stored in a PNG written by :func:`save`, or None."""
    with Image.open(path) as image:
        return image.info.get(DIGEST_KEY)


def register(kind: str, draw: Callable[[Figure, dict[str, Any]], None]) -> None:
    """Add the drawing function of figures of ``kind`` (a page module owns its figure)."""
    if kind in _DRAW:
        raise ValueError(f"a drawing for figures of kind {kind} is already registered")
    _DRAW[kind] = draw
