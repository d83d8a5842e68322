"""The data-parallel strategies as torch's own code applies them, on a fake world.

* ``ddp``: ``DistributedDataParallel`` with its defaults (25 MiB buckets,
  ``gradient_as_bucket_view=False``: each bucket a flat buffer beside the gradients), its
  all-reduce hook :func:`~vitprof.measure.distributed.fake_world.allreduce_in_place`. One
  departure: DDP rebuilds its buckets once, at the second forward, in the order the first
  backward made the gradients, and that rebuild reads the bucket indices from a real tensor,
  which a fake run cannot give; the buckets keep the order they were built in (the parameters
  reversed, the first of 1 MiB, then 25 MiB each), the same bytes in total
  (:class:`_BucketsAsBuilt`).
* ``zero1``: the same DDP, the optimizer ``ZeroRedundancyOptimizer`` over the parameters
  (rank 0 keeps the state of its share; after its step it broadcasts the parameters it owns).
* ``zero2`` / ``fsdp``: FSDP2 ``fully_shard`` on every transformer block (the breakdown's
  blocks) and then on the root, ``reshard_after_forward`` False (ZeRO-2-like: a block's
  gathered parameters stay until its backward) or True (ZeRO-3-like: freed after its forward,
  gathered again in the backward); FSDP2's defaults otherwise (the next block's all-gather
  prefetched, parameters and gradients in the parameters' dtype).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn
from torch.distributed.device_mesh import DeviceMesh

from vitprof.core.vocab import Strategy
from vitprof.measure.distributed.fake_world import allreduce_in_place
from vitprof.measure.memory.step import optimizer_recipe

FSDP_STRATEGIES = (Strategy.ZERO2, Strategy.FSDP)
DDP_STRATEGIES = (Strategy.DDP, Strategy.ZERO1)


@dataclass
class Wrapped:
    """The model as the strategy runs it, its optimizer, and the tensors each rank keeps
    between steps: its ``parameters`` (for FSDP2 the local shards) and the optimizer's
    ``state`` of the parameters it steps."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    local_optimizer: torch.optim.Optimizer

    def parameters(self) -> list[torch.Tensor]:
        """The tensors of this rank's parameters (a DTensor's local shard)."""
        return [_local(p) for p in self.model.parameters()]

    def gradients(self) -> list[torch.Tensor]:
        """The tensors of this rank's gradients now (a DTensor's local shard)."""
        return [_local(p.grad) for p in self.model.parameters() if p.grad is not None]

    def state(self, keep: Callable[[str], bool]) -> list[torch.Tensor]:
        """This rank's optimizer state tensors whose key passes ``keep``."""
        return [_local(value) for state in self.local_optimizer.state.values()
                for key, value in state.items()
                if isinstance(value, torch.Tensor) and keep(key)]


def _local(tensor: torch.Tensor) -> torch.Tensor:
    return getattr(tensor, "_local_tensor", tensor)


def wrap(strategy: str, model: nn.Module, blocks: Sequence[nn.Module], mesh: DeviceMesh,
         optimizer: str, target: str, bucket_hook: Callable[[torch.Tensor], None]) -> Wrapped:
    """``model`` (fake parameters) under ``strategy`` with ``optimizer`` (see the module);
    ``bucket_hook`` sees each DDP bucket as it is all-reduced."""
    kind, keywords = optimizer_recipe(optimizer, target)
    if strategy in FSDP_STRATEGIES:
        from torch.distributed.fsdp import fully_shard

        reshard = strategy == Strategy.FSDP
        for block in blocks:
            fully_shard(block, mesh=mesh, reshard_after_forward=reshard)
        fully_shard(model, mesh=mesh, reshard_after_forward=reshard)
        opt = kind(model.parameters(), **keywords)
        return Wrapped(model, opt, opt)
    from torch.nn.parallel import DistributedDataParallel

    ddp = DistributedDataParallel(model, init_sync=False)
    ddp.reducer = _BucketsAsBuilt(ddp.reducer)  # type: ignore[assignment]

    def hook(state, bucket):  # DDP refuses annotations it cannot compare (strings)
        bucket_hook(bucket.buffer())
        return allreduce_in_place(state, bucket)

    ddp.register_comm_hook(None, hook)
    if strategy == Strategy.ZERO1:
        from torch.distributed.optim import ZeroRedundancyOptimizer

        zero = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=kind, **keywords)
        return Wrapped(ddp, zero, zero.optim)
    opt = kind(ddp.parameters(), **keywords)
    return Wrapped(ddp, opt, opt)


class _BucketsAsBuilt:
    """DDP's reducer, whose one-time rebuild of the buckets is skipped (see the module)."""

    def __init__(self, reducer: object) -> None:
        self._reducer = reducer

    def _rebuild_buckets(self) -> bool:
        return False

    def __getattr__(self, name: str) -> object:
        return getattr(self._reducer, name)
