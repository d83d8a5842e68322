"""One training step (or one forward) run on fake tensors, every allocation and free logged.

The step is the loop people write: gradients set to None, the forward (under
``torch.autocast`` when ``amp`` is given, the forward only, as in real code), the backward of a
ones gradient on the output (no loss), the optimizer's step. It runs under the counter
(:func:`vitprof.count.session.count`) with a :class:`~vitprof.count.timeline.Timeline` as its
liveness, then the optimizer's step under a dispatch mode that logs into the same timeline.

Why fake tensors: a ``FakeTensor`` holds no memory, like a meta tensor, but it says it lives on
the CPU, so ``torch.autocast("cpu")`` casts it as it casts a real one (autocast ignores meta
tensors) and the dtypes of every activation are real (for ``target="cuda"`` CPU autocast
casts as CUDA autocast does: :mod:`vitprof.measure.memory.cuda_autocast`). Storages are freed when
their last tensor goes, as on any device, so the timeline is the run's. The parameters, buffers and
optimizer state are fake stand-ins made before the step; the optimizer state is made by one
step run beforehand, so the step logged is the second one (the state exists).

Attention: every ``scaled_dot_product_attention`` call, at any depth (a timm block's, the one
inside ``F.multi_head_attention_forward``, HF's attention interface), runs the kernel
``attention`` names for the ``target``, or for ``auto`` the one torch would dispatch to there
(:mod:`vitprof.measure.memory.attention_kernels`): the math path keeps the softmax scores for the
backward, the fused kernels keep the output and a log-sum-exp (O(L) per head). A model that
computes its attention itself is run as it is.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.autograd.graph import saved_tensors_hooks
from torch.nn.utils.stateless import _reparametrize_module
from torch.utils.checkpoint import checkpoint as checkpointed

from vitprof.core.errors import UserError
from vitprof.core.vocab import AttentionPath, MemoryTarget, Optimizer
from vitprof.count.running import CountFailed, one_line
from vitprof.count.session import Run, count
from vitprof.count.timeline import Timeline
from vitprof.measure.memory.attention_kernels import AttentionChoice
from vitprof.measure.memory.cuda_autocast import cuda_policy, lower_precision_call
from vitprof.measure.memory.loop import (
    Loop,
    backward_of,
    labels_of,
    loss_of_output,
    trainable,
)
from vitprof.measure.memory.settings import MemorySettings
from vitprof.measure.memory.spelling import SettingError
from vitprof.measure.optimizer_step import SecondStep, StepMode
from vitprof.recognize.tables import ComponentMap
from vitprof.workload import Workload


@dataclass(frozen=True)
class StepSettings:
    """What is run: ``optimizer`` (sgd, sgd-momentum, adam, adamw), ``amp`` (an autocast dtype
    or None), ``every`` (checkpoint one block in ``every``; None: none), ``target`` (cpu,
    cuda), ``attention`` (auto, math, efficient, flash), ``train`` (a training step, else a forward
    without gradients), ``loop`` (the training loop: :mod:`vitprof.measure.memory.loop`),
    ``asked`` (the settings as given: a setting the step reads as it is)."""

    optimizer: Optimizer
    amp: torch.dtype | None
    every: int | None
    target: MemoryTarget
    attention: AttentionPath
    train: bool
    loop: Loop = field(default_factory=Loop)
    asked: MemorySettings = field(default_factory=MemorySettings)


@dataclass
class Step:
    """What one step did: the ``timeline``, the counted ``run``, and the ids of the
    allocations that were ``inputs``, ``gradients`` and ``saved`` for the backward (id ->
    bytes), the optimizer's ``state`` (parameter name -> its state tensors), the
    ``attention`` kernels its SDPA calls ran, and the names of the parameters ``trained`` (none
    in inference)."""

    timeline: Timeline
    run: Run
    inputs: set[int]
    gradients: set[int]
    saved: dict[int, int]
    state: dict[str, list[torch.Tensor]]
    attention: AttentionChoice
    trained: set[str]


class _Logged(StepMode):
    """Every aten op run under it is logged in ``timeline`` (the optimizer's second step, by
    the harness MFU's pricing shares: :class:`~vitprof.measure.optimizer_step.SecondStep`)."""

    def __init__(self, timeline: Timeline) -> None:
        super().__init__()
        self.timeline = timeline

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not self.paused:
            self.timeline.created(func, out)
        return out


def optimizer_recipe(name: str, target: str) -> tuple[type[torch.optim.Optimizer], dict[str, Any]]:
    """torch's optimizer class of ``name`` and its keywords: torch's defaults (momentum 0.9
    for sgd-momentum); on cuda the multi-tensor (foreach) implementation torch picks there by
    default, on the CPU the single-tensor one it picks there."""
    foreach = target == MemoryTarget.CUDA
    if name == Optimizer.SGD:
        return torch.optim.SGD, {"lr": 1e-3, "foreach": foreach}
    if name == Optimizer.SGD_MOMENTUM:
        return torch.optim.SGD, {"lr": 1e-3, "momentum": 0.9, "foreach": foreach}
    if name == Optimizer.ADAM:
        return torch.optim.Adam, {"foreach": foreach}
    return torch.optim.AdamW, {"foreach": foreach}


def make_optimizer(name: str, params: Sequence[torch.Tensor], target: str) -> torch.optim.Optimizer:
    """The optimizer of :func:`optimizer_recipe` over ``params``."""
    kind, keywords = optimizer_recipe(name, target)
    return kind(params, **keywords)


def _stand_ins(module: nn.Module, fake: FakeTensorMode, trained: set[str]
               ) -> dict[str, torch.Tensor]:
    """Fake CPU tensors for every parameter and buffer (shape, strides, dtype), those named in
    ``trained`` requiring a gradient."""
    with fake:
        return {name: torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="cpu")
                .requires_grad_(name in trained)
                for name, t in [*module.named_parameters(), *module.named_buffers()]}


