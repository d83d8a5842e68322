"""The CUDA model's unmeasured parts, measured with ``torch.cuda.memory_snapshot()``.

``vitprof memory --target cuda`` charges cuBLAS workspaces (one per handle: the forward's thread
and autograd's backward thread, 32 MiB each on Hopper, 8.125 MiB elsewhere) and rounds every
block to 512 bytes, both modelled, not measured (:mod:`vitprof.measure.memory.cuda_model`).
On a lent GPU, in a fresh process (no handle has a workspace yet):

    python benchmarks/device_cuda_parts.py OUT_DIR

1. **Workspaces**: one training step of a ``Linear`` with a bias (the forward's ``addmm``, the
   backward's ``mm``s), then a second one. After each phase the active blocks of the snapshot
   that no tensor of the script holds are what the libraries allocated through torch's
   allocator: the workspaces, each with its size, beside the model's figure. The second step
   must add none.
2. **Rounding**: ``torch.cuda.memory_allocated()`` after one allocation of n bytes, for a few n,
   beside the model's rounding.

Writes ``OUT_DIR/cuda_parts.json`` and ``OUT_DIR/cuda_parts.md``; without CUDA it stops in one
line (exit 2). ``benchmarks/device_checks.py`` runs it first, in a process of its own.
``--page-only`` writes the page again from ``OUT_DIR/cuda_parts.json``, measuring nothing (no
GPU needed).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from vitprof.core.atomic_write import write_atomically
from vitprof.measure.memory import cuda_model

WIDTH = 1024  # the Linear's width: matmuls large enough to take cuBLAS's ordinary paths
ROUNDING_SIZES = (1, 511, 512, 513, 2**20 + 1, 2 * 2**20 + 1, 10 * 2**20 + 3)


def active_blocks() -> dict[int, int]:
    """Address -> size of every block the caching allocator has handed out and not freed."""
    return {block["address"]: block["size"]
            for segment in torch.cuda.memory_snapshot() for block in segment["blocks"]
            if block["state"] == "active_allocated"}


def unheld(before: dict[int, int], held: Sequence[torch.Tensor]) -> list[int]:
    """Sizes of the blocks active now, not before, that hold none of ``held``'s storages."""
    ours = {t.untyped_storage().data_ptr() for t in held}
    return sorted((size for address, size in active_blocks().items()
                   if address not in before and address not in ours), reverse=True)


def workspaces() -> dict[str, list[int]]:
    """The blocks the libraries allocated in each phase of two training steps (bytes)."""
    layer = nn.Linear(WIDTH, WIDTH, device="cuda")
    x = torch.randn(64, WIDTH, device="cuda")
    torch.cuda.synchronize()
    found: dict[str, list[int]] = {}
    for step in (1, 2):
        start = active_blocks()
        y = layer(x)
        torch.cuda.synchronize()
        found[f"step {step} forward"] = unheld(start, [y, *_grads(layer)])
        middle = active_blocks()
        y.sum().backward()
        torch.cuda.synchronize()
        found[f"step {step} backward"] = unheld(middle, [y, *_grads(layer)])
    return found


def _grads(layer: nn.Module) -> list[torch.Tensor]:
    return [p.grad for p in layer.parameters() if p.grad is not None]


def rounding() -> dict[int, int]:
    """Bytes ``memory_allocated`` counts for one request of n bytes, per n."""
    counted = {}
    for n in ROUNDING_SIZES:
        before = torch.cuda.memory_allocated()
        block = torch.empty(n, dtype=torch.uint8, device="cuda")
        counted[n] = torch.cuda.memory_allocated() - before
        del block
    return counted


def measure() -> dict[str, Any]:
    """Both measurements, with the model's figures beside them."""
    capability = torch.cuda.get_device_capability()
    found = workspaces()
    counted = rounding()
    return {
        "device": torch.cuda.get_device_name(), "capability": list(capability),
        "torch": torch.__version__,
        "CUBLAS_WORKSPACE_CONFIG": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
        "CUBLASLT_WORKSPACE_SIZE": os.environ.get("CUBLASLT_WORKSPACE_SIZE"),
        "TORCH_CUBLASLT_UNIFIED_WORKSPACE": os.environ.get("TORCH_CUBLASLT_UNIFIED_WORKSPACE"),
        "torch_cublas_workspace_size": torch.backends.cuda.cublas_workspace_size(),
        "torch_cublaslt_workspace_size": torch.backends.cuda.cublaslt_workspace_size(),
        "workspace_blocks": found,
        "modelled_workspace_per_handle": cuda_model.cublas_workspace(capability),
        "modelled_training_workspaces": cuda_model.workspace_bytes(True, capability),
        "measured_training_workspaces": sum(found["step 1 forward"] + found["step 1 backward"]),
        "second_step_adds": sum(found["step 2 forward"] + found["step 2 backward"]),
        "rounding": {str(n): {"counted": c, "modelled": cuda_model.rounded(n)}
                     for n, c in counted.items()},
    }


def markdown(result: dict[str, Any]) -> str:
    """The measurement as a short page."""
    sm = "".join(map(str, result["capability"]))
    unset = "unset (default)"
    lines = [f"# The CUDA model's parts on {result['device']} (sm{sm}, torch {result['torch']})",
             "", f"CUBLAS_WORKSPACE_CONFIG: {result['CUBLAS_WORKSPACE_CONFIG'] or unset}; "
             f"CUBLASLT_WORKSPACE_SIZE: {result['CUBLASLT_WORKSPACE_SIZE'] or unset}",
             "", "| phase | blocks no tensor holds (bytes) |", "|---|---|"]
    lines += [f"| {phase} | {', '.join(f'{b:,}' for b in blocks) or 'none'} |"
              for phase, blocks in result["workspace_blocks"].items()]
    lines += ["", f"Training step: measured {result['measured_training_workspaces']:,} bytes, "
              f"modelled {result['modelled_training_workspaces']:,} (2 handles x "
              f"{result['modelled_workspace_per_handle']:,}); the second step adds "
              f"{result['second_step_adds']:,}. torch's own sizes: cuBLAS "
              f"{result['torch_cublas_workspace_size']:,}, cuBLASLt "
              f"{result['torch_cublaslt_workspace_size']:,} bytes a handle.", "",
              "| request (bytes) | memory_allocated counts | modelled |", "|---:|---:|---:|"]
    lines += [f"| {int(n):,} | {v['counted']:,} | {v['modelled']:,} |"
              for n, v in result["rounding"].items()]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--page-only", action="store_true",
                        help="write the page of OUT_DIR/cuda_parts.json again, measuring nothing")
    args = parser.parse_args(argv)
    if args.page_only:
        page = markdown(json.loads((args.out_dir / "cuda_parts.json").read_text()))
        write_atomically(args.out_dir / "cuda_parts.md", page)
        print(page)
        return 0
    if not torch.cuda.is_available():
        print("device_cuda_parts: no CUDA device here; run it on the lent GPU machine",
              file=sys.stderr)
        return 2
    args.out_dir.mkdir(parents=True, exist_ok=True)
    result = measure()
    write_atomically(args.out_dir / "cuda_parts.json", json.dumps(result, indent=2) + "\n")
    page = markdown(result)
    write_atomically(args.out_dir / "cuda_parts.md", page)
    print(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
