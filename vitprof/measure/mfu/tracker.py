"""Model FLOPs utilisation of a training loop: counted FLOPs over measured time over a peak.

``with vitprof.track(model) as tracker:`` then ``tracker.step(x)`` after each training step,
with the batch the model was fed. Each step's entry in ``tracker.history``:

* ``flops``: the step's forward + backward FLOPs (2 x MACs), counted on meta once per input
  shape (:mod:`vitprof.measure.mfu.flops`), or by a callback as the step ran, once per input
  signature (:mod:`vitprof.measure.mfu.live_count`); ``vector_flops``, the element-wise work,
  apart;
* ``counted_in_step``: True for the step that was counted as it ran: its time holds the count,
  so it has FLOPs but no ``tflops`` or ``mfu`` (and is in no median);
* ``seconds``: from the step's start to its end. The end is the call of :meth:`Tracker.step`;
  the start is :meth:`Tracker.begin` if it was called, else the end of the tracker's own work
  after the previous step (or the entry of the ``with``), so data loading is in the step unless
  ``begin`` marks the start after it, and the tracker's own work (a count) is in no step;
* ``tflops = flops / seconds / 1e12`` and ``mfu = flops / seconds / (peak_tflops x 1e12)``, with
  running medians: a **compute-window MFU**, over the step's own window, so the time between steps
  (what runs before :meth:`Tracker.begin`, a framework's loop between two batches) is in no step,
  and a wall-clock MFU over the run is lower where that time is not nothing; ``peak_tflops``, the
  peak the step's MFU is against (on the CPU a measured matmul rate, not a theoretical peak). No
  MFU is above 1, and a step above the peak never stops the training: a MEASURED peak (the CPU's,
  measured when the tracking starts, perhaps on a busy machine) is raised to the step's rate, the
  fastest seen (its MFU is 1; one warning names the old and the new peak the first time, and the
  summary's peak says at which step), while a peak given or from the table is wrong for the device
  and dtype: the step has TFLOP/s but no MFU, and one warning names the peak and the FLOPs;
* ``components``: each component's share of the step's FLOPs;
* ``time_components``: with ``timing=True``, each component's share of the forward's time
  (None without it);
* ``optimizer_vector_flops``: the element-wise work of the optimizer's step, apart (None until
  it is counted, on the optimizer's second step, and without ``optimizer=``;
  :mod:`vitprof.measure.mfu.optimizer`);
* ``rank``, ``world_size``, ``world_flops``, ``world_seconds``, ``world_tflops``,
  ``world_mfu``: in a DDP or FSDP2 loop (a default process group initialised when the tracking
  starts), this rank and the world's step, gathered from every rank: the sum of the ranks' FLOPs
  over the slowest rank's seconds, ``world_mfu = sum(flops) / max(seconds) / (sum(peak_tflops)
  x 1e12)`` (:mod:`vitprof.measure.mfu.ranks`, which also says how a wrapped model is counted:
  the rank's own step); None without a process group.

On CUDA the times come from events and are read when ready (:mod:`vitprof.measure.mfu.clocks`),
so an entry appears about one step late and ``on_step`` is called then (in a world, exactly
one step late on every rank: the previous step's end is waited for, so that every rank gathers
the same step); leaving the ``with``
reads the rest, and writes the markdown summary where ``summary=`` says. Nothing that goes
wrong in vitprof stops the user's training: a step outside the ``with``, a step that cannot be
counted, a step above the peak, a GPU with no peak in the table, a summary path that cannot be
written each give one warning and the tracker goes on (without FLOPs or MFU where it has none).
Nor does it change the training: what vitprof runs (the peak's matmuls, the counts) leaves
torch's global random number generators as they were, so a seeded run is the same tracked or
not. The model and a peak given are checked when ``track`` is called: a UserError there.
"""

from __future__ import annotations

import heapq
import operator
import warnings
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from functools import reduce
from pathlib import Path
from types import TracebackType
from typing import Any

import torch
from torch import nn

