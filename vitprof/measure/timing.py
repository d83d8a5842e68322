"""Per-module timing: a timeline cut at module boundaries, attributed to components like counts.

Every module gets a forward pre-hook and a forward hook (the module stack,
:class:`vitprof.count.module_stack.ModuleStack`) that put a mark on a clock: the wall
clock (``time.perf_counter``) on the CPU, where an operation has finished when it returns; CUDA
events on the current stream on a GPU, read after one ``torch.cuda.synchronize()`` at the end of
the forward, so that the hooks never stall the GPU. Consecutive marks cut the forward into
intervals, each the EXCLUSIVE time of the module on top of the stack then. The intervals
partition the forward, so per-component times add up to the hooked end-to-end time (less the
hooks of the root module itself).

Intervals are attributed with the same breakdown as ``vitprof analyze``
(:func:`vitprof.recognize.breakdown`: a table, else the graph recognizer, as ``recognizer``
asks; ``--map`` rules win): the counting session (:func:`vitprof.count.session.count`) reports
the same module events with the number of operations counted by each, which finds the counted
operations of each interval, and each operation keeps the component and block the breakdown
gave it.

* An interval whose operations belong to one component and block goes to it.
* One whose operations span several (torchvision's ``nn.MultiheadAttention`` runs qkv, core and
  projection inside one module, fused into one kernel at inference) is split in proportion to
  their work (2 x MACs + vector FLOPs); those components are flagged as *estimated*.
* An interval with no counted operation (views, copies, the hooks themselves) goes to its
  module's component (the table's; under the graph, the one component every operation run in
  that module has, if any), else to the operation before it in the same block (a residual add
  closes the branch before it), else to the operation after it.

End-to-end latency is measured without hooks, alternating with the hooked runs (which goes first
alternates too) so that a change of load on the machine hits both alike. The hook overhead is
the median over iterations of the paired difference (hooked - unhooked, same iteration) over the
unhooked latency: on a shared machine a forward varies by more than the hooks cost, and pairing
cancels the slow drifts. As in ``timeit``, the garbage collector is off during a timed forward.

Every figure is an interquartile mean over the timed iterations: the mean of the middle half
(all of them below four), robust to the stalls of a shared machine. Component times are means
over the same hooked iterations as the hooked latency, so they add up to it.
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import torch
from torch import nn
from torch.utils._pytree import tree_leaves

from vitprof.core.collector import collector_paused
from vitprof.core.errors import UserError
from vitprof.core.overrides import Override
from vitprof.core.records import Component, OpRecord
from vitprof.core.vocab import Device, EventKind, Recognizer
from vitprof.count.module_stack import ModuleStack
from vitprof.count.running import Footprint
from vitprof.count.session import Event as SessionEvent
from vitprof.count.session import Inputs, Run, as_inputs, count
from vitprof.recognize import Found, breakdown
from vitprof.recognize.tables import ComponentMap

Key = tuple[Component, int | None]  # (component, block)
Event = tuple[EventKind, str]  # (entered or left, module path)


def marking(model: nn.Module, on_event: Callable[[EventKind, str], None]) -> ModuleStack:
    """The module stack of ``model``, calling ``on_event(kind, path)`` when each module is
    entered (``EventKind.ENTER``) and left (``EventKind.LEAVE``); a context manager, always
    unhooked."""
    return ModuleStack(
        model, on_enter=lambda path, _m: on_event(EventKind.ENTER, path),
        on_leave=lambda path, _m: on_event(EventKind.LEAVE, path),
    )


@dataclass(frozen=True)
class IntervalPlan:
    """What ran between each pair of consecutive module events, from a counting pass."""

    events: tuple[Event, ...]
    shares: tuple[tuple[tuple[Key, float], ...], ...]  # per interval: (key, fraction) pairs
    estimated: frozenset[Component]


@dataclass(frozen=True)
class Planned:
    """A counting pass, its breakdown and the interval plan made from them."""

    run: Run
    plan: IntervalPlan
    found: Found  # the breakdown: its ops are the run's, with their components and blocks
    mapping: ComponentMap  # the map of modules and parameters the breakdown implies

    @property
    def footprint(self) -> Footprint:
        return self.run.footprint


def plan_intervals(
    model: nn.Module, inputs: Inputs, recognizer: str = Recognizer.AUTO,
    rules: Sequence[Override] = (),
) -> Planned:
    """Count ``model`` on ``inputs`` (:func:`vitprof.count.session.count`, in eval mode, without
    gradients), break it down as ``recognizer`` asks (:func:`vitprof.recognize.breakdown`, with
    ``rules`` the ``--map`` ones) and map its operations to the
    intervals between module events.

    Meta inputs mean meta stand-ins of the weights; a failure raises
    :class:`~vitprof.count.running.CountFailed` (the caller applies the meta fallback rule,
    :func:`vitprof.count.running.first_on_meta`).
    """
    events: list[SessionEvent] = []
    with torch.no_grad():
        run = count(model, inputs, on_event=events.append)
    found = breakdown(run, model, recognizer, rules)
    implied = found.table if found.table is not None else implied_map(found)
    marks = [replace(event, ops=found.offset(event.ops)) for event in events]
    return Planned(run, _plan(list(found.ops), marks, implied), found, implied)


def implied_map(found: Found) -> ComponentMap:
    """The :class:`ComponentMap` a breakdown made from the data flow implies: each parameter's
    component; a module's component and block where every operation run directly in it has
    the same one (a module whose operations disagree, or that ran none, has none). A
    parameter shared out (a fused projection's weight: two records of one name) takes the
    component of its largest share."""
    seen: dict[str, set[tuple[Component, int | None]]] = defaultdict(set)
    for op in found.ops:
        seen[op.module].add((op.component, op.block))
    agreed = {path: next(iter(keys)) for path, keys in seen.items() if len(keys) == 1}
    largest = {p.name: p for p in sorted(found.params, key=lambda p: p.numel)}
    return ComponentMap(
        found.family, {path: key[0] for path, key in agreed.items()},
        {name: p.component for name, p in largest.items()},
        {path: key[1] for path, key in agreed.items() if key[1] is not None}, found.warnings)


def _plan(
    records: list[OpRecord], marks: list[SessionEvent], mapping: ComponentMap
) -> IntervalPlan:
    shares = []
    estimated: set[Component] = set()
    stack: list[str] = []
    offsets = [mark.ops for mark in marks]
    for i, mark in enumerate(marks[:-1]):
        if mark.kind is EventKind.ENTER:
            stack.append(mark.path)
        elif stack and stack[-1] == mark.path:
            stack.pop()
        ops = records[offsets[i]:offsets[i + 1]]
        work: dict[Key, int] = defaultdict(int)
        for op in ops:
            work[(op.component, op.block)] += 2 * op.macs + op.vector_flops
        total = sum(work.values())
        if total:
            parts = tuple((key, w / total) for key, w in work.items() if w)
            if len({key[0] for key, _ in parts}) > 1:
                estimated.update(key[0] for key, _ in parts)
        else:
            top = stack[-1] if stack else ""
            previous = records[offsets[i] - 1] if offsets[i] > 0 else None
            following = records[offsets[i + 1]] if offsets[i + 1] < len(records) else None
            parts = ((_context(top, mapping, previous, following), 1.0),)
        shares.append(parts)
    events = tuple((mark.kind, mark.path) for mark in marks)
    return IntervalPlan(events, tuple(shares), frozenset(estimated))


def _context(
    top: str, mapping: ComponentMap, previous: OpRecord | None, following: OpRecord | None
) -> Key:
    block = mapping.block_of(top) if top else None
    component = mapping.modules.get(top)
    if component is not None:
        return (component, block)
    for candidate in (previous, following):
        if candidate is not None and candidate.block == block:
            return (candidate.component, block)
    for candidate in (previous, following):
        if candidate is not None:
            return (candidate.component, candidate.block)
    return (Component.OTHER, block)


class CpuClock:
    """Wall-clock marks; a CPU operation has finished when it returns, so no sync is needed."""

    def __init__(self) -> None:
        self.marks: list[float] = []

    def mark(self) -> None:
        self.marks.append(time.perf_counter())

    def reset(self) -> None:
        self.marks.clear()

    def intervals(self) -> list[float]:
        """Seconds between consecutive marks."""
        return [b - a for a, b in itertools.pairwise(self.marks)]


class CudaClock:
    """CUDA events recorded on the current stream; one synchronize when they are read."""

    def __init__(self) -> None:
        self.events: list[torch.cuda.Event] = []
        self.count = 0

    def mark(self) -> None:
        if self.count == len(self.events):
            self.events.append(torch.cuda.Event(enable_timing=True))
        self.events[self.count].record()
        self.count += 1

    def reset(self) -> None:
        self.count = 0

    def intervals(self) -> list[float]:
        torch.cuda.synchronize()
        used = self.events[:self.count]
        return [a.elapsed_time(b) / 1e3 for a, b in itertools.pairwise(used)]


Clock = CpuClock | CudaClock


def clock_for(device: str) -> Clock:
    return CudaClock() if device == Device.CUDA else CpuClock()


@dataclass(frozen=True)
class Timings:
    """Interquartile means over the timed iterations, in seconds."""

    latency: float  # end to end, no hooks
    hooked_latency: float  # end to end, with the marking hooks
    latencies: tuple[float, ...]  # every iteration, no hooks
    hooked_latencies: tuple[float, ...]
    cells: dict[Key, float]  # (component, block) -> exclusive time
    components: dict[Component, float]
    blocks: dict[int, float]
    estimated: frozenset[Component]

    @property
    def overhead(self) -> float:
        """Median paired (hooked - unhooked) difference over the unhooked latency."""
        pairs = zip(self.hooked_latencies, self.latencies, strict=True)
        return statistics.median(h - p for h, p in pairs) / self.latency if self.latency else 0.0

    @property
    def attributed(self) -> float:
        """Sum of the per-component times."""
        return sum(self.components.values())


def time_forward(
    model: nn.Module,
    example: torch.Tensor | Inputs,
    plan: IntervalPlan,
    clock: Clock,
    *,
    warmup: int,
    iters: int,
    step: Callable[[], object] = lambda: None,
) -> Timings:
    """Time ``iters`` forwards with and without hooks after ``warmup`` (``step`` after each).
    ``example`` is the whole forward, ``(args, kwargs)`` (:meth:`vitprof.workload.InputSpec.
    example`), or a tensor, the one positional argument."""
    inputs = as_inputs(example)
    with torch.inference_mode():
        _check_events(model, inputs, plan)
        for _ in range(warmup):
            _run(model, inputs, clock)
            step()
        plain: list[float] = []
        hooked: list[float] = []
        per_iter: list[dict[Key, float]] = []
        for i in range(iters):
            for with_hooks in (i % 2 == 1, i % 2 == 0):
                if not with_hooks:
                    plain.append(sum(_run(model, inputs, clock)))
                    continue
                with marking(model, lambda _kind, _path: clock.mark()):
                    intervals = _run(model, inputs, clock)
                hooked.append(sum(intervals))
                per_iter.append(_attribute(intervals[1:-1], plan))
            step()
    return _summarize(plain, hooked, per_iter, plan.estimated)


def _run(model: nn.Module, inputs: Inputs, clock: Clock) -> list[float]:
    args, kwargs = inputs
    with collector_paused():
        clock.reset()
        clock.mark()
        model(*args, **kwargs)
        clock.mark()
    return clock.intervals()


def _check_events(model: nn.Module, inputs: Inputs, plan: IntervalPlan) -> None:
    events: list[Event] = []
    args, kwargs = inputs
    with marking(model, lambda kind, path: events.append((kind, path))):
        model(*args, **kwargs)
    if tuple(events) != plan.events:
        raise UserError(
            f"the model calls its modules differently on {_device(inputs)} than on meta "
            f"({len(events)} module events against {len(plan.events)}): times cannot be "
            "attributed to components"
        )


def _device(inputs: Inputs) -> str:
    """The device of the first tensor among ``inputs``."""
    tensors = [v for v in tree_leaves(inputs) if isinstance(v, torch.Tensor)]
    return tensors[0].device.type if tensors else "cpu"


def _attribute(intervals: Sequence[float], plan: IntervalPlan) -> dict[Key, float]:
    cells: dict[Key, float] = defaultdict(float)
    for seconds, parts in zip(intervals, plan.shares, strict=True):
        for key, fraction in parts:
            cells[key] += seconds * fraction
    return cells


def middle_half(values: Sequence[float]) -> list[int]:
    """Indices of the middle half of ``values`` by value (all of them below four)."""
    order = sorted(range(len(values)), key=values.__getitem__)
    cut = len(values) // 4
    return order[cut:len(values) - cut]


def interquartile_mean(values: Sequence[float]) -> float:
    return statistics.fmean(values[i] for i in middle_half(values))


def _summarize(
    plain: list[float], hooked: list[float], per_iter: list[dict[Key, float]],
    estimated: frozenset[Component],
) -> Timings:
    chosen = [per_iter[i] for i in middle_half(hooked)]
    keys = {key for cells in chosen for key in cells}
    cells = {key: statistics.fmean(c.get(key, 0.0) for c in chosen) for key in keys}
    components = {
        component: sum(t for (c, _), t in cells.items() if c is component)
        for component in Component
    }
    blocks = {
        b: sum(t for (_, k), t in cells.items() if k == b)
        for b in sorted({b for _, b in keys if b is not None})
    }
    return Timings(
        latency=interquartile_mean(plain), hooked_latency=interquartile_mean(hooked),
        latencies=tuple(plain), hooked_latencies=tuple(hooked), cells=cells,
        components=components, blocks=blocks, estimated=estimated,
    )
