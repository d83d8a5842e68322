"""Arithmetic intensity from shapes and dtype.

The bytes an operation moves are its input tensors plus its output tensors at their dtype's
element size (``OpRecord.bytes_read + bytes_written``, a broadcast read once): what it would
move with no cache reuse between operations. A component's intensity is its work over its
bytes, where the work is FLOPs (2 x MACs) plus vector FLOPs, so that element-wise components
(norm, GELU) have a point too. The achieved rate on the figure is that same work over the
measured time; the tables' "achieved FLOP/s" and "% of peak" use FLOPs alone, against the
matmul peak.
"""

from __future__ import annotations

from collections.abc import Iterable

from vitprof.core.records import COMPONENTS, Component, OpRecord, Phase


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