from vitprof.core.atomic_write import write_atomically
from vitprof.core.display import show
from vitprof.core.errors import UserError, VitprofDeprecationWarning
from vitprof.core.vocab import Device
from vitprof.measure.mfu.clocks import Clock, CudaClock, WallClock
from vitprof.measure.mfu.component_time import ComponentTimer
from vitprof.measure.mfu.flops import RanStep, StepCounts, StepFlops
from vitprof.measure.mfu.optimizer import OptimizerCount
from vitprof.measure.mfu.peaks import ChosenPeak, choose_peak, given_peak, raised_to
from vitprof.measure.mfu.ranks import World, default_world, no_world, world_figures

StepEntry = dict[str, Any]


class RunningMedian:
    """The median of the values added so far, in O(log n) per value (two heaps: the lower half
    as a max-heap of negated values, the upper half as a min-heap)."""

    def __init__(self) -> None:
        self.low: list[float] = []
        self.high: list[float] = []

    def add(self, value: float) -> float:
        """Add ``value``; return the median of all the values added."""
        heapq.heappush(self.low, -heapq.heappushpop(self.high, value))
        if len(self.low) > len(self.high):
            heapq.heappush(self.high, -heapq.heappop(self.low))
        if len(self.high) > len(self.low):
            return self.high[0]
        return (self.high[0] - self.low[0]) / 2


@dataclass
class _Pending:
    step: int
    start: Any
    end: Any
    counted: StepFlops | None
    times: dict[str, float] | None = None
    counted_in_step: bool = False


def model_device(model: nn.Module) -> torch.device:
    """Where the model's first parameter or buffer lives (the CPU for a model without any)."""
    for tensor in [*model.parameters(), *model.buffers()]:
        return tensor.device
    return torch.device("cpu")


