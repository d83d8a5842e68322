"""Arithmetic intensity from shapes and dtype, and the roofline figure.

The bytes an operation moves are its input tensors plus its output tensors at their dtype's
element size (``OpRecord.bytes_read + bytes_written``, a broadcast read once): what it would
move with no cache reuse between operations. A component's intensity is its work over its
bytes, where the work is FLOPs (2 x MACs) plus vector FLOPs, so that element-wise components
(norm, GELU) have a point too. The achieved rate on the figure is that same work over the
measured time; the tables' "achieved FLOP/s" and "% of peak" use FLOPs alone, against the
matmul peak.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from vitprof.core.errors import UserError
from vitprof.core.records import COMPONENTS, Component, OpRecord, Phase

if TYPE_CHECKING:
    from vitprof.measure.measure import SpeedProfile


def bytes_moved(records: Iterable[OpRecord]) -> dict[Component, int]:
    """Bytes read and written by each component's forward operations (every component)."""
    totals = dict.fromkeys(COMPONENTS, 0)
    for op in records:
        if op.phase == Phase.FORWARD:
            totals[op.component] += op.bytes_read + op.bytes_written
    return totals


def intensity(work: int, moved: int) -> float | None:
    """FLOPs per byte, None when nothing moves."""
    return work / moved if moved else None


@dataclass(frozen=True)
class Point:
    """One component on the roofline."""

    component: Component
    intensity: float  # (FLOPs + vector FLOPs) / byte
    achieved: float  # (FLOPs + vector FLOPs) / s


def points(result: SpeedProfile) -> list[Point]:
    """The components that did work and took time, as roofline points."""
    found = []
    for row in result.rows():
        work = row.flops + row.vector_flops
        if work and row.bytes_moved and row.seconds > 0:
            found.append(Point(row.component, work / row.bytes_moved, work / row.seconds))
    return found


def write_roofline(result: SpeedProfile, path: str | Path) -> Path:
    """Write the roofline of ``result`` (one point per component) as a PNG; return its path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    found = points(result)
    peak = result.peak
    fig, ax = plt.subplots(figsize=(8, 4.5))
    lows = [p.intensity for p in found] + ([peak.ridge] if peak.ridge else [])
    x_min = min(lows, default=1.0) / 4
    x_max = max([p.intensity for p in found] + [peak.ridge or 1.0]) * 4
    if peak.bytes_per_s:
        ridge = peak.ridge or x_min
        ax.plot([x_min, ridge, x_max],
                [peak.bytes_per_s * x_min, peak.flops_per_s, peak.flops_per_s],
                color="black", label="roof: copy bandwidth, matmul peak")
    else:
        ax.axhline(peak.flops_per_s, color="black", label="matmul peak")
    for p, marker in zip(found, itertools.cycle("osD^vP*X"), strict=False):
        ax.scatter(p.intensity, p.achieved, marker=marker, zorder=3, label=str(p.component))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity, (FLOPs + vector FLOPs) / byte")
    ax.set_ylabel("achieved (FLOPs + vector FLOPs) / s")
    batch = result.input_shape[0]
    ax.set_title(f"{result.model}, batch {batch}, {result.dtype} on {result.device_name}",
                 fontsize=10)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    target = Path(path)
    try:
        fig.savefig(target, dpi=120)
    except OSError as error:
        raise UserError(f"cannot write {target}: {error.strerror}") from None
    finally:
        plt.close(fig)
    return target
