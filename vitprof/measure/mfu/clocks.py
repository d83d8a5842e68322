"""The clocks a tracker times steps with: a mark at each step's start and end, read later.

On the CPU an operation has finished when it returns, so the wall clock (``time.perf_counter``)
around the step is the step's time, read at once. On CUDA the host runs ahead of the device: a
mark is an event recorded on the current stream, and a step is read only once its end event has
completed (``query()``, which never waits), so typically one step late, with no synchronisation
in the training loop; only :meth:`CudaClock.wait`, at the end of tracking, waits for the last
one. Both take their time source as an argument, so that tests can fake it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

import torch


class Clock(Protocol):
    """Marks points of a run; says how many seconds lie between two marks once it can."""

    lag: int  # how many steps late a mark is ready at the latest, for reads in lockstep

    def mark(self) -> Any: ...

    def ready(self, mark: Any) -> bool: ...

    def wait(self, mark: Any) -> None: ...

    def seconds(self, start: Any, end: Any) -> float: ...


class WallClock:
    """Wall-clock marks (``now()``, ``time.perf_counter`` by default), ready at once."""

    lag = 0

    def __init__(self, now: Callable[[], float] = time.perf_counter) -> None:
        self.now = now

    def mark(self) -> float:
        return self.now()

    def ready(self, mark: Any) -> bool:
        return True

    def wait(self, mark: Any) -> None:
        return None

    def seconds(self, start: float, end: float) -> float:
        return end - start


def timing_event() -> Any:
    """A CUDA event that records time."""
    return torch.cuda.Event(enable_timing=True)


class CudaClock:
    """Events recorded on the current CUDA stream (``event()`` makes one); a mark is ready when
    its event has completed, which is asked without waiting; in lockstep (a world of ranks)
    a step is read at the next one's end, its own end waited for."""

    lag = 1

    def __init__(self, event: Callable[[], Any] = timing_event) -> None:
        self.event = event

    def mark(self) -> Any:
        event = self.event()
        event.record()
        return event

    def ready(self, mark: Any) -> bool:
        return bool(mark.query())

    def wait(self, mark: Any) -> None:
        mark.synchronize()

    def seconds(self, start: Any, end: Any) -> float:
        return float(start.elapsed_time(end)) / 1e3  # elapsed_time is in milliseconds
