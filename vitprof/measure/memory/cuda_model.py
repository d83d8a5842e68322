"""The parts of ``vitprof memory --target cuda`` that are modelled, not measured.

vitprof's prediction runs on fake tensors; on the CPU it is held to real steps, but no GPU has
measured these parts of the CUDA model (``benchmarks/device_cuda_parts.py`` measures them with
``torch.cuda.memory_snapshot()`` the first time a GPU is lent). They are, from torch's source:

* **cuBLAS workspace, per GPU generation**: torch gives each (cuBLAS handle, stream) pair a
  workspace from its caching allocator at the handle's first matmul and keeps it
  (``aten/src/ATen/cuda/CublasHandlePool.cpp``, ``setWorkspaceForHandle``). Its size is
  ``CUBLAS_WORKSPACE_CONFIG``'s default (``parseChosenWorkspaceSize``): ``:4096:8`` on sm90
  (Hopper: H100, H200), 4096 KiB x 8 = 32 MiB; ``:4096:2:16:8`` on every other GPU,
  4096 KiB x 2 + 16 KiB x 8 = 8.125 MiB. The variable, when set, replaces both.
* **Per handle**: each thread reserves a handle of its own, and autograd runs a CUDA backward
  on its own device thread, so a training step holds two workspaces (the forward's thread's
  and the backward's); a forward without gradients, one.
* **The caching allocator's rounding**: every block is rounded up to a multiple of 512 bytes,
  as ``torch.cuda.max_memory_allocated`` counts it.

cuBLASLt adds nothing: on open-source CUDA builds it reuses the cuBLAS workspace
(``TORCH_CUBLASLT_UNIFIED_WORKSPACE``, on by default, as ``torch.backends.cuda.
blas_workspace_size``'s documentation in torch 2.14 says); with it off, each handle would add
``CUBLASLT_WORKSPACE_SIZE`` (1 MiB by default), which is not charged. Not charged either: the
cuDNN workspaces, the CUDA context and the allocator's cached but free bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vitprof.core.vocab import MemoryTarget, Mode

KIB = 2**10
MIB = 2**20
CUDA_BLOCK = 512  # the CUDA caching allocator rounds every block up to a multiple of this
HOPPER = (9, 0)  # the compute capability whose default workspace is 32 MiB
HOPPER_WORKSPACE = 4096 * KIB * 8  # :4096:8 = 33,554,432 bytes = 32 MiB
OTHER_WORKSPACE = 4096 * KIB * 2 + 16 * KIB * 8  # :4096:2:16:8 = 8,519,680 bytes = 8.125 MiB
MODELLED_CAPABILITY = HOPPER  # the GPU generation ``target="cuda"`` models
MODELLED = "modelled, not measured"
PART_NAMES = {"cublas_workspace": "cuBLAS workspace", "allocator_rounding": "allocator rounding"}


def cublas_workspace(capability: tuple[int, int] = MODELLED_CAPABILITY) -> int:
    """Bytes of one cuBLAS workspace (one handle) on a GPU of compute ``capability``, at
    ``CUBLAS_WORKSPACE_CONFIG``'s default."""
    return HOPPER_WORKSPACE if capability == HOPPER else OTHER_WORKSPACE


def cublas_handles(train: bool) -> int:
    """The cuBLAS handles a step uses: the forward's thread's, and in training autograd's
    backward thread's."""
    return 2 if train else 1


def workspace_bytes(train: bool, capability: tuple[int, int] = MODELLED_CAPABILITY) -> int:
    """The cuBLAS workspace bytes a step holds throughout."""
    return cublas_handles(train) * cublas_workspace(capability)


def rounded(nbytes: int) -> int:
    """``nbytes`` as the caching allocator counts a request of it."""
    return -(-nbytes // CUDA_BLOCK) * CUDA_BLOCK


def _mib(nbytes: int) -> str:
    return f"{nbytes / MIB:g} MiB"


def modelled_parts(train: bool) -> dict[str, str]:
    """Each modelled part of a ``target="cuda"`` estimate (keyed as :data:`PART_NAMES`), in
    words, with its bytes."""
    handles = cublas_handles(train)
    which = ("the forward's thread and autograd's backward thread" if train
             else "the forward's thread")
    other = handles * OTHER_WORKSPACE
    return {
        "cublas_workspace": (
            f"{handles * cublas_workspace():,} bytes = {handles} handle{'s' if train else ''} "
            f"({which}) x "
            f"{_mib(cublas_workspace())} (CUBLAS_WORKSPACE_CONFIG's default on sm90, Hopper; "
            f"on other GPUs {_mib(OTHER_WORKSPACE)} = 4096 KiB x 2 + 16 KiB x 8 a handle, "
            f"{other:,} bytes in all), {MODELLED}"),
        "allocator_rounding": (
            f"every block rounded up to a multiple of {CUDA_BLOCK} bytes as the caching "
            f"allocator counts it, {MODELLED}"),
    }


def estimate_parts(settings: Mapping[str, Any]) -> dict[str, str]:
    """The modelled, not measured, parts of an estimate made with ``settings`` (a
    :class:`~vitprof.measure.memory.estimate.MemoryEstimate`'s), in words: :func:`modelled_parts`
    for the cuda target; none for the CPU target, whose model is held to real steps."""
    if settings.get("target") != MemoryTarget.CUDA:
        return {}
    return modelled_parts(train=settings.get("mode") != Mode.INFERENCE)