class Tracker:
    """Counts and times each training step of ``model``; see the module docstring."""

    def __init__(self, model: nn.Module, peak: ChosenPeak | None, clock: Clock, *,
                 on_step: Callable[[StepEntry], None] | None = None,
                 optimizer: torch.optim.Optimizer | None = None,
                 timer: ComponentTimer | None = None,
                 summary_path: str | Path | None = None, world: World | None = None) -> None:
        self.model = model
        self.world = world
        self.summary_path = summary_path
        self.timer = timer
        self.optimizer = None if optimizer is None else OptimizerCount(optimizer)
        self.peak = peak
        self.clock = clock
        self.on_step = on_step
        self.counts = StepCounts(model)
        self.history: list[StepEntry] = []
        self.active = False
        self._start: Any = None
        self._pending: list[_Pending] = []
        self._steps = 0
        self._medians = {"tflops": RunningMedian(), "mfu": RunningMedian()}
        self._warned: set[str] = set()  # the kinds of step above the peak warned of

    def __enter__(self) -> Tracker:
        if self.timer is not None:
            self.timer.start()
        self.active = True
        self._start = self.clock.mark()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Read every step still pending (waiting for the last one on CUDA) and stop."""
        if self._pending:
            self.clock.wait(self._pending[-1].end)
        self._read(final=True)
        if self.optimizer is not None:
            self.optimizer.remove()
        if self.timer is not None:
            self.timer.stop()
        self.active = False
        if self.summary_path is not None:
            self._write_summary(Path(self.summary_path))

    def _write_summary(self, path: Path) -> None:
        """The summary as a markdown file; a path that cannot be written is one warning (the
        training is over, and its history is still in :attr:`history`)."""
        try:
            write_atomically(path, self.summary())
        except OSError as error:
            warnings.warn(f"vitprof: the MFU summary could not be written to {path}: "
                          f"{error.strerror or error}", stacklevel=3)

    def begin(self) -> None:
        """Mark the start of the next step now (after its data is loaded, say)."""
        if self._outside("begin"):
            return
        self._start = self.clock.mark()

    def step(self, *batches: Any) -> None:
        """The step that just ended trained on ``batches`` (one per forward: several for
        gradient accumulation), each as the model was fed it: a tensor, a tuple of positional
        arguments, a dict of keyword arguments or ``(args, kwargs)``; or, from a callback, a
        :class:`~vitprof.measure.mfu.flops.RanStep` (a micro-batch counted as it ran)."""
        end = self.clock.mark()
        if self._outside("step"):
            return
        self._steps += 1
        times = None if self.timer is None else self.timer.shares(batches)
        with nullcontext() if self.timer is None else self.timer.quiet():
            counted = [self.counts.of(batch) for batch in batches]
        steps = [c for c in counted if c is not None]
        total = reduce(operator.add, steps) if steps and len(steps) == len(counted) else None
        in_step = any(isinstance(batch, RanStep) and batch.here for batch in batches)
        self._pending.append(_Pending(self._steps, self._start, end, total, times, in_step))
        self._read()
        self._start = self.clock.mark()

    def _outside(self, what: str) -> bool:
        if not self.active:
            warnings.warn(f"vitprof: tracker.{what}() outside the tracker's `with` block (or "
                          f"after the run ended) is ignored", stacklevel=3)
        return not self.active

    def _read(self, final: bool = False) -> None:
        """Enter every pending step whose end mark is ready, in order. In a world, the same
        steps on every rank (the gather is a collective): all but the clock's ``lag`` newest,
        waited for (all of them when ``final``)."""
        if self.world is None:
            count = 0
            while count < len(self._pending) and self.clock.ready(self._pending[count].end):
                count += 1
        else:
            count = len(self._pending) if final else max(len(self._pending) - self.clock.lag, 0)
            if count:
                self.clock.wait(self._pending[count - 1].end)
        for _ in range(count):
            pending = self._pending.pop(0)
            entry = self._entry(pending, self.clock.seconds(pending.start, pending.end))
            self.history.append(entry)
            if self.on_step is not None:
                self.on_step(entry)

    def _entry(self, pending: _Pending, seconds: float) -> StepEntry:
        counted = pending.counted
        optimizer = None if self.optimizer is None else self.optimizer.vector_flops
        entry: StepEntry = {"step": pending.step, "seconds": seconds, "flops": None,
                            "vector_flops": None, "tflops": None, "mfu": None,
                            "peak_tflops": None, "components": {},
                            "optimizer_vector_flops": optimizer, "time_components": pending.times,
                            "counted_in_step": pending.counted_in_step}
        if counted is not None and seconds > 0:
            flops = counted.flops
            entry.update(flops=flops, vector_flops=counted.vector_flops,
                         components={k: v / flops for k, v in counted.components.items()
                                     if v and flops})
            if not pending.counted_in_step:  # counted as it ran, its seconds hold the count
                entry["tflops"] = flops / seconds / 1e12
                if self.peak is not None:
                    entry["mfu"] = self._mfu(pending.step, flops, seconds)
                    entry["peak_tflops"] = self.peak.tflops
        entry = self._with_medians(entry)
        entry.update(no_world() if self.world is None else world_figures(entry, self.world))
        return entry

    def _with_medians(self, entry: StepEntry) -> StepEntry:
        """``entry`` with the running medians of TFLOP/s and MFU (the last ones where it has
        none)."""
        for key, median in self._medians.items():
            last = self.history[-1][f"median_{key}"] if self.history else None
            entry[f"median_{key}"] = last if entry[key] is None else median.add(entry[key])
        return entry

    def _mfu(self, step: int, flops: int, seconds: float) -> float | None:
        """The step's MFU against the peak, never above 1 (see the module docstring): a
        measured peak below the step's rate is raised to it, any other peak gives None."""
        assert self.peak is not None
        peak = self.peak
        mfu = flops / seconds / (peak.tflops * 1e12)
        if mfu <= 1:
            return mfu
        tflops = flops / seconds / 1e12
        if peak.measured:
            self.peak = raised_to(peak, tflops, step)
            self._warn_once("raised", f"step {step} ran at {tflops:.4g} TFLOP/s, above the peak "
                            f"measured when the tracking started ({peak.tflops:.4g} TFLOP/s: the "
                            f"machine was busier then); the peak is now {tflops:.4g} TFLOP/s, "
                            f"the fastest step's rate, and rises with any faster step (each "
                            f"entry's peak_tflops, the summary's peak)")
            return 1.0
        self._warn_once("above", f"MFU above 100% at step {step} ({flops:,} FLOPs in "
                        f"{seconds:.6g} s = {tflops:.4g} TFLOP/s against a peak of "
                        f"{peak.tflops:g} TFLOP/s, {peak.source}): the peak is wrong for this "
                        f"device and dtype; pass peak_tflops= with its dense peak. The steps "
                        f"above it have no MFU")
        return None

    def _warn_once(self, kind: str, message: str) -> None:
        if kind not in self._warned:
            self._warned.add(kind)
            warnings.warn(f"vitprof: {message}", stacklevel=6)  # the caller of step()

    def summary(self) -> str:
        """The run so far as markdown: the peak, the medians, the FLOPs per component
        (rendered by :mod:`vitprof.render.mfu_summary`, registered with
        :mod:`vitprof.core.display`)."""
        return show(self, "markdown")


