"""A tracker in a data-parallel training loop: each rank's own step, and the world's.

**The rank's own step.** Under DistributedDataParallel and FSDP2 (``fully_shard``) each rank runs
the whole model on its own batch; what the wrappers add (all-reduce, all-gather,
reduce-scatter, buffer broadcast) moves data and computes no MACs. A step is counted as the
rank's local computation, with no collective (a count is one rank's: the others are not counting
then), by :func:`local_computation`:

- **DDP**: its forward calls the module it wraps, so the count is of ``ddp.module`` on the rank's
  batch;
- **FSDP2**: before each block's forward the rank all-gathers its parameters and runs the
  unsharded matmuls. The count runs the model with ``fully_shard``'s forward hooks off (no
  all-gather, no reshard: they are put back after) and each DTensor parameter standing in as a
  plain meta tensor of its whole shape (:func:`vitprof.count.session.stand_ins`): the unsharded
  matmuls the rank runs, on its batch. HSDP (a replicate and a shard mesh dimension) is the same.
- **Out of scope**, refused (the tracker's one warning, no FLOPs for the step): tensor
  parallelism (a DTensor parameter that ``fully_shard`` does not manage, or one sharded on more
  than one mesh dimension: the rank computes with a slice, which this count does not model),
  pipeline stages, and FSDP1 (``FullyShardedDataParallel``: its flat parameters).

**The world's step.** Where a default process group is initialised when the tracking starts,
each entry also holds the world's figures, gathered from every rank of that group with one
``all_gather_object`` a step (:func:`world_figures`; on NCCL it needs ``torch.cuda.set_device``
called, as DDP does):

- ``world_flops = sum over ranks of flops`` (None where a rank has none);
- ``world_seconds = max over ranks of seconds``: the slowest rank's step, which the others wait
  for at the next collective;
- ``world_tflops = world_flops / world_seconds / 1e12``;
- ``world_mfu = world_flops / world_seconds / (sum over ranks of peak_tflops x 1e12)``, so with
  one peak on every rank ``sum(flops) / max(seconds) / (world_size x peak x 1e12)``; never above 1
  (each rank's rate is at most its peak). None where a rank's step has no MFU (no count, counted
  as it ran, above a peak given).

Without a process group (one process, or ``init_process_group`` called after the tracking
started) the entries' ``rank``, ``world_size`` and ``world_*`` are None. With one, every rank of
the default group must track the same steps: the gather is a collective, and a rank that skips
a step makes the others wait. So that a rank that never tracks (a loop tracked on rank 0 alone)
is not paired with another collective (it timed out in DDP's, or the gather did), the ranks
agree when the tracking starts, through the default group's store and no collective, whether
every rank tracks (:func:`every_rank_joins`); where one does not start within
:data:`JOIN_SECONDS`, the entries have no world figures (one warning).
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, NamedTuple

import torch
from torch import nn

from vitprof.core.errors import UserError
from vitprof.count.session import is_dtensor

WORLD_KEYS = ("rank", "world_size", "world_flops", "world_seconds", "world_tflops", "world_mfu")


class RankStep(NamedTuple):
    """What one rank says of a step: its FLOPs, seconds, and the peak its MFU is against (None
    where the step has no MFU); ``rated``: the step has a TFLOP/s."""

    flops: int | None
    seconds: float
    peak_tflops: float | None
    rated: bool


Gather = Callable[[RankStep], list[RankStep]]


def gather_over_default_group(mine: RankStep) -> list[RankStep]:
    """Every rank's :class:`RankStep`, in rank order, from the default process group."""
    every: list[Any] = [None] * torch.distributed.get_world_size()
    torch.distributed.all_gather_object(every, mine)
    return every


@dataclass(frozen=True)
class World:
    """This rank and the size of the world it trains in; ``gather`` collects every rank's step
    (over the default process group unless a test fakes it)."""

    rank: int
    size: int
    gather: Gather = gather_over_default_group


JOIN_SECONDS = 60.0  # how long a rank that starts tracking waits for every rank to start
FULL, CLOSED = "full", "closed"  # a tracking session's outcome in the store
_sessions = itertools.count()  # this process's tracking sessions, numbered as on every rank


def default_world() -> World | None:
    """The default process group's world; None where none is initialised, or where not every
    rank of it starts this tracking session (one warning; see the module docstring)."""
    if not torch.distributed.is_available() or not torch.distributed.is_initialized():
        return None
    from torch.distributed.distributed_c10d import _get_default_store

    world = World(torch.distributed.get_rank(), torch.distributed.get_world_size())
    if every_rank_joins(_get_default_store(), world.size, next(_sessions), JOIN_SECONDS):
        return world
    warnings.warn(f"vitprof: not every rank of the {world.size} in the default process group "
                  f"started tracking within {JOIN_SECONDS:g} s of the first (the world's "
                  f"figures gather from every rank: call vitprof.track on each); rank "
                  f"{world.rank}'s entries have no world figures", stacklevel=3)
    return None