def _held_gradients(params: Sequence[torch.Tensor], fake: FakeTensorMode,
                    timeline: Timeline) -> set[int]:
    """The previous backward's gradients, alive from the start of the step (the loop keeps
    them through the forward): a fake ``.grad`` of each of ``params``, held in ``timeline``;
    the ids of their allocations."""
    with fake:
        for p in params:
            p.grad = torch.zeros_like(p)
    grads = [p.grad for p in params]
    timeline.hold(grads)
    return {i for i in (timeline.allocation_of(g) for g in grads if g is not None)
            if i is not None}


def _initial_state(opt: torch.optim.Optimizer, params: Sequence[torch.Tensor]) -> None:
    """Make the optimizer's state as a first step does (gradients set, a step, set to None)."""
    for p in params:
        p.grad = torch.empty_like(p)
    opt.step()
    opt.zero_grad(set_to_none=True)


@contextmanager
def autocast_forward(module: nn.Module, amp: torch.dtype | None) -> Iterator[None]:
    """``module``'s forward (the root's, not the backward) under ``torch.autocast("cpu",
    amp)``; nothing when ``amp`` is None."""
    if amp is None:
        yield
        return
    contexts: list[torch.autocast] = []

    def enter(*_: Any) -> None:
        contexts.append(torch.autocast("cpu", dtype=amp))
        contexts[-1].__enter__()

    def leave(*_: Any) -> None:
        contexts.pop().__exit__(None, None, None)

    hooks = (module.register_forward_pre_hook(enter), module.register_forward_hook(leave))
    try:
        yield
    finally:
        for hook in hooks:
            hook.remove()
        while contexts:  # a forward that failed left its autocast
            contexts.pop().__exit__(None, None, None)


@contextmanager
def checkpointed_blocks(module: nn.Module, blocks: Mapping[str, int], every: int | None
                        ) -> Iterator[None]:
    """The blocks the breakdown found (``blocks``: module path -> block index), one in
    ``every`` (blocks 0, ``every``, ...), run under ``torch.utils.checkpoint``
    (non-reentrant); restored on exit. Each block's ``forward`` is replaced on the instance, so
    hooks on the block (FSDP2's unshard and reshard) run outside the checkpoint, as they do
    around torch's ``checkpoint_wrapper``. Their recomputation in the backward runs inside the
    count, its SDPA calls routed as the forward's (:mod:`vitprof.count.sdpa`)."""
    chosen = [path for path, index in blocks.items()
              if every is not None and index % every == 0]
    if every is not None and not chosen:
        raise SettingError(lambda s: f"{s.name('checkpoint')} runs transformer blocks' modules "
                           "under torch.utils.checkpoint, and the breakdown found no module "
                           "that is a block in this model")
    modules = [module.get_submodule(path) for path in chosen]
    for block in modules:
        forward = block.forward

        def run(*args: Any, _forward: Callable[..., Any] = forward, **kwargs: Any) -> Any:
            return checkpointed(_forward, *args, use_reentrant=False, **kwargs)

        block.forward = run
    try:
        yield
    finally:
        for block in modules:
            del block.forward


class _Saved:
    """The allocations autograd packs for the backward (id -> bytes), parameters aside (they
    were not allocated in the step: no id)."""

    def __init__(self, timeline: Timeline) -> None:
        self.timeline = timeline
        self.found: dict[int, int] = {}

    def pack(self, tensor: torch.Tensor) -> torch.Tensor:
        found = self.timeline.allocation_of(tensor)
        if found is not None:
            self.found.setdefault(found, self.timeline.allocations[found].size)
        return tensor


def _unpack(tensor: torch.Tensor) -> torch.Tensor:
    return tensor


