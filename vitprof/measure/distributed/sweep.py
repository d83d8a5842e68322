"""The per-rank peak against world size: one prediction per world size."""

from __future__ import annotations

from collections.abc import Sequence

from torch import nn

from vitprof.measure.distributed.estimate import RankMemory
from vitprof.measure.memory.settings import MemorySettings
from vitprof.workload import InputRequest


def peak_by_world_size(model: nn.Module | str, request: InputRequest, strategy: str,
                       world_sizes: Sequence[int], settings: MemorySettings | None = None,
                       fit: int | None = None) -> list[RankMemory]:
    """The estimate of one rank's step at each of ``world_sizes`` (in the order given) under
    ``strategy``, with :func:`vitprof.memory`'s ``settings`` (refused as it refuses them for
    one world size) and ``fit`` (the largest per-rank batch at each world size)."""
    from vitprof.measure.memory.estimate import memory

    found = []
    for size in world_sizes:
        estimate = memory(model, request=request, settings=settings, fit=fit,
                          strategy=strategy, world_size=size)
        assert isinstance(estimate, RankMemory)  # a strategy's estimate
        found.append(estimate)
    return found
