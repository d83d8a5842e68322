"""The roofline figure of a speed profile: one point per component under the device's roof.

A point's intensity and achieved rate use the work and bytes of :mod:`vitprof.measure.roofline`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from vitprof.core.atomic_write import write_atomically
from vitprof.core.errors import UserError
from vitprof.core.records import Component

if TYPE_CHECKING:
    from vitprof.measure.result import SpeedProfile


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
    try:  # the format is the extension's, as savefig(path) would take it
        write_atomically(target, lambda handle: fig.savefig(
            handle, dpi=120, format=target.suffix.removeprefix(".").lower()))
    except OSError as error:
        raise UserError(f"cannot write {target}: {error.strerror}") from None
    finally:
        plt.close(fig)
    return target
