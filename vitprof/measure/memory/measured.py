"""The memory a real CPU training step holds, measured independently of vitprof's predictor.

This module imports only torch and the standard library: it shares no code with
:mod:`vitprof.measure.memory.estimate`, so that the tests and ``benchmarks/memory_accuracy.py``
hold the prediction to something it did not compute.

The step measured (the loop the predictor models by default):
``optimizer.zero_grad(set_to_none=True)``, the forward (under ``torch.autocast("cpu", amp)`` when
``amp`` is given), ``out.backward(ones)`` (a ones gradient on the first output: no loss
function), ``optimizer.step()``; ``steps`` times, and the last step is the one reported (from the
second step on, the optimizer state exists).
Another loop (:class:`TrainingLoop`: a loss, ``zero_grad`` elsewhere or to zeros, gradient
accumulation) is written as its user writes it.

* **Peak**: the CPU allocator's own events, ``torch.profiler.profile(profile_memory=True)``:
  every allocation and free of the CPU allocator is reported with its size and the running
  total of the bytes allocated since profiling began (``total_allocated``). The CPU allocator
  keeps no cache (a free returns the block at once) and reports the size each tensor asked for,
  so that total is exactly the bytes the run holds at each moment, kernels' own scratch buffers
  included. Only the last step is profiled, and the total before its first event is taken
  off (the allocator's total runs on across profiles), so the total counts what that step
  allocates; its peak is the largest total, plus what was alive when it began (the parameters
  and buffers, the optimizer state and the inputs, each storage once).
* **Scratch**: what the peak holds inside one op beyond what was alive before and after it
  (oneDNN's workspaces and reorders, im2col buffers, per-thread buffers): each op the step
  dispatches below autograd (the ops a fake run sees, marked in the profile by a
  ``TorchDispatchMode``) has an interval, and the peak between ops is the largest total outside
  every interval and at each op's start and end. ``scratch_bytes`` is the peak minus that. It
  depends on the CPU's instruction set and the thread count (the kernels oneDNN picks), where
  the peak between ops does not: that is what a prediction of the ops' outputs is held to.
* **Saved for backward**: ``torch.autograd.graph.saved_tensors_hooks`` around the forward of the
  last step: each storage autograd packs for the backward counts once, whole (``nbytes`` of
  its storage: a view keeps its base alive); parameters are not counted (they exist anyway).
  Inside a checkpointed block autograd packs nothing (the checkpoint keeps the block's inputs
  itself: they are in the peak, not here).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.checkpoint import checkpoint as checkpointed

from vitprof.core.vocab import AmpDtype, Device, Loss, Optimizer, ZeroGrad

AMP_DTYPES: dict[str, torch.dtype] = {AmpDtype.BFLOAT16: torch.bfloat16,
                                      AmpDtype.FLOAT16: torch.float16}


@dataclass(frozen=True)
class MeasuredMemory:
    """Bytes measured on the last step: ``peak_bytes`` (the most alive at once, parameters,
    buffers and inputs included), ``saved_bytes`` (saved for the backward) and
    ``scratch_bytes`` (how far the peak lies above the most alive between two ops: what a
    kernel held inside its op beyond the op's inputs and outputs; 0 when the peak is between
    ops)."""

    peak_bytes: int
    saved_bytes: int
    scratch_bytes: int

    @property
    def peak_between_ops_bytes(self) -> int:
        """The most alive at once between two ops (at any op's start or end): the peak without
        the kernels' scratch, which depends on the CPU."""
        return self.peak_bytes - self.scratch_bytes


def _optimizer(name: str, params: list[nn.Parameter]) -> torch.optim.Optimizer:
    """torch's optimizer of ``name`` with its default settings (momentum 0.9 for
    sgd-momentum)."""
    if name == Optimizer.SGD:
        return torch.optim.SGD(params, lr=1e-3)
    if name == Optimizer.SGD_MOMENTUM:
        return torch.optim.SGD(params, lr=1e-3, momentum=0.9)
    if name == Optimizer.ADAM:
        return torch.optim.Adam(params)
    if name == Optimizer.ADAMW:
        return torch.optim.AdamW(params)
    raise ValueError(f"unknown optimizer {name!r}")


def repeated_blocks(model: nn.Module) -> list[nn.Module]:
    """The transformer blocks as a module tree shows them: the children of the largest
    ``nn.Sequential`` or ``nn.ModuleList`` whose children (2 or more) are all of one class."""
    best: list[nn.Module] = []
    for module in model.modules():
        if isinstance(module, nn.Sequential | nn.ModuleList):
            children = list(module.children())
            if len(children) > max(1, len(best)) and len({type(c) for c in children}) == 1:
                best = children
    return best


@contextmanager
def _checkpointing(model: nn.Module, every: int | None) -> Iterator[None]:
    """Run one block in ``every`` (blocks 0, every, 2 x every, ...) under
    ``torch.utils.checkpoint`` (non-reentrant); nothing when ``every`` is None."""
    blocks = repeated_blocks(model)[::every] if every else []
    if every and not blocks:
        raise ValueError("no repeated blocks to checkpoint")
    for block in blocks:
        forward = block.forward

        def wrapped(*args: Any, _forward: Callable[..., Any] = forward, **kwargs: Any) -> Any:
            return checkpointed(_forward, *args, use_reentrant=False, **kwargs)

        block.forward = wrapped
    try:
        yield
    finally:
        for block in blocks:
            del block.forward


def _every(checkpoint: str | int) -> int | None:
    """``"none"`` -> None, ``"blocks"`` -> 1, an int N or ``"every N"`` -> N."""
    if checkpoint == "none":
        return None
    if checkpoint == "blocks":
        return 1
    if isinstance(checkpoint, int):
        return checkpoint
    return int(str(checkpoint).split()[-1])


def _first_tensor(out: Any) -> torch.Tensor:
    if isinstance(out, torch.Tensor):
        return out
    if hasattr(out, "logits"):
        return out.logits
    return next(v for v in (out.values() if isinstance(out, dict) else out)
                if isinstance(v, torch.Tensor))


def _storages(tensors: Sequence[torch.Tensor]) -> int:
    """Bytes of the distinct storages of ``tensors``."""
    seen = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}
    return sum(seen.values())


