"""What each storage a rank holds is, by who made it.

* ``parameters``: the rank's parameters and buffers held between steps (under FSDP2 its shards);
* ``gathered_parameters``: FSDP2's unsharded parameters, all-gathered for the blocks in flight
  (the one running and the one prefetched; under ``zero2`` every block's from its forward to
  its backward), made by resizing their storages;
* ``gradients``: the gradients (under FSDP2 the unsharded ones a block's backward makes, then
  the sharded ones the reduce-scatter returns) and DDP's buckets, the flat buffers it
  all-reduces;
* ``optimizer_state``: the optimizer's state of the parameters it steps, and its step's
  temporaries;
* ``activations``: what the forward and the backward allocate and no other kind claims, what
  autograd saves and the backward's temporaries;
* ``communication``: the buffers the collectives read and write: FSDP2's all-gather input and
  output, its reduce-scatter input; ZeroRedundancyOptimizer's broadcasts are in place;
* ``inputs``: the batch;
* ``workspace``: ``target="cuda"``: the cuBLAS workspaces
  (:mod:`vitprof.measure.memory.cuda_model`).

A DDP bucket's all-reduce and ZeroRedundancyOptimizer's broadcasts run in place: they allocate
nothing here. The communication library's own buffers (NCCL's, gloo's) are outside torch's
allocator, and not counted.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

KINDS = ("parameters", "gathered_parameters", "gradients", "optimizer_state", "activations",
         "communication", "inputs", "workspace")
# the ops whose outputs are communication buffers: FSDP2's copy-in before an all-gather, the
# c10d collectives (functional and in place)
COLLECTIVE_PREFIXES = ("fsdp.all_gather_copy_in", "c10d.", "_c10d_functional.")
# FSDP2's ops that gather (split the all-gather's output into the unsharded parameters) or
# scatter (concatenate the unsharded gradients into the reduce-scatter's input)
COPY_OUT, CHUNK_CAT = "fsdp.split_with_sizes_copy", "fsdp.chunk_cat"
RESIZE = "resize_"


def kind_of_op(name: str) -> str | None:
    """The kind of what op ``name`` allocates, where its name tells (None: by the phase)."""
    if name.startswith(COLLECTIVE_PREFIXES):
        return "communication"
    if name == RESIZE:
        return "gathered_parameters"
    return None


def is_collective(name: str) -> bool:
    """Whether op ``name`` is a collective or FSDP2's copy into or out of one."""
    return name.startswith(COLLECTIVE_PREFIXES) or name in (COPY_OUT, CHUNK_CAT)


def claims(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
           ) -> Iterator[tuple[torch.Tensor, str]]:
    """The kinds FSDP2's reduce-scatter copy tells: its inputs are the unsharded gradients,
    its ``out`` the reduce-scatter's input buffer."""
    if name != CHUNK_CAT:
        return
    for gradient in args[0]:
        yield gradient, "gradients"
    out = kwargs.get("out")
    if isinstance(out, torch.Tensor):
        yield out, "communication"


def kind_of_phase(phase: str) -> str:
    """The kind of what an op allocates in ``phase`` that no other rule claims."""
    return "optimizer_state" if phase == "optimizer" else "activations"