def every_rank_joins(store: torch.distributed.Store, size: int, session: int,
                     timeout: float) -> bool:
    """Whether all ``size`` ranks start tracking session ``session``, agreed through ``store``
    with no collective: each rank counts itself in; the last one sets the session's outcome to
    full, and a rank that has waited ``timeout`` seconds for it sets it to closed, whichever
    comes first (one atomic compare-and-set), so every rank, a late one too, reads the same."""
    count, outcome = f"vitprof/track/{session}/ranks", f"vitprof/track/{session}/outcome"
    if store.add(count, 1) == size:
        return bytes(store.compare_set(outcome, "", FULL)) == FULL.encode()
    with suppress(RuntimeError):  # DistStoreError, timed out: whichever outcome is set first
        store.wait([outcome], timedelta(seconds=timeout))
    return bytes(store.compare_set(outcome, "", CLOSED)) == FULL.encode()


def no_world() -> dict[str, Any]:
    """An entry's world keys where there is no process group."""
    return dict.fromkeys(WORLD_KEYS)


def world_figures(entry: dict[str, Any], world: World) -> dict[str, Any]:
    """The world keys of ``entry`` (a tracker's step): gathered from every rank, then
    :func:`aggregate` (the module docstring gives the definitions)."""
    mine = RankStep(entry["flops"], entry["seconds"],
                    entry["peak_tflops"] if entry["mfu"] is not None else None,
                    entry["tflops"] is not None)
    return {"rank": world.rank, "world_size": world.size, **aggregate(world.gather(mine))}


def aggregate(ranks: list[RankStep]) -> dict[str, Any]:
    """``world_flops``, ``world_seconds``, ``world_tflops`` and ``world_mfu`` of the ranks'
    steps (the module docstring)."""
    seconds = max(r.seconds for r in ranks)
    figures: dict[str, Any] = {"world_flops": None, "world_seconds": seconds,
                               "world_tflops": None, "world_mfu": None}
    if any(r.flops is None for r in ranks):
        return figures
    flops = sum(r.flops for r in ranks if r.flops is not None)
    figures["world_flops"] = flops
    if seconds > 0 and all(r.rated for r in ranks):
        figures["world_tflops"] = flops / seconds / 1e12
        peaks = [r.peak_tflops for r in ranks if r.peak_tflops is not None]
        if len(peaks) == len(ranks):
            figures["world_mfu"] = flops / seconds / (sum(peaks) * 1e12)
    return figures


@contextmanager
def local_computation(model: nn.Module) -> Iterator[nn.Module]:
    """The module whose count is the rank's own step of ``model`` (the module docstring): DDP's
    wrapped module; an FSDP2 model with its forward hooks off while the count runs; any other
    model as it is. A parallelism the count does not model is a UserError."""
    if not torch.distributed.is_available():
        yield model
        return
    from torch.nn.parallel import DistributedDataParallel

    while isinstance(model, DistributedDataParallel):
        model = model.module
    _refuse_unmodelled(model)
    with _without_fsdp_forward_hooks(model):
        yield model


def _refuse_unmodelled(model: nn.Module) -> None:
    from torch.distributed.fsdp import FSDPModule, FullyShardedDataParallel
    from torch.distributed.tensor import Shard

    if any(isinstance(m, FullyShardedDataParallel) for m in model.modules()):
        raise UserError("FSDP1 (FullyShardedDataParallel) flattens the parameters, which vitprof "
                        "does not count per rank; wrap with fully_shard (FSDP2) instead")
    sharded = any(isinstance(m, FSDPModule) for m in model.modules())
    for name, parameter in model.named_parameters():
        if not is_dtensor(parameter):
            continue
        placements = parameter.placements  # type: ignore[attr-defined]
        if not sharded or sum(isinstance(p, Shard) for p in placements) > 1:
            raise UserError(f"parameter {name} is a DTensor that fully_shard does not shard "
                            f"alone ({placements}): tensor parallelism is out of vitprof's "
                            f"per-rank count")


HOOK_DICTS = ("_forward_pre_hooks", "_forward_pre_hooks_with_kwargs", "_forward_hooks",
              "_forward_hooks_with_kwargs", "_forward_hooks_always_called")


@contextmanager
def _without_fsdp_forward_hooks(model: nn.Module) -> Iterator[None]:
    """``model`` with the forward hooks ``fully_shard`` registered removed, every module's hooks
    put back as they were (same order, same handles) afterwards."""
    from torch.distributed.fsdp import FSDPModule

    sharded = [m for m in model.modules() if isinstance(m, FSDPModule)]
    saved = [(m, {d: dict(getattr(m, d)) for d in HOOK_DICTS}) for m in sharded]  # all first:
    for module in sharded:  # a group's handles (fully_shard([a, b])) span its modules
        state = module._get_fsdp_state()
        for handle in (state._pre_forward_hook_handle, state._post_forward_hook_handle):
            for one in getattr(handle, "handles", (handle,)):  # a group's _MultiHandle
                one.remove()
    try:
        yield
    finally:
        for module, hooks in saved:
            for name, content in hooks.items():
                getattr(module, name).clear()
                getattr(module, name).update(content)
