"""The report figures, drawn with matplotlib's Agg canvas (no display, no pyplot state).

Each figure is built in two steps: a :class:`FigureData` (the numbers plotted, JSON-ready) and
:func:`save`, which draws it. Drawing is deterministic: fixed size and dpi, matplotlib's default
style whatever the user's matplotlibrc says, and no timestamp or software tag in the PNG. The
PNG carries the SHA-256 of its data in a ``vitprof:data`` text chunk, so ``vitprof report
--check`` compares figures by what they show (the data) rather than by bytes, which a different
freetype or matplotlib version may change.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib.style
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from PIL import Image

from vitprof.checks.sweep import AXES, Sweep
from vitprof.core.records import COMPONENTS
from vitprof.count.result import Profile

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
    """MACs of the attention core, the MLP and everything else along a sweep, with the
    attention-core / MLP crossover of an image-size sweep."""
    points = sorted(result.points, key=lambda p: p.value)
    crossover = result.crossover()
    return FigureData("sweep", f"{result.model}: MACs against {AXES[result.axis]}", {
        "axis": result.axis,
        "values": [p.value for p in points],
        "attn_core": [p.attn_core.macs for p in points],
        "mlp": [p.mlp.macs for p in points],
        "rest": [p.totals.macs - p.attn_core.macs - p.mlp.macs for p in points],
        "crossover": round(crossover.image_size, 3) if crossover else None,
        "crossover_tokens": str(crossover.tokens) if crossover else None,
    })


# ------------------------------------------------------------------------------- drawing


def _draw_shares(fig: Figure, data: dict[str, Any]) -> None:
    ax = fig.add_subplot()
    names = data["components"]
    ys = range(len(names))
    ax.barh([y - 0.2 for y in ys], [100 * v for v in data["params"]], height=0.4,
            label="% of params", color="#4c72b0")
    ax.barh([y + 0.2 for y in ys], [100 * v for v in data["macs"]], height=0.4,
            label="% of MACs", color="#dd8452")
    ax.set_yticks(list(ys), names)
    ax.invert_yaxis()
    ax.set_xlabel("share of the model total (%)")
    ax.set_xlim(0, 100)
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


def _draw_sweep(fig: Figure, data: dict[str, Any]) -> None:
    ax = fig.add_subplot()
    xs = data["values"]
    for key, label in (("attn_core", "attention core (QK^T, AV)"), ("mlp", "MLP"),
                       ("rest", "everything else")):
        color = COLORS.get(key, COLORS["other"])
        ax.plot(xs, [v / 1e9 for v in data[key]], marker="o", label=label, color=color)
    if data["crossover"] is not None:
        ax.axvline(data["crossover"], color="black", linestyle="--", linewidth=1)
        ax.annotate(
            f"core = MLP at {data['crossover']:.0f} px\n({data['crossover_tokens']} tokens)",
            xy=(data["crossover"], 0.5), xycoords=("data", "axes fraction"),
            xytext=(6, 0), textcoords="offset points", fontsize="small",
        )
    ax.set_yscale("log")
    ax.set_xlabel(AXES[data["axis"]])
    ax.set_ylabel("GMACs (log scale)")
    ax.legend(loc="upper left", fontsize="small")


_DRAW: dict[str, Callable[[Figure, dict[str, Any]], None]] = {
    "shares": _draw_shares, "blocks": _draw_blocks, "sweep": _draw_sweep,
}


def save(figure: FigureData, path: str | Path) -> None:
    """Draw ``figure`` into the PNG ``path``, deterministically, with its data digest."""
    with matplotlib.style.context("default"):
        fig = Figure(figsize=SIZE_IN, dpi=DPI)
        FigureCanvasAgg(fig)
        _DRAW[figure.kind](fig, figure.data)
        fig.suptitle(figure.title)
        fig.tight_layout()
        fig.savefig(path, dpi=DPI, format="png",
                    metadata={"Software": None, DIGEST_KEY: figure.digest})


def read_digest(path: str | Path) -> str | None:
    """The data digest stored in a PNG written by :func:`save`, or None."""
    with Image.open(path) as image:
        return image.info.get(DIGEST_KEY)


def register(kind: str, draw: Callable[[Figure, dict[str, Any]], None]) -> None:
    """Add the drawing function of figures of ``kind`` (a page module owns its figure)."""
    if kind in _DRAW:
        raise ValueError(f"a drawing for figures of kind {kind} is already registered")
    _DRAW[kind] = draw