def track(model: nn.Module, peak_tflops: float | None = None, *,
          measure_dtype: torch.dtype | str | None = None, clock: Clock | None = None,
          on_step: Callable[[StepEntry], None] | None = None,
          optimizer: torch.optim.Optimizer | None = None, timing: bool = False,
          summary: str | Path | None = None, dtype: torch.dtype | str | None = None) -> Tracker:
    """A :class:`Tracker` for ``model``, used as ``with track(model) as tracker:``.

    ``peak_tflops``: the dense peak to divide by; None takes the GPU's from vitprof's table
    (:mod:`vitprof.measure.mfu.peaks`), or measures the CPU's now. ``measure_dtype`` is what the
    matmuls run in, the dtype of the peak (``"bf16"`` or ``torch.bfloat16`` under autocast;
    default: the model's parameters'); ``dtype``, its former name, is deprecated (a
    DeprecationWarning).
    ``clock`` replaces the device's clock; ``on_step(entry)`` is called with each entry;
    ``optimizer``: its step's element-wise work is counted too, and reported apart;
    ``timing=True``: each component's share of the forward's time too, with ``profile``'s hooks
    (:mod:`vitprof.measure.mfu.component_time`; they cost time); ``summary``: a path the
    markdown summary is written to when the tracking ends. Inside DDP or FSDP2 (``model`` the
    wrapped module or the one inside it), each rank counts its own step, and where a default
    process group is initialised each entry holds the world's figures too, gathered from every
    rank (:mod:`vitprof.measure.mfu.ranks`).
    A model that is not an ``nn.Module`` and a peak that is not a positive finite number are
    UserErrors; a GPU the table does not know is one warning, and the steps then have TFLOP/s
    but no MFU.
    """
    if not isinstance(model, nn.Module):
        raise UserError(f"vitprof.track needs the nn.Module being trained, got "
                        f"{type(model).__name__}")
    if dtype is not None:
        warnings.warn("vitprof.track(dtype=...) is deprecated; use measure_dtype=",
                      VitprofDeprecationWarning, stacklevel=2)
        measure_dtype = measure_dtype if measure_dtype is not None else dtype
    if peak_tflops is not None:
        peak: ChosenPeak | None = given_peak(peak_tflops)
    else:
        peak = _default_peak(model, measure_dtype)
    device = model_device(model)
    if clock is None:
        clock = CudaClock() if device.type == Device.CUDA else WallClock()
    timer = ComponentTimer(model, device.type) if timing else None
    return Tracker(model, peak, clock, on_step=on_step, optimizer=optimizer, timer=timer,
                   summary_path=summary, world=default_world())


def _default_peak(model: nn.Module, measure_dtype: torch.dtype | str | None
                  ) -> ChosenPeak | None:
    device = model_device(model)
    if measure_dtype is None:
        measure_dtype = next((p.dtype for p in model.parameters()), torch.float32)
    try:
        return choose_peak(None, device, measure_dtype)
    except UserError as error:
        warnings.warn(f"vitprof: no MFU, only TFLOP/s: {error}", stacklevel=3)
        return None
