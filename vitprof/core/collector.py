"""Python's cyclic garbage collector held off for a stretch of work that makes no cycles.

A full collection walks every object the process tracks (a few hundred thousand once torch
is imported: about 60 ms on a 2-core machine), and the young generations are collected every
700 container allocations; a count on meta allocates hundreds of thousands of small objects
(op records, meta tensors, weak references), so about a fifth of counting a 22B ViT went to
collections that found nothing: an analysis leaves no cycles
(``test_an_analysis_keeps_no_reference_cycle_to_its_model``). What is freed by reference
counting is freed as ever while the collector waits; only cycles wait for it to resume.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """Hold off the cyclic collector inside the block; resume it after, if it was on before
    (a caller that turned it off keeps it off)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
