"""The figure of the per-rank peak against world size, one line per strategy, and a memory
size: where each strategy's per-rank peak first fits it is starred."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from matplotlib.figure import Figure

from vitprof.measure.distributed.estimate import RankMemory
from vitprof.render import figures
from vitprof.render.figures import FigureData

KIND = "world_size_peaks"


def world_size_figure(model: str, found: Mapping[str, Sequence[RankMemory]],
                      limit: int | None = None) -> FigureData:
    """``model``'s per-rank peak at each world size of each strategy of ``found``; ``limit``:
    a memory size in bytes, drawn as a line."""
    return FigureData(KIND, f"{model}: per-rank peak against world size", {
        "series": {strategy: [[e.world_size, e.peak_bytes] for e in estimates]
                   for strategy, estimates in found.items()},
        "limit": limit,
    })


def _draw(fig: Figure, data: dict[str, Any]) -> None:
    ax = fig.add_subplot()
    limit = data["limit"]
    for strategy, points in data["series"].items():
        sizes = [size for size, _ in points]
        (line,) = ax.plot(sizes, [peak / 1e9 for _, peak in points], marker="o",
                          label=strategy)
        fits = [(size, peak) for size, peak in points if limit is not None and peak <= limit]
        if fits:
            ax.plot([fits[0][0]], [fits[0][1] / 1e9], marker="*", markersize=14,
                    color=line.get_color())
    if limit is not None:
        ax.axhline(limit / 1e9, color="grey", linestyle="--", label=f"{limit / 1e9:g} GB")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("world size (ranks)")
    ax.set_ylabel("per-rank peak (GB)")
    ax.legend(fontsize="small")


figures.register(KIND, _draw)
