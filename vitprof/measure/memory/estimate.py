"""``memory()``: the memory of a training step, per component and per block, and its peak.

Conventions (bytes throughout):

* The step is :mod:`vitprof.measure.memory.step`'s: gradients set to None, the forward
  (autocast when ``amp``), a ones gradient on the output backward (no loss), the optimizer's
  step; the second step, so the optimizer state exists from the start.
* **Alive at a moment**: the parameters and buffers, the optimizer state, the inputs, and every
  tensor an op has allocated and not yet freed (its last tensor or view gone and autograd no
  longer holding it): activations and temporaries, under the component of the op record they
  belong to (:mod:`vitprof.count.timeline`), the gradients, and the optimizer step's
  temporaries (under ``optimizer_state``). The **peak** is the largest total alive at any
  moment of the step; its op, phase and component are those of the op that allocated then.
* **Per component** (and per block): ``params`` and ``grads`` (trainable parameters, at their
  dtype), ``optimizer_state`` (the moments and momentum buffers as torch's optimizer keeps them,
  at the parameter's dtype: sgd none, sgd-momentum 1x, adam and adamw 2x; and, on the CPU, the
  4-byte ``step`` tensor of each parameter, which CUDA keeps on the host), ``activations``:
  saved for the backward, each storage once, whole, under the component of the op that made it
  (the inputs under the first op's).
* ``target="cuda"``: each allocation is rounded up to a multiple of 512 bytes, as the CUDA
  caching allocator's ``max_memory_allocated`` counts it, and the cuBLAS workspaces of a Hopper
  GPU (one a handle: two in training, one in inference) are alive throughout, both modelled,
  not measured (:mod:`vitprof.measure.memory.cuda_model`); the optimizers run their multi-tensor
  (foreach) form;
  with ``amp``, CUDA autocast's casts (:mod:`vitprof.measure.memory.cuda_autocast`).
  ``target="cpu"``: sizes as asked, no workspace, single-tensor optimizers.
* ``mode="inference"``: one forward without gradients; parameters, inputs and activations only.
* The training loop (``loss``, ``zero_grad``, ``set_to_none``, ``gradient_accumulation``,
  ``freeze``): :mod:`vitprof.measure.memory.loop`; a loop other than the default is written out
  in the convention.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import nn

from vitprof.core.display import Shown
from vitprof.core.errors import UserError
from vitprof.core.records import COMPONENTS
from vitprof.core.vocab import (
    MemoryTarget,
    Recognizer,
    Strategy,
)
from vitprof.count.running import CountFailed, one_line
from vitprof.count.session import count
from vitprof.count.timeline import Allocation, LiveEvent, Moment
from vitprof.measure.distributed.estimate import RankMemory, check_rank_settings, rank_memory
from vitprof.measure.distributed.strategies import FSDP_STRATEGIES
from vitprof.measure.memory import cuda_model
from vitprof.measure.memory.fit import check_fit, largest_batch
from vitprof.measure.memory.loop import Loop
from vitprof.measure.memory.settings import (
    DEFAULT_OPTIMIZER,
    SETTING_NAMES,
    MemorySettings,
    checkpoint_every,
)
from vitprof.measure.memory.spelling import SettingError
from vitprof.measure.memory.step import Step, StepSettings, run_step
from vitprof.recognize import Found, breakdown
from vitprof.recognize.graph.blocks import LISTS
from vitprof.recognize.graph.blocks import kind as forward_kind
from vitprof.recognize.tables import ComponentMap, recognize
from vitprof.workload import (
    InputRequest,
    Workload,
    dtype_name,
    dtype_named,
    make_workload,
    request_of,
)

Rounding = Callable[[int], int]  # bytes as an allocator counts a request of n
FIXED = ("parameters", "optimizer_state", "inputs", "workspace", "gradients")
MEMORY_CONVENTION = (
    "bytes alive during the second training step (gradients set to None, forward, ones-gradient "
    "backward, optimizer step): parameters and buffers, optimizer state, inputs, gradients, and "
    "each tensor from the op that allocates it until its last reference and autograd release it; "
    "activations = saved for the backward, each storage once, by the component of the op that "
    "made it"
)
# the convention of a step whose loop is not the default: the loop as its user writes it first
LOOP_CONVENTION = (
    "bytes alive during the second optimizer step (its last forward and backward, then the "
    "step) of the loop `{code}`: parameters and buffers, optimizer state, inputs, gradients, and "
    "each tensor from the op that allocates it until its last reference and autograd release it; "
    "activations = saved for the backward, each storage once, by the component of the op that "
    "made it"
)
INFERENCE_CONVENTION = (
    "bytes alive during one forward without gradients: parameters and buffers, inputs, and each "
    "tensor from the op that allocates it until its last reference goes; nothing is saved for a "
    "backward"
)


@dataclass(frozen=True)
class ComponentMemory:
    """Bytes of one component or block: parameters, gradients, optimizer state, and
    activations saved for the backward."""

    params: int = 0
    grads: int = 0
    optimizer_state: int = 0
    activations: int = 0

    def __add__(self, other: ComponentMemory) -> ComponentMemory:
        return ComponentMemory(self.params + other.params, self.grads + other.grads,
                               self.optimizer_state + other.optimizer_state,
                               self.activations + other.activations)


@dataclass(frozen=True)
class MemoryEvent(LiveEvent):
    """One op of the step, in run order (:class:`~vitprof.count.timeline.LiveEvent`): its
    ``phase`` (forward, backward, optimizer), its ``component``, and the bytes ``live`` after
    it: ``parameters``, ``gradients``, ``optimizer_state``, ``inputs``, ``workspace`` and one
    entry per component (its activations and temporaries)."""

    component: str


@dataclass(frozen=True, repr=False)
class MemoryEstimate(Shown):
    """The predicted memory of one step (see the module for the conventions); ``repr()`` is its
    table, as ``vitprof memory`` prints it (:mod:`vitprof.render.display`)."""

    model: str
    input: str
    batch_size: int
    settings: Mapping[str, str]
    peak_bytes: int
    peak_phase: str
    peak_index: int
    peak_component: str
    saved_bytes: int
    by_component: Mapping[str, ComponentMemory]
    by_block: Mapping[int, ComponentMemory]
    timeline: Sequence[MemoryEvent]
    largest_batch: int | None = None
    fit_bytes: int | None = None
    convention: str = MEMORY_CONVENTION
    warnings: tuple[str, ...] = field(default=())

    @property
    def total(self) -> ComponentMemory:
        """The sum over components."""
        return sum(self.by_component.values(), ComponentMemory())


def step_settings(settings: MemorySettings, dtype: str = "float32") -> StepSettings:
    """What the step runs for ``settings`` at the parameters' ``dtype``: ``amp`` needs float32
    master weights (a :class:`SettingError` else). In inference the optimizer is the default,
    which no step reads (``train`` is False); the reports say ``optimizer none``."""
    if settings.amp is not None and dtype_named(dtype) != torch.float32:
        raise SettingError(lambda s: f"{s.name('amp')} keeps float32 master weights: it "
                           f"needs {s.setting('dtype', 'float32')}, got {dtype}")
    loop = Loop(settings.loss, settings.zero_grad, settings.set_to_none,
                settings.gradient_accumulation, settings.freeze)
    return StepSettings(settings.chosen("optimizer") or DEFAULT_OPTIMIZER,
                        dtype_named(settings.amp), checkpoint_every(settings.checkpoint),
                        settings.target, settings.attention, settings.train, loop, settings)


def memory(
    model: nn.Module | str, request: InputRequest | None = None, *,
    settings: MemorySettings | None = None, fit: int | None = None,
    strategy: str = Strategy.NONE, world_size: int = 1, **keywords: Any,
) -> MemoryEstimate | RankMemory:
    """The predicted memory of one step of ``model`` (an ``nn.Module`` or a name
    :func:`vitprof.analyze` accepts) at ``request`` (:class:`vitprof.workload.InputRequest`:
    its batch size, sizes and dtype, the parameters' dtype, float32 where it names none; None:
    the model's own input, batch 1); see the module for the conventions.

    ``settings`` (:class:`~vitprof.measure.memory.settings.MemorySettings`: the optimizer,
    ``amp``, ``checkpoint``, ``target``, ``attention``, ``mode`` and the training loop, each
    with its meaning and default there), or each as a keyword of its name
    (``optimizer="sgd"``; over ``settings`` where both are given). The estimate's
    ``settings["attention"]`` says which kernel ran and, under auto, why. ``fit`` (bytes): also
    find the largest batch whose peak is at most ``fit``
    (:func:`vitprof.measure.memory.fit.largest_batch`; with an ``input_shape`` the batch is
    the shape's first size). The input keywords it took before (``batch_size``, ``image_size``,
    ``dtype``, ...: the fields of a request) still make one, with a DeprecationWarning.
    ``strategy``: none (one process), ddp, zero1, zero2 or fsdp, each rank's step at
    ``world_size`` ranks, the request's batch each rank's: a :class:`RankMemory`
    (:mod:`vitprof.measure.distributed.estimate`; ``checkpoint`` and the loop as in one
    process, ``amp`` under ddp and zero1).
    """
    named = {key: keywords.pop(key) for key in SETTING_NAMES if key in keywords}
    asked = request_of(request, keywords, "memory").or_dtype(torch.float32)
    dtype = dtype_name(asked.dtype or torch.float32)
    given = replace(settings or MemorySettings(), **named)
    step = step_settings(given, dtype)
    if fit is not None:
        check_fit(fit)
    strategy, world_size = check_rank_settings(strategy, world_size)
    if strategy != Strategy.NONE:
        _check_strategy_settings(step, strategy)
    work = make_workload(model, asked)
    batch_size = work.inputs.batch
    mapping = recognize(work.module, work.rules)
    if strategy in FSDP_STRATEGIES:
        mapping = _with_graph_blocks(work, mapping, f"shard under {strategy}")
    elif strategy != Strategy.NONE and step.every is not None:
        mapping = _with_graph_blocks(work, mapping, "checkpoint")
    names = given.names(dtype)
    if strategy != Strategy.NONE:
        return rank_memory(work, mapping, step, strategy, world_size, batch_size, names,
                           fit)
    if step.every is not None and not mapping.blocks:
        estimate, mapping = _checkpointed_by_its_own_blocks(work, mapping, step, batch_size,
                                                             names)
    else:
        estimate = predict(work, mapping, step, batch_size, names)
    if not step.train:
        estimate = replace(estimate, convention=INFERENCE_CONVENTION)
    elif step.loop != Loop():
        estimate = replace(estimate, convention=LOOP_CONVENTION.format(
            code=step.loop.code()))
    if fit is None:
        return estimate
    found = largest_batch(lambda b: predict(work, mapping, step, b, names).peak_bytes,
                          fit, estimate, fixed_bytes(estimate))
    return _with_fit(estimate, found, fit)


def _check_strategy_settings(settings: StepSettings, strategy: str) -> None:
    """Under a strategy the step is a training step (any loop, checkpointed or not; autocast
    under DDP and ZeRO-1): a UserError naming the first setting that departs; for ``amp``
    under FSDP2, what its users run instead of autocast."""
    if not settings.train:
        raise SettingError(lambda s: f"{s.setting('strategy', strategy)} predicts a "
                           f"training step on each rank; {s.name('mode')} is not predicted "
                           "with a strategy yet")
    if settings.amp is not None and strategy in FSDP_STRATEGIES:
        raise SettingError(lambda s: f"{s.setting('strategy', strategy)} with {s.name('amp')}: "
                           "FSDP2's mixed precision is fully_shard's MixedPrecisionPolicy("
                           "param_dtype=..., reduce_dtype=float32), not autocast, and neither "
                           "is predicted with a strategy yet")


def _checkpointed_by_its_own_blocks(
    work: Workload, mapping: ComponentMap, settings: StepSettings, batch: int,
    names: Mapping[str, str],
) -> tuple[MemoryEstimate, ComponentMap]:
    """The estimate of a checkpointed step where no table named the blocks, and ``mapping``
    with the blocks it checkpointed. The step checkpoints the blocks of the module tree
    (:func:`_tree_blocks`) and is kept where its own breakdown finds those very blocks: one
    count. Else (a guess the breakdown does not confirm) the blocks are those the graph
    recognizer finds in a forward on meta (:func:`_with_graph_blocks`), and the step runs again
    by them."""
    guessed = replace(mapping, blocks=_tree_blocks(work.module))
    if guessed.blocks:
        step = run_step(work, guessed, settings, batch)
        found = breakdown(step.run, work.module, Recognizer.AUTO, work.rules)
        if dict(found.blocks) == guessed.blocks:
            return _estimate(work, step, found, settings, batch, names), guessed
    mapping = _with_graph_blocks(work, mapping, "checkpoint")
    return predict(work, mapping, settings, batch, names), mapping


def _tree_blocks(module: nn.Module) -> dict[str, int]:
    """A guess at the blocks from the module tree alone: the children of the
    ``ModuleList`` / ``Sequential`` with the most children (at least two) that all run one
    forward (:func:`vitprof.recognize.graph.blocks.kind`), by module path, numbered in order;
    none where no container qualifies."""
    best: list[str] = []
    for path, container in module.named_modules():
        children = list(container.named_children()) if isinstance(container, LISTS) else []
        if len(children) > max(len(best), 1) and len({forward_kind(c) for _, c in children}) == 1:
            best = [f"{path}.{name}" if path else name for name, _ in children]
    return {path: index for index, path in enumerate(best)}


def _with_graph_blocks(work: Workload, mapping: ComponentMap, purpose: str) -> ComponentMap:
    """``mapping`` with, where no table named any blocks, those the graph recognizer finds
    (their module paths) in a forward of ``work`` on meta: the blocks the breakdown reports
    are the ones ``checkpoint`` runs under ``torch.utils.checkpoint`` and FSDP2 shards;
    ``purpose`` (``checkpoint``, ``shard under fsdp``) is named where the forward fails."""
    if mapping.blocks:
        return mapping
    try:
        run = count(work.module, work.inputs.example("meta"))
    except CountFailed as failed:
        raise UserError(f"{work.name}: a forward could not run on meta to find the blocks to "
                        f"{purpose}: {one_line(failed.error)}") from None
    found = breakdown(run, work.module, Recognizer.GRAPH, work.rules)
    return replace(mapping, blocks=dict(found.blocks))


def _with_fit(estimate: MemoryEstimate, largest: int, fit: int) -> MemoryEstimate:
    return replace(estimate, largest_batch=largest, fit_bytes=fit)


def fixed_bytes(estimate: MemoryEstimate) -> int:
    """What a step holds whatever its batch: parameters and buffers, gradients, optimizer
    state and (cuda) the cuBLAS workspace."""
    before = estimate.timeline[0].live if estimate.timeline else {}
    held = sum(before.get(kind, 0) for kind in ("parameters", "optimizer_state", "workspace"))
    return held + estimate.total.grads


def predict(work: Workload, mapping: ComponentMap, settings: StepSettings, batch: int,
            names: Mapping[str, str]) -> MemoryEstimate:
    """The estimate of one step of ``work`` at ``batch``."""
    step = run_step(work, mapping, settings, batch)
    found = breakdown(step.run, work.module, Recognizer.AUTO, work.rules)
    return _estimate(work, step, found, settings, batch, names)


def _estimate(work: Workload, step: Step, found: Found, settings: StepSettings, batch: int,
              names: Mapping[str, str]) -> MemoryEstimate:
    """The estimate of ``step``, a step of ``work`` at ``batch``, by its breakdown ``found``."""
    rounded = _rounding(settings.target)
    kinds = _kinds(step, found)
    events, peak = _events(step, found, kinds, rounded, _fixed(work.module, step, rounded,
                                                               settings))
    components, blocks = _tables(work.module, step, found, rounded, settings)
    at = events[peak]
    unused = step.attention.unused_warning()
    return MemoryEstimate(
        model=work.name, input=work.inputs.describe().replace(
            f"{work.inputs.batch}x", f"{batch}x", 1), batch_size=batch,
        settings={**names, "attention": step.attention.describe()},
        peak_bytes=at.total, peak_phase=at.phase, peak_index=at.index,
        peak_component=at.component, saved_bytes=sum(rounded(n) for n in step.saved.values()),
        by_component=components, by_block=blocks, timeline=events,
        warnings=(*found.warnings, *([unused] if unused else [])),
    )


def _rounding(target: str) -> Rounding:
    """Bytes as the target's allocator counts a request of ``n``."""
    if target == MemoryTarget.CUDA:
        return cuda_model.rounded
    return lambda n: n


def _record_index(found: Found, position: int) -> int:
    """The index in ``found.ops`` of the op record at ``position`` of the run (the last one
    past the end)."""
    last = len(found.ops) - 1
    return min(found.offset(position), last) if last >= 0 else 0


def _kinds(step: Step, found: Found) -> list[str]:
    """The kind of each allocation: gradients, optimizer_state (the optimizer step's
    temporaries), inputs, or the component of its op record."""
    def kind(i: int, allocation: Allocation) -> str:
        if i in step.gradients:
            return "gradients"
        if allocation.stage == "optimizer":
            return "optimizer_state"
        if i in step.inputs:
            return "inputs"
        return str(found.ops[_record_index(found, allocation.position)].component)

    return [kind(i, a) for i, a in enumerate(step.timeline.allocations)]


def _fixed(module: nn.Module, step: Step, rounded: Rounding, settings: StepSettings
           ) -> dict[str, int]:
    """What is alive before the step's first op: parameters and buffers, optimizer state,
    workspace (cuda); inputs and gradients start at 0 (they are logged)."""
    tensors = [*module.parameters(), *module.buffers()]
    state = [t for ts in step.state.values() for t in ts if _on_target(t, settings.target)]
    live = dict.fromkeys(FIXED, 0)
    live["parameters"] = sum(rounded(_nbytes(t)) for t in tensors)
    live["optimizer_state"] = sum(rounded(_nbytes(t)) for t in state)
    live["workspace"] = (cuda_model.workspace_bytes(settings.train)
                         if settings.target == MemoryTarget.CUDA else 0)
    return live


def _on_target(tensor: torch.Tensor, target: str) -> bool:
    """Whether ``tensor`` is in the target's memory: a fake one is; a real CPU one (the
    optimizer's ``step`` counts) is on the CPU target only (CUDA keeps them on the host)."""
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(tensor, FakeTensor) or target == MemoryTarget.CPU


def _nbytes(tensor: torch.Tensor) -> int:
    return tensor.untyped_storage().nbytes()


def _events(step: Step, found: Found, kinds: list[str], rounded: Rounding,
            fixed: dict[str, int]) -> tuple[list[MemoryEvent], int]:
    """The timeline's events (one per op) and the index of the one at the peak: the op
    after whose allocations the total alive was largest."""
    live: dict[str, int] = defaultdict(int, fixed)
    for name in COMPONENTS:
        live[str(name)] += 0
    events: list[MemoryEvent] = []
    best, peak = -1, 0
    pending_peak = False
    for entry, kind, change in step.timeline.replay(lambda i, a: kinds[i], rounded):
        if not isinstance(entry, Moment):
            live[kind] += change
            if change > 0 and sum(live.values()) > best:
                best, pending_peak = sum(live.values()), True
            continue
        record = found.ops[_record_index(found, entry.position)] if found.ops else None
        phase = entry.stage if entry.stage == "optimizer" or record is None \
            else str(record.phase)
        component = "optimizer_state" if entry.stage == "optimizer" or record is None \
            else str(record.component)
        events.append(MemoryEvent(len(events), entry.op, phase, dict(live),
                                  component=component))
        if pending_peak:
            peak, pending_peak = len(events) - 1, False
    return events, peak


def _tables(module: nn.Module, step: Step, found: Found, rounded: Rounding,
            settings: StepSettings
            ) -> tuple[dict[str, ComponentMemory], dict[int, ComponentMemory]]:
    """Per component and per block: parameters, gradients, optimizer state (by the
    parameter records of the breakdown, a fused projection's share by its elements), and the
    saved activations (by the op record that made them)."""
    sizes = {name: (p.numel(), _nbytes(p)) for name, p in module.named_parameters()}
    state = {name: sum(rounded(_nbytes(t)) for t in ts if _on_target(t, settings.target))
             for name, ts in step.state.items()}
    by_component = {str(c): ComponentMemory() for c in COMPONENTS}
    by_block: dict[int, ComponentMemory] = {}
    for record in found.params:
        numel, nbytes = sizes[record.name]
        nbytes, trainable = rounded(nbytes), record.name in step.trained
        share = ComponentMemory(
            nbytes * record.numel // numel, nbytes * record.numel // numel if trainable else 0,
            state.get(record.name, 0) * record.numel // numel, 0)
        _add(by_component, by_block, str(record.component), record.block, share)
    for i, nbytes in step.saved.items():
        op = found.ops[_record_index(found, step.timeline.allocations[i].position)]
        _add(by_component, by_block, str(op.component), op.block,
             ComponentMemory(activations=rounded(nbytes)))
    return by_component, dict(sorted(by_block.items()))


def _add(by_component: dict[str, ComponentMemory], by_block: dict[int, ComponentMemory],
         component: str, block: int | None, share: ComponentMemory) -> None:
    by_component[component] = by_component[component] + share
    if block is not None:
        by_block[block] = by_block.get(block, ComponentMemory()) + share