class _SavedBytes:
    """The storages packed for the backward, each once, parameters excluded."""

    def __init__(self, params: set[int]) -> None:
        self.params = params
        self.seen: dict[int, int] = {}

    def pack(self, tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in self.params:
            self.seen.setdefault(storage.data_ptr(), storage.nbytes())
        return tensor

    @property
    def total(self) -> int:
        return sum(self.seen.values())


# the name of the profiler's range around each op the step dispatches (see _OpIntervals)
_OP_RANGE = "vitprof.measured_memory.op"


class _OpIntervals(TorchDispatchMode):
    """Each op dispatched below autograd (and below autocast: the ops a fake-tensor run sees)
    runs inside a profiler range named :data:`_OP_RANGE`; what a kernel allocates and frees
    within it is its scratch. The ops a kernel calls inside run below the mode, unmarked."""

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        with record_function(_OP_RANGE):
            return func(*args, **(kwargs or {}))


@dataclass(frozen=True)
class AllocationPeaks:
    """Bytes a run allocated beyond what was alive when it began: the most at once (``peak``)
    and the most at once between two ops (``between_ops``: the peak without the kernels'
    scratch)."""

    peak: int
    between_ops: int


def allocation_peaks(run: Callable[[], object]) -> AllocationPeaks:
    """The :class:`AllocationPeaks` of ``run()``, from the CPU allocator's events in the
    profiler, each op ``run`` dispatches marked (:class:`_OpIntervals`)."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof, \
            _OpIntervals():
        run()
    return _peaks(prof)


def _peaks(prof: profile) -> AllocationPeaks:
    """The :class:`AllocationPeaks` of the profile ``prof``.

    The allocator's ``total_allocated`` runs on across profiles (what one profile allocated and
    the program freed after it never leaves it), so the total before the first event is
    subtracted. An allocation belongs to the op whose range holds its time (intra-op worker
    threads included); between ops every total counts, inside an op only the totals at its
    start and end."""
    events: list[tuple[int, int, int]] = []
    ops: list[tuple[int, int]] = []
    stack = list(prof.profiler.kineto_results.experimental_event_tree())  # type: ignore[union-attr]
    while stack:
        event = stack.pop()
        stack.extend(event.children)
        fields = event.extra_fields
        if type(fields).__name__ == "_ExtraFields_Allocation" and fields.device.type == Device.CPU:
            events.append((event.start_time_ns, fields.total_allocated, fields.alloc_size))
        elif event.name == _OP_RANGE:
            ops.append((event.start_time_ns, event.end_time_ns))
    if not events:
        return AllocationPeaks(0, 0)
    events.sort()
    ops.sort()
    base = events[0][1] - events[0][2]
    totals = [total - base for _, total, _ in events]
    op_of = [_op_holding(time, ops) for time, _, _ in events]
    # between ops: each total outside every op, and each op's last total (its end); an op's
    # start is the total before its first event, counted as the end of what came before
    ends = [total for total, op, next_op in zip(totals, op_of, [*op_of[1:], None], strict=True)
            if op is None or op != next_op]
    return AllocationPeaks(max(totals), max(ends))


def _op_holding(time: int, ops: list[tuple[int, int]]) -> int | None:
    """The index of the interval of ``ops`` (sorted, disjoint ``(start, end)``) that holds
    ``time``, or None."""
    index = bisect.bisect_right(ops, (time, math.inf)) - 1
    return index if index >= 0 and time <= ops[index][1] else None


@dataclass(frozen=True)
class TrainingLoop:
    """The loop a step runs, as its user writes it: ``loss`` (ones: ``out.backward(ones)``,
    sum: ``out.sum().backward()``, cross-entropy: ``F.cross_entropy(out, labels)``, the labels
    zeros), where ``opt.zero_grad(set_to_none=...)`` stands (start: before the first forward;
    before-backward: before the first backward; end: after ``opt.step()``), and
    ``accumulation`` forward and backward passes per ``opt.step()``. A frozen part of the model
    is the caller's: a parameter without ``requires_grad`` is not optimized."""

    loss: str = "ones"
    zero_grad: str = "start"
    set_to_none: bool = True
    accumulation: int = 1


