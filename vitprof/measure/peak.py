"""The device's attainable peak, measured on the spot: a large matmul and a large copy.

The compute peak is the best FLOP/s (2 x n^3 per ``n x n @ n x n``) over a few repetitions of
a square matmul in the profiled dtype, run as ``F.linear`` (the kernel of ``nn.Linear``, where a
ViT's matmuls are: on a CPU without native bf16, ``torch.mm`` in bfloat16 runs a reference loop
some 20 x slower than ``linear``'s oneDNN kernel, a "peak" that training steps exceed); the
bandwidth is the best bytes/s (read + write) of a large tensor copy. Both use the same clock
discipline as the timing (wall clock on the CPU, CUDA events and a synchronize on a GPU).
Best-of rather than median: the peak is what the device can do, and a shared machine only ever
makes a run slower.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from vitprof.core.vocab import Device

MATMUL_SIZES = {"cpu": 1024, "cuda": 8192}
COPY_BYTES = {"cpu": 64 * 2**20, "cuda": 1 * 2**30}


@dataclass(frozen=True)
class Peak:
    """Attainable compute (FLOP/s) and memory bandwidth (bytes/s) of a device and dtype."""

    flops_per_s: float
    bytes_per_s: float | None
    source: str  # how each was obtained, in words

    @property
    def ridge(self) -> float | None:
        """Arithmetic intensity (FLOPs/byte) where the roofline turns from memory to compute."""
        return self.flops_per_s / self.bytes_per_s if self.bytes_per_s else None


def best_seconds(fn: Callable[[], object], device: str, repeats: int) -> float:
    """The shortest of ``repeats`` timed calls of ``fn`` after one untimed call, in seconds."""
    fn()  # warm-up: allocation, kernel selection
    best = float("inf")
    for _ in range(repeats):
        if device == Device.CUDA:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            best = min(best, start.elapsed_time(end) / 1e3)
        else:
            begin = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - begin)
    return best


def matmul_flops(
    device: str, dtype: torch.dtype, size: int | None = None, repeats: int = 5
) -> float:
    """Best FLOP/s of an ``size x size`` matmul in ``dtype`` on ``device`` (as ``F.linear``).

    The matrices are drawn from a private generator, never torch's global one: a peak measured
    when a seeded training starts (``vitprof.track``) leaves its random numbers as they were."""
    n = size or MATMUL_SIZES.get(device, 1024)
    generator = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, n, device=device, generator=generator).to(dtype)
    b = torch.randn(n, n, device=device, generator=generator).to(dtype)
    with torch.inference_mode():
        seconds = best_seconds(lambda: torch.nn.functional.linear(a, b), device, repeats)
    return 2 * n**3 / seconds


def copy_bandwidth(device: str, nbytes: int | None = None, repeats: int = 5) -> float:
    """Best bytes/s (read + write) of copying a large float32 tensor on ``device``."""
    count = (nbytes or COPY_BYTES.get(device, 64 * 2**20)) // 4
    src = torch.empty(count, device=device).fill_(1.0)
    dst = torch.empty_like(src)
    with torch.inference_mode():
        seconds = best_seconds(lambda: dst.copy_(src), device, repeats)
    return 2 * count * 4 / seconds


def measure_peak(device: str, dtype: torch.dtype, given_tflops: float | None = None) -> Peak:
    """Measure the matmul peak (unless ``given_tflops``) and the copy bandwidth."""
    bandwidth = copy_bandwidth(device)
    if given_tflops is not None:
        return Peak(given_tflops * 1e12, bandwidth, "compute given (--peak-tflops); "
                    "bandwidth measured by a copy")
    n = MATMUL_SIZES.get(device, 1024)
    flops = matmul_flops(device, dtype, n)
    return Peak(flops, bandwidth, f"measured: a matmul rate, not a theoretical peak: best of "
                f"5 {n}x{n} {_name(dtype)} matmuls; "
                "best of 5 float32 copies")


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
