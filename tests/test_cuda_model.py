"""The CUDA model's unmeasured parts: the cuBLAS workspace per GPU generation and per handle.

torch's default (aten/src/ATen/cuda/CublasHandlePool.cpp, parseChosenWorkspaceSize) is
CUBLAS_WORKSPACE_CONFIG ``:4096:8`` on sm90 (Hopper) and ``:4096:2:16:8`` elsewhere, one
workspace per (handle, stream); autograd's backward thread has a handle of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from models_styles import ParallelViT

from vitprof import memory
from vitprof.measure.memory import cuda_model
from vitprof.workload import InputRequest

MIB = 2**20
KIB = 2**10


@pytest.mark.parametrize(("capability", "workspace"), [
    ((9, 0), 4096 * KIB * 8),  # Hopper (H100, H200): :4096:8 = 33,554,432 bytes = 32 MiB
    ((8, 0), 4096 * KIB * 2 + 16 * KIB * 8),  # A100: :4096:2:16:8 = 8,519,680 bytes = 8.125 MiB
    ((8, 9), 4096 * KIB * 2 + 16 * KIB * 8),  # L4, RTX 4090
    ((7, 0), 4096 * KIB * 2 + 16 * KIB * 8),  # V100
])
def test_the_workspace_of_one_handle_per_gpu_generation(capability: tuple[int, int],
                                                        workspace: int) -> None:
    assert cuda_model.cublas_workspace(capability) == workspace
    assert cuda_model.OTHER_WORKSPACE == 8.125 * MIB


def test_training_holds_two_workspaces_and_inference_one() -> None:
    # the forward's thread and autograd's backward thread: 2 x 32 MiB; a forward alone: 1
    assert cuda_model.workspace_bytes(train=True) == 2 * 32 * MIB
    assert cuda_model.workspace_bytes(train=False) == 32 * MIB
    assert cuda_model.workspace_bytes(train=True, capability=(8, 0)) == 2 * 8_519_680


@pytest.mark.parametrize(("mode", "target", "workspace"), [
    ("train", "cuda", 2 * 32 * MIB),  # 67,108,864 bytes alive from the step's first op
    ("inference", "cuda", 32 * MIB),
    ("train", "cpu", 0),  # the CPU has no cuBLAS
])
def test_memory_charges_the_workspaces_of_the_step(mode: str, target: str,
                                                   workspace: int) -> None:
    estimate = memory(ParallelViT(), InputRequest(image_size=16), target=target, mode=mode)
    assert {event.live["workspace"] for event in estimate.timeline} == {workspace}


def test_the_rounding_is_the_caching_allocators() -> None:
    # requests rounded up to a multiple of 512 bytes: 1 -> 512, 512 -> 512, 513 -> 1,024
    assert [cuda_model.rounded(n) for n in (1, 512, 513, 2 * MIB + 1)] == [
        512, 512, 1024, 2 * MIB + 512]


SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "device_cuda_parts.py"


def run_script(*args: str) -> subprocess.CompletedProcess[str]:
    """The script in a process of its own, with no GPU visible (CUDA_VISIBLE_DEVICES empty)."""
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          env={**os.environ, "CUDA_VISIBLE_DEVICES": ""}, timeout=300)


def test_the_device_measurement_imports_and_refuses_without_cuda(tmp_path: Path) -> None:
    """benchmarks/device_cuda_parts.py measures these parts with torch.cuda.memory_snapshot()
    the first time a GPU is lent; here it must import, and stop in one line."""
    done = run_script(str(tmp_path / "out"))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "no CUDA device" in done.stderr
    assert not (tmp_path / "out").exists()


def test_the_device_measurements_page_puts_the_model_beside_it(tmp_path: Path) -> None:
    result = {  # what an H200 would report if the model holds
        "device": "NVIDIA H200", "capability": [9, 0], "torch": "2.14.1",
        "CUBLAS_WORKSPACE_CONFIG": None, "CUBLASLT_WORKSPACE_SIZE": None,
        "workspace_blocks": {"step 1 forward": [32 * MIB], "step 1 backward": [32 * MIB],
                             "step 2 forward": [], "step 2 backward": []},
        "modelled_workspace_per_handle": 32 * MIB, "modelled_training_workspaces": 64 * MIB,
        "measured_training_workspaces": 64 * MIB, "second_step_adds": 0,
        "torch_cublas_workspace_size": 32 * MIB, "torch_cublaslt_workspace_size": 32 * MIB,
        "rounding": {"513": {"counted": 1024, "modelled": 1024}},
    }
    (tmp_path / "cuda_parts.json").write_text(json.dumps(result))
    done = run_script(str(tmp_path), "--page-only")
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "cuda_parts.md").read_text()
    assert page in done.stdout
    assert "# The CUDA model's parts on NVIDIA H200 (sm90, torch 2.14.1)" in page
    # 2 x 33,554,432 = 67,108,864 bytes measured and modelled
    assert "measured 67,108,864 bytes, modelled 67,108,864 (2 handles x 33,554,432)" in page
    assert "| step 2 backward | none |" in page and "| 513 | 1,024 | 1,024 |" in page