def measure_training_memory(
    model: nn.Module, example: torch.Tensor | tuple[Any, ...], *, optimizer: str = "adamw",
    amp: str | None = None, checkpoint: str | int = "none", steps: int = 2,
    loop: TrainingLoop = TrainingLoop(),
) -> MeasuredMemory:
    """Run ``steps`` real training steps of ``model`` (on the CPU, with weights) on ``example``
    (a tensor, or a tuple of positional arguments) as ``loop`` says and measure the last one
    (see the module's docstring; any ``.grad`` the loop left is in the peak, and the saved
    bytes are the last forward's). The model is left in train mode,
    without ``.grad``."""
    args = example if isinstance(example, tuple) else (example,)
    opt = _optimizer(optimizer, [p for p in model.parameters() if p.requires_grad])
    model.train()
    saved = _SavedBytes({p.untyped_storage().data_ptr() for p in model.parameters()})
    labels = torch.zeros(_first_tensor(args).shape[0], dtype=torch.int64) \
        if loop.loss == Loss.CROSS_ENTROPY else None
    with _checkpointing(model, _every(checkpoint)):
        for _ in range(steps - 1):
            _step(model, args, labels, opt, amp, loop, None)
        if loop.zero_grad == ZeroGrad.START:  # the step's first op: the same bytes before it
            opt.zero_grad(set_to_none=loop.set_to_none)
        held = _storages([*model.parameters(), *model.buffers(), *_state(opt),
                          *(a for a in args if isinstance(a, torch.Tensor)),
                          *([labels] if labels is not None else [])])
        graded = [p for p in model.parameters() if p.grad is not None]

        def last_step() -> None:
            # the profiler reports no free of a block allocated before it started: gradients
            # the loop left are cloned inside the profile (each old one freed unseen, so the
            # total counts each once), and the step frees the clones where it frees them
            for p in graded:
                p.grad = p.grad.clone()  # type: ignore[union-attr]
            _step(model, args, labels, opt, amp, loop, saved)

        peaks = allocation_peaks(last_step)
    opt.zero_grad(set_to_none=True)
    return MeasuredMemory(held + peaks.peak, saved.total, peaks.peak - peaks.between_ops)


def _step(model: nn.Module, args: tuple[Any, ...], labels: torch.Tensor | None,
          opt: torch.optim.Optimizer, amp: str | None, loop: TrainingLoop,
          saved: _SavedBytes | None) -> None:
    """One optimizer step of ``loop``: its passes (forward, then the backward of the loss, the
    last forward's saved tensors in ``saved``), ``opt.step()``, and ``zero_grad`` where it
    stands."""
    for i in range(loop.accumulation):
        if i == 0 and loop.zero_grad == ZeroGrad.START:
            opt.zero_grad(set_to_none=loop.set_to_none)
        with ExitStack() as stack:
            if saved is not None and i == loop.accumulation - 1:
                stack.enter_context(torch.autograd.graph.saved_tensors_hooks(saved.pack,
                                                                              _same))
            with torch.autocast("cpu", dtype=AMP_DTYPES[amp] if amp else torch.bfloat16,
                                enabled=amp is not None):
                out = _first_tensor(model(*args))
            if loop.loss == Loss.SUM:  # the loss outside autocast
                out = out.sum()
            elif labels is not None:  # cross-entropy
                out = torch.nn.functional.cross_entropy(out, labels)
        if i == 0 and loop.zero_grad == ZeroGrad.BEFORE_BACKWARD:
            opt.zero_grad(set_to_none=loop.set_to_none)
        out.backward(torch.ones_like(out))
        del out
    opt.step()
    if loop.zero_grad == ZeroGrad.END:
        opt.zero_grad(set_to_none=loop.set_to_none)


def _same(tensor: torch.Tensor) -> torch.Tensor:
    return tensor


def _state(opt: torch.optim.Optimizer) -> list[torch.Tensor]:
    """The tensors of the optimizer's state (moments, momentum buffers, step counts)."""
    return [v for state in opt.state.values() for v in state.values()
            if isinstance(v, torch.Tensor)]
