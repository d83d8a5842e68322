"""``vitprof.memory(..., strategy=, world_size=)``: one rank's memory in a data-parallel step.

Conventions (bytes, per rank; the rank that holds the most where ranks differ: under ZeRO-1
the one ZeroRedundancyOptimizer gives the largest share to step, else rank 0):

* The step and what runs it: :mod:`~vitprof.measure.distributed.rank_step` (torch's own DDP,
  ZeroRedundancyOptimizer and FSDP2 code on fake tensors in a fake process group,
  :mod:`~vitprof.measure.distributed.fake_world`); the strategies:
  :mod:`~vitprof.measure.distributed.strategies`; ``batch_size`` is each rank's.
* **Alive at a moment**: every storage the rank holds, from the op that allocates it (or the
  start of the step, for what exists before it) until its last tensor goes, by kind
  (:mod:`~vitprof.measure.distributed.kinds`). The **peak** is the largest total after any op;
  its phase is ``forward``, ``backward`` or ``optimizer``, or ``collective`` where the op at
  the peak is a collective or FSDP2's copy into or out of one.
* ``target="cuda"``: each allocation rounded up to 512 bytes and the cuBLAS workspaces alive
  throughout, as in a single-process step (:mod:`vitprof.measure.memory.cuda_model`); the
  optimizers' multi-tensor form; the ``step`` counts on the host. ``target="cpu"``: sizes as asked.
* Not modelled: tensor and pipeline parallelism; the communication library's own buffers
  (NCCL's, gloo's), outside torch's allocator.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from vitprof.core.errors import UserError
from vitprof.core.validate import check_int, check_word
from vitprof.core.vocab import MemoryTarget, Strategy
from vitprof.count.timeline import LiveEvent
from vitprof.measure.distributed.kinds import KINDS, is_collective, kind_of_phase
from vitprof.measure.distributed.rank_log import Op
from vitprof.measure.distributed.rank_step import RankStep, largest_share_rank, run_rank_step
from vitprof.measure.distributed.strategies import FSDP_STRATEGIES
from vitprof.measure.memory import cuda_model
from vitprof.measure.memory.fit import largest_batch
from vitprof.measure.memory.loop import Loop, trainable
from vitprof.measure.memory.spelling import SettingError
from vitprof.measure.memory.step import StepSettings
from vitprof.recognize.tables import ComponentMap
from vitprof.workload import Workload

DISTRIBUTED_CONVENTION = (
    "bytes one rank holds during its second training step ({step}{details}) under "
    "{strategy} at world size {world}, run by torch's own distributed code on fake tensors in a "
    "fake process group: each storage from the op that allocates it until its last tensor goes, "
    "by kind"
)
DEFAULT_STEP = ("gradients set to None, forward of its batch, ones-gradient backward, optimizer "
                "step")


@dataclass(frozen=True)
class RankMemory:
    """The predicted memory of one rank's step (see the module for the conventions):
    ``peak_bytes``, its ``peak_phase`` and op, the bytes by kind at the peak (``peak_live``),
    each kind's largest over the step (``most``) and the ``timeline``, one event per op with
    the bytes alive after it by kind; ``sharded_blocks``: the module paths FSDP2 shards one
    by one before the root (zero2 and fsdp; none under ddp and zero1); ``rank``: the rank
    predicted, the one that holds the most (see the module)."""

    model: str
    input: str
    batch_size: int
    strategy: str
    world_size: int
    settings: Mapping[str, str]
    peak_bytes: int
    peak_phase: str
    peak_op: str
    peak_index: int
    peak_live: Mapping[str, int]
    most: Mapping[str, int]
    timeline: Sequence[LiveEvent]
    convention: str
    largest_batch: int | None = None
    fit_bytes: int | None = None
    warnings: tuple[str, ...] = field(default=())
    sharded_blocks: tuple[str, ...] = field(default=())
    rank: int = 0


def check_world_size(world_size: object) -> int:
    """``world_size`` if it is a positive int; else a UserError."""
    return check_int("world size", world_size, 1)


def check_rank_settings(strategy: object, world_size: object) -> tuple[Strategy, int]:
    """``strategy`` (a word of :class:`Strategy`) and ``world_size`` (a positive int) if they
    go together: a world size other than 1 needs a strategy. Else a UserError (a
    :class:`SettingError` for the last, in the words of whoever set them)."""
    strategy = check_word("strategy", strategy, Strategy)
    size = check_world_size(world_size)
    if strategy == Strategy.NONE and size != 1:
        raise SettingError(lambda s: f"{s.setting('world_size', size)} needs a "
                           f"{s.name('strategy')} (ddp, zero1, zero2, fsdp): "
                           f"{s.setting('strategy', 'none')} is one process")
    return strategy, size


def check_strategy(strategy: str, world_size: int, blocks: Sequence[str], model: str) -> None:
    """A UserError where ``model`` cannot take ``strategy``: FSDP2 shards the transformer
    blocks, and the breakdown found none."""
    if strategy in FSDP_STRATEGIES and not blocks:
        raise SettingError(lambda s: f"{model}: {s.setting('strategy', strategy)} shards each "
                           "transformer block with FSDP2's fully_shard, and the breakdown "
                           "found no block in this model")


def rank_memory(work: Workload, mapping: ComponentMap, settings: StepSettings, strategy: str,
                world_size: int, batch: int, names: Mapping[str, str],
                fit: int | None = None) -> RankMemory:
    """The estimate of one rank's step of ``work`` at ``batch`` (and, with ``fit`` bytes, the
    largest per-rank batch whose peak fits it: :func:`vitprof.measure.memory.fit.largest_batch`)."""
    blocks = sorted(mapping.blocks, key=mapping.blocks.__getitem__)
    check_strategy(strategy, world_size, blocks, work.name)
    trained = trainable(work.module, mapping, settings.loop)
    rank = largest_share_rank(work, blocks, settings, strategy, world_size, trained)
    sharded = tuple(blocks) if strategy in FSDP_STRATEGIES else ()

    def at(b: int) -> RankMemory:
        step = run_rank_step(work, blocks, settings, strategy, world_size, b, trained, rank)
        found = _estimate(work, step, settings, strategy, world_size, b, names)
        return replace(found, sharded_blocks=sharded)

    estimate = at(batch)
    if fit is None:
        return estimate
    found = largest_batch(lambda b: at(b).peak_bytes, fit, estimate, _fixed(estimate))
    return replace(estimate, largest_batch=found, fit_bytes=fit)


def _fixed(estimate: RankMemory) -> int:
    """What the rank holds whatever its batch: parameters, optimizer state, workspace, and
    the gradients at their largest."""
    start = estimate.timeline[0].live if estimate.timeline else {}
    return sum(start.get(kind, 0) for kind in ("parameters", "optimizer_state", "workspace")) \
        + estimate.most["gradients"]


def _estimate(work: Workload, step: RankStep, settings: StepSettings, strategy: str,
              world_size: int, batch: int, names: Mapping[str, str]) -> RankMemory:
    workspace = cuda_model.workspace_bytes(True) if settings.target == MemoryTarget.CUDA else 0
    events = _events(step, workspace)
    if not events:
        raise UserError(f"{work.name}: the {strategy} step ran no op")
    at = max(events, key=lambda e: e.total)
    most = {kind: max(e.live[kind] for e in events) for kind in KINDS}
    unused = step.attention.unused_warning()
    warnings: tuple[str, ...] = (unused,) if unused else ()
    return RankMemory(
        model=work.name,
        input=work.inputs.describe().replace(f"{work.inputs.batch}x", f"{batch}x", 1),
        batch_size=batch, strategy=strategy, world_size=world_size,
        settings={**names, "attention": step.attention.describe()},
        peak_bytes=at.total, peak_phase=_phase(at), peak_op=at.op, peak_index=at.index,
        peak_live=dict(at.live), most=most, timeline=events,
        convention=convention(settings, strategy, world_size),
        warnings=warnings, rank=step.rank,
    )


def convention(settings: StepSettings, strategy: str, world_size: int) -> str:
    """:data:`DISTRIBUTED_CONVENTION` of a step run with ``settings``: its loop, which
    blocks are checkpointed, and the forward's autocast."""
    every = settings.every
    details = "" if every is None else \
        "; every transformer block under torch.utils.checkpoint" if every == 1 else \
        f"; one transformer block in {every} under torch.utils.checkpoint"
    if settings.amp is not None:
        details += f"; the forward under autocast to {str(settings.amp).removeprefix('torch.')}"
    step = DEFAULT_STEP if settings.loop == Loop() else f"the loop `{settings.loop.code()}`"
    return DISTRIBUTED_CONVENTION.format(step=step, details=details,
                                         strategy=strategy, world=world_size)


def _phase(event: LiveEvent) -> str:
    return "collective" if is_collective(event.op) else event.phase


def _events(step: RankStep, workspace: int) -> list[LiveEvent]:
    """One event per op of the logged step, with the bytes alive after it by kind."""
    log = step.log

    def kinds(i: int) -> str:
        made = log.allocations[i]
        return made.kind or kind_of_phase(made.phase)

    live = dict.fromkeys(KINDS, 0)
    live["workspace"] = workspace
    events: list[LiveEvent] = []
    for entry, kind, change in log.replay(kinds):
        if isinstance(entry, Op):
            if entry.phase != "registered":
                events.append(LiveEvent(len(events), entry.name, entry.phase, dict(live)))
        else:
            live[kind] += change
    return events
