"""A process group of ``world_size`` ranks in which this process is one rank (0 unless asked)
and no other rank exists: torch's fake backend (``torch.testing._internal.distributed.fake_pg``).

Every collective returns at once and moves no data, so the real DDP, ZeroRedundancyOptimizer
and FSDP2 code runs in one process on fake tensors and allocates each buffer it allocates on a
real rank; a world of 1,024 costs what a world of 2 does. Two pieces of DDP read what a fake
world cannot give, and are replaced while the world is up (:func:`fake_world`):

* ``_verify_param_shape_across_processes`` reads the parameters' sizes into a real tensor and
  all-gathers it: a check that every rank holds the same model, which rank 0 alone passes.
* DDP's built-in all-reduce hook takes the value of the collective's future, which the fake
  backend leaves empty: :func:`allreduce_in_place` is the same hook (divide the bucket by the
  world size in place, all-reduce it in place) returning the bucket itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.distributed as dist
import torch.nn.parallel.distributed as ddp_module
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

from vitprof.core.errors import UserError


@contextmanager
def fake_world(world_size: int, rank: int = 0) -> Iterator[DeviceMesh]:
    """The fake process group of ``world_size`` ranks (this process ``rank``) and its 1-D CPU
    device mesh; torch's default group is restored on exit. A default group already up (a
    real distributed run) is refused: the prediction would replace it."""
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if dist.is_initialized():
        raise UserError("a torch.distributed process group is already initialized in this "
                        "process: predict per-rank memory outside a distributed run")
    verify = ddp_module._verify_param_shape_across_processes
    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world_size)
    ddp_module._verify_param_shape_across_processes = _same_model_on_every_rank
    try:
        yield init_device_mesh("cpu", (world_size,))
    finally:
        ddp_module._verify_param_shape_across_processes = verify
        dist.destroy_process_group()


def _same_model_on_every_rank(*_: object, **__: object) -> None:
    """Every rank of a fake world holds this process's model: the same (see the module)."""


def allreduce_in_place(_state: object, bucket: dist.GradBucket) -> torch.futures.Future:
    """DDP's all-reduce hook on a fake world: the bucket divided by the world size and
    all-reduced in place, as DDP's built-in hook does; the future holds the bucket."""
    buffer = bucket.buffer()
    buffer.div_(dist.get_world_size())
    dist.all_reduce(buffer)
    done: torch.futures.Future = torch.futures.Future()
    done.set_result(buffer)
    return done
