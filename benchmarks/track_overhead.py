"""The overhead of ``vitprof.track`` (no per-component timing) against a training step.

A tracked step costs the tracker two clock marks, the input signature (the shapes of the batch,
for the count cache), one history entry and two running medians; the count itself runs once per
input shape and is reported apart, with what it costs spread over a run of ``--run-steps``. The
steady-state cost is priced alone, best of five runs of many ``tracker.step`` calls on a cached
shape, which a shared machine's load does not blur; the training step is timed as the median of
``--steps`` real steps (forward, cross-entropy, backward, SGD step) of timm's
``vit_small_patch16_224`` at ``--batch`` on the CPU, untracked and tracked, alternating.
Target: the steady-state cost under 1% of a step.

    python benchmarks/track_overhead.py [--batch 32] [--steps 3] [--run-steps 1000]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch import nn
from torch.nn.functional import cross_entropy

from vitprof import track


def train_step(model: nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor,
               y: torch.Tensor) -> None:
    cross_entropy(model(x), y).backward()
    optimizer.step()
    optimizer.zero_grad()


def step_seconds(model: nn.Module, x: torch.Tensor, y: torch.Tensor, steps: int) -> tuple[
        float, float, float]:
    """Median seconds of an untracked and of a tracked step (alternating), and the seconds of
    the tracker's one count (its first step on this shape)."""
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    train_step(model, optimizer, x, y)  # warm-up
    plain: list[float] = []
    tracked: list[float] = []
    with track(model, peak_tflops=1e3) as tracker:
        begin = time.perf_counter()
        tracker.counts.of(x)  # the count, on meta, before any timed step
        count = time.perf_counter() - begin
        for _ in range(steps):
            begin = time.perf_counter()
            train_step(model, optimizer, x, y)
            plain.append(time.perf_counter() - begin)
            begin = time.perf_counter()
            tracker.begin()
            train_step(model, optimizer, x, y)
            tracker.step(x)
            tracked.append(time.perf_counter() - begin)
    return statistics.median(plain), statistics.median(tracked), count


def bookkeeping_seconds(model: nn.Module, x: torch.Tensor, calls: int = 2_000) -> float:
    """Best of five: seconds per ``tracker.step(x)`` on a shape already counted."""
    best = float("inf")
    for _ in range(5):
        # a peak no step reaches: the calls come without training, microseconds apart
        with track(model, peak_tflops=1e12) as tracker:
            tracker.counts.of(x)  # counted once
            begin = time.perf_counter()
            for _ in range(calls):
                tracker.step(x)
            best = min(best, (time.perf_counter() - begin) / calls)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--run-steps", type=int, default=1000)
    args = parser.parse_args()
    import timm

    model = timm.create_model("vit_small_patch16_224", pretrained=False)
    x = torch.randn(args.batch, 3, 224, 224)
    y = torch.randint(0, 1000, (args.batch,))
    plain, tracked, count = step_seconds(model, x, y, args.steps)
    per_step = bookkeeping_seconds(model, x)
    print(f"vit_small_patch16_224, batch {args.batch}, CPU, {torch.get_num_threads()} threads")
    print(f"training step, median of {args.steps}: untracked {plain:.3f} s, tracked "
          f"{tracked:.3f} s (difference {100 * (tracked - plain) / plain:+.2f}%, load noise "
          f"included)")
    print(f"tracker.step on a counted shape, best of 5 x 2,000 calls: {1e6 * per_step:.1f} us "
          f"= {100 * per_step / plain:.4f}% of a step (target < 1%)")
    print(f"the one meta count of this shape: {count:.3f} s = {100 * count / plain:.2f}% of one "
          f"step, {100 * count / plain / args.run_steps:.4f}% a step over {args.run_steps:,} "
          f"steps")


if __name__ == "__main__":
    main()
