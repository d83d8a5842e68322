"""Per-component time of the tracked steps' forwards, with ``vitprof profile``'s hooks (optional).

With ``track(..., timing=True)`` every module of the model carries the marking hooks of
:mod:`vitprof.measure.timing` while the tracker is open; each training forward (train mode,
gradients on) puts a mark on the clock at every module entered and left. The intervals between
marks are attributed to components by the plan :func:`vitprof.measure.timing.plan_intervals`
makes once per input shape, on meta, as ``profile`` does. Only the forward is hooked, so the time
share is the forward's (the FLOPs share is the whole step's). The hooks cost time, and on CUDA
their events are read with one synchronize at the end of each step: that is why timing is off by
default. A forward whose modules run otherwise than the plan's gives one warning and no share.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Hashable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import torch
from torch import nn

from vitprof.count.running import one_line
from vitprof.measure.mfu.flops import signature
from vitprof.measure.timing import IntervalPlan, clock_for, marking, plan_intervals
from vitprof.workload import given_inputs


class ComponentTimer:
    """Marks each training forward of ``model`` on ``device``'s clock; :meth:`shares` turns
    the forwards of a step into each component's share of their time."""

    def __init__(self, model: nn.Module, device: str) -> None:
        self.model = model
        self.clock = clock_for(device)
        self.plans: dict[Hashable, IntervalPlan | None] = {}
        self.events: list[tuple[str, str]] = []
        self._hooks = ExitStack()
        self._warned = False
        self._quiet = False

    def start(self) -> None:
        self.clock.reset()
        self._hooks.enter_context(marking(self.model, self._mark))

    def stop(self) -> None:
        self._hooks.close()

    @contextmanager
    def quiet(self) -> Iterator[None]:
        """No marks inside (vitprof's own runs of the model: its counts)."""
        self._quiet = True
        try:
            yield
        finally:
            self._quiet = False

    def _mark(self, kind: str, path: str) -> None:
        if not self._quiet and self.model.training and torch.is_grad_enabled():
            self.clock.mark()
            self.events.append((kind, path))

    def shares(self, batches: tuple[Any, ...]) -> dict[str, float] | None:
        """Each component's share of the time of this step's forwards (one per batch), None
        where they cannot be attributed; the marks are cleared for the next step."""
        intervals = self.clock.intervals()
        events, self.events = self.events, []
        self.clock.reset()
        seconds: dict[str, float] = defaultdict(float)
        start = 0
        for batch in batches:
            plan = self._plan(batch)
            if plan is None:
                return None
            count = len(plan.events)
            if tuple(events[start:start + count]) != plan.events:
                self._mismatch(len(events), count)
                return None
            for taken, parts in zip(intervals[start:start + count - 1], plan.shares,
                                    strict=True):
                for (component, _block), fraction in parts:
                    seconds[str(component)] += taken * fraction
            start += count
        total = sum(seconds.values())
        return {c: s / total for c, s in seconds.items()} if total > 0 else None

    def _plan(self, batch: Any) -> IntervalPlan | None:
        key = signature(batch)
        if key not in self.plans:
            try:
                with self.quiet():
                    inputs = given_inputs(batch, None).example("meta")
                    self.plans[key] = plan_intervals(self.model, inputs).plan
            except Exception as error:  # UserError, CountFailed or vitprof's own: training goes on
                warnings.warn(f"vitprof: no time per component: {one_line(error)}", stacklevel=4)
                self.plans[key] = None
        return self.plans[key]

    def _mismatch(self, seen: int, planned: int) -> None:
        if not self._warned:
            warnings.warn(f"vitprof: no time per component: the training forward ran {seen} "
                          f"module events against the plan's {planned}", stacklevel=4)
            self._warned = True
