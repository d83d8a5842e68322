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
  blocks; a block that is a ``ModuleList`` / ``ModuleDict`` running no forward of its own, as
  an ``[attention, feed-forward]`` pair, is sharded as the list of its children, one group:
  FSDP2 refuses such a container itself) and then on the root, ``reshard_after_forward``
  False (ZeRO-2-like: a block's gathered parameters stay until its backward) or True
  (ZeRO-3-like: freed after its forward, gathered again in the backward); FSDP2's defaults
  otherwise (the next block's all-gather prefetched, parameters and gradients in the
  parameters' dtype).

Two shortcuts keep a world of 1,024 ranks, and a model of a thousand parameters, in seconds;
neither changes a byte the rank allocates:

* FSDP2 cuts each parameter into ``world_size`` chunks at ``fully_shard`` and keeps two: its
  rank's and the first (the padded size). :class:`RankChunks` makes those two (the same
  views ``torch.chunk`` makes) and no other, where ``torch.chunk`` makes all of them, a fake
  tensor each.
* The optimizer steps the local shards (:class:`_ShardStep`), the optimizer of torch's class
  and keywords over each DTensor's local tensor, each gradient's local tensor its gradient for
  the step. AdamW's, Adam's and SGD's ops are pointwise on tensors of one placement (a
  parameter, its gradient and its state all ``Shard(0)`` on the same mesh), so DTensor runs
  each on the local shards as it is, redistributing nothing: the same ops, allocating the
  same; what is left out is DTensor's sharding propagation, host work only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, overload

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
    optimizer: torch.optim.Optimizer | _ShardStep
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
        with _rank_chunks():
            for block in blocks:
                fully_shard(shard_group(block), mesh=mesh, reshard_after_forward=reshard)
            fully_shard(model, mesh=mesh, reshard_after_forward=reshard)
        step = _ShardStep(list(model.parameters()), kind, keywords)
        return Wrapped(model, step, step.local)
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


def shard_group(block: nn.Module) -> nn.Module | list[nn.Module]:
    """What ``fully_shard`` takes for ``block``: the block, or for a container that runs no
    forward of its own (a ``ModuleList`` or ``ModuleDict`` whose forward is ``nn.Module``'s),
    the modules under it that run one, one group (a container inside such a list gives its
    own, and so on down): their hooks gather the group's parameters before the first of them
    runs, as the container's would."""
    if not _runs_no_forward(block):
        return block
    found: list[nn.Module] = []
    for child in block.children():
        inner = shard_group(child)
        found += inner if isinstance(inner, list) else [inner]
    return found


def _runs_no_forward(module: nn.Module) -> bool:
    container = isinstance(module, (nn.ModuleList, nn.ModuleDict))
    return container and type(module).forward is nn.Module.forward


def largest_share(wrapped: Wrapped) -> int:
    """The rank that holds the most: under ZeRO-1 the first of those whose share of the
    parameters to step (those requiring a gradient), by ZeroRedundancyOptimizer's own
    partition, has the most bytes, so the most optimizer state; 0 under DDP (every rank the
    same) and FSDP2 (every rank's shards padded to the first's size)."""
    from torch.distributed.optim import ZeroRedundancyOptimizer

    if not isinstance(wrapped.optimizer, ZeroRedundancyOptimizer):
        return 0
    shares = [sum(p.numel() * p.element_size() for group in groups for p in group["params"]
                  if p.requires_grad)
              for groups in wrapped.optimizer._partition_parameters()]  # type: ignore[attr-defined]
    return shares.index(max(shares))


class _BucketsAsBuilt:
    """DDP's reducer, whose one-time rebuild of the buckets is skipped (see the module)."""

    def __init__(self, reducer: object) -> None:
        self._reducer = reducer

    def _rebuild_buckets(self) -> bool:
        return False

    def __getattr__(self, name: str) -> object:
        return getattr(self._reducer, name)


class _ShardStep:
    """The optimizer ``kind(**keywords)`` of FSDP2's sharded parameters, stepping their local
    shards (see the module): ``local`` holds the state; ``step`` gives each shard its
    DTensor gradient's local tensor for the step, and takes it back after."""

    def __init__(self, params: list[nn.Parameter], kind: type[torch.optim.Optimizer],
                 keywords: dict[str, Any]) -> None:
        self.params = params
        self.shards = [_local(p) for p in params]
        self.local = kind(self.shards, **keywords)

    def zero_grad(self, set_to_none: bool = True) -> None:
        for param in self.params:
            if set_to_none:
                param.grad = None
            elif param.grad is not None:
                param.grad.zero_()

    def step(self) -> None:
        for param, shard in zip(self.params, self.shards, strict=True):
            shard.grad = None if param.grad is None else _local(param.grad)
        try:
            self.local.step()
        finally:
            for shard in self.shards:
                shard.grad = None


class RankChunks(Sequence[torch.Tensor]):
    """``_chunk_with_empty(tensor, count, dim)`` of FSDP2 (``torch.chunk``, then empty tensors
    up to ``count``), each chunk made when it is read: ``torch.chunk``'s view, or an empty
    tensor past the last."""

    def __init__(self, tensor: torch.Tensor, count: int, dim: int) -> None:
        self.tensor, self.length, self.dim = tensor, count, dim
        rows = tensor.size(dim)
        self.size = -(-rows // count)  # torch.chunk's: ceil(rows / count)
        self.made = -(-rows // self.size) if rows else count  # torch.chunk's chunks

    def __len__(self) -> int:
        return self.length

    @overload
    def __getitem__(self, index: int) -> torch.Tensor: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[torch.Tensor]: ...

    def __getitem__(self, index: int | slice) -> torch.Tensor | Sequence[torch.Tensor]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self.length))]
        if not -self.length <= index < self.length:
            raise IndexError(index)
        index %= self.length
        if index >= self.made:
            return self[0].new_empty(0)
        start = index * self.size
        return self.tensor.narrow(self.dim, start,
                                  min(self.size, self.tensor.size(self.dim) - start))


@contextmanager
def _rank_chunks() -> Iterator[None]:
    """FSDP2's ``_chunk_with_empty`` as :class:`RankChunks`, while inside."""
    from torch.distributed.fsdp._fully_shard import _fsdp_param

    chunk = _fsdp_param._chunk_with_empty
    _fsdp_param._chunk_with_empty = RankChunks  # type: ignore[assignment]
    try:
        yield
    finally:
        _fsdp_param._chunk_with_empty = chunk