def run_step(work: Workload, mapping: ComponentMap, settings: StepSettings, batch: int
             ) -> Step:
    """Run one step of ``work``'s model at ``batch`` on fake tensors (see the module)."""
    fake = FakeTensorMode()
    loop = settings.loop
    trained = trainable(work.module, mapping, loop) if settings.train else set()
    stand = _stand_ins(work.module, fake, trained)
    timeline = Timeline()
    spec = work.inputs.at_batch(batch)
    with fake:
        inputs = spec.example("cpu")
        labels = labels_of(loop.loss, batch)
    timeline.hold([inputs, labels])
    held = {timeline.allocation_of(t) for t in _tensors([inputs, labels])} - {None}
    with _reparametrize_module(work.module, stand), ExitStack() as stack:
        params = [t for t in work.module.parameters() if t.requires_grad]
        if settings.train and not params:
            raise SettingError(lambda s: f"{work.name}: no parameter requires a gradient: "
                               "there is no training step to predict (try "
                               f"{s.setting('mode', 'inference')})")
        opt = make_optimizer(settings.optimizer, params, settings.target) if settings.train \
            else None
        if opt is not None:
            SecondStep(opt, partial(_Logged, timeline))
            _initial_state(opt, params)
        held_grads = _held_gradients(params, fake, timeline) \
            if settings.train and loop.grads_through_forward else set()
        saved = _Saved(timeline)
        choice = AttentionChoice(settings.target, settings.attention)
        kernel = partial(lower_precision_call, choice)
        stack.enter_context(checkpointed_blocks(work.module, mapping.blocks, settings.every))
        if settings.amp is not None and settings.target == MemoryTarget.CUDA:
            stack.enter_context(cuda_policy())  # backward too: a checkpoint's recomputation
        stack.enter_context(autocast_forward(work.module, settings.amp))
        stack.enter_context(loss_of_output(work.module, loop.loss, labels))
        stack.enter_context(fake)
        if not settings.train:
            stack.enter_context(torch.no_grad())
        with saved_tensors_hooks(saved.pack, _unpack), _quiet_fake_tensor_log():
            run = _counted(work, inputs, timeline, settings, spec.shape, kernel)
        stack.close()
        gradients = _optimizer_step(timeline, run, opt, work.module) | held_grads
        state = _state_by_name(opt, work.module)
    return Step(timeline, run, {i for i in held if i is not None}, gradients, saved.found,
                state, choice, trained)


@contextmanager
def _quiet_fake_tensor_log() -> Iterator[None]:
    """torch's fake tensors log every op that fails (its traceback, on stderr) before raising:
    the failure reaches the user as :func:`_counted`'s one line, so the log is off meanwhile."""
    log = logging.getLogger("torch._subclasses.fake_tensor")
    was = log.disabled
    log.disabled = True
    try:
        yield
    finally:
        log.disabled = was


def _counted(work: Workload, inputs: Any, timeline: Timeline,
             settings: StepSettings, shape: tuple[int, ...], attention: Callable[..., Any]
             ) -> Run:
    """The counted forward (and backward) on fake tensors, every SDPA call running
    ``attention``; a failure says what was tried, and on which input ``shape``."""
    try:
        return count(work.module, inputs, train=settings.train, live=timeline,
                     keep_gradients=True, attention=attention,
                     backward_of=backward_of(settings.loop))
    except CountFailed as failed:
        tried = "a training step (forward in train mode, then backward)" if settings.train \
            else "a forward"
        raise UserError(f"{work.name}: {tried} could not run on fake CPU tensors (meta "
                        f"storage): {one_line(failed.error)} (input of shape "
                        f"{'x'.join(map(str, shape))})") from None


def _optimizer_step(timeline: Timeline, run: Run, opt: torch.optim.Optimizer | None,
                    module: nn.Module) -> set[int]:
    """The optimizer's step on the gradients of ``run``, logged; the ids of the gradients."""
    if opt is None:
        return set()
    for name, gradient in run.gradients.items():
        if gradient.layout != torch.strided:
            raise UserError(f"{name}: a sparse gradient ({gradient.layout}, e.g. "
                            f"nn.Embedding(sparse=True)): the memory of sparse tensors is not "
                            f"predicted")
    ids = {timeline.allocation_of(g) for g in run.gradients.values()}
    named = dict(module.named_parameters())
    for name, gradient in run.gradients.items():
        named[name].grad = gradient
    run.gradients.clear()
    timeline.stage = "optimizer"
    opt.step()  # the second: logged (see run_step)
    return {i for i in ids if i is not None}


def _state_by_name(opt: torch.optim.Optimizer | None, module: nn.Module
                   ) -> dict[str, list[torch.Tensor]]:
    """The optimizer's state tensors of each parameter, by the parameter's name."""
    if opt is None:
        return {}
    return {name: [v for v in opt.state[p].values() if isinstance(v, torch.Tensor)]
            for name, p in module.named_parameters() if p in opt.state}


def _tensors(value: Any) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _tensors(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _tensors(item)
