"""What counting a training step as it runs costs: the counted step against an uncounted one.

A callback counts the first step of each input signature as it runs where a ``forward`` on meta
does not stand for the step (:mod:`vitprof.measure.mfu.live_count`). That step carries vitprof's
counter (a dispatch mode and the module hooks): its time is the step's plus the counter's Python
work on each op. This times, on the CPU, the median of ``--steps`` training steps (forward,
cross-entropy, backward) of a timm ViT uncounted and counted (alternating), beside the meta
count of the same step that a model with a ``forward`` gets instead (outside any step's time).

    python benchmarks/live_count_overhead.py [--model vit_small_patch16_224] [--batch 8]
        [--image 224] [--steps 3] [--threads N]
    python benchmarks/live_count_overhead.py --tiny     # the tests' 2-block ViT, batch 4, 32 x 32
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
from torch import nn
from torch.nn.functional import cross_entropy

from vitprof.measure.mfu.flops import count_step
from vitprof.measure.mfu.live_count import LiveCount


def seconds(work: Callable[[], object]) -> float:
    begin = time.perf_counter()
    work()
    return time.perf_counter() - begin


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="vit_small_patch16_224")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--image", type=int, default=224)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--tiny", action="store_true", help="the tests' 2-block ViT")
    parser.add_argument("--threads", type=int, help="torch's CPU threads (default: torch's)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    import timm

    if args.tiny:
        args.model, args.batch, args.image = "vit_tiny_patch16_224", 4, 32
        model: nn.Module = timm.create_model(args.model, img_size=32, patch_size=8, depth=2,
                                             embed_dim=64, num_heads=2, num_classes=10)
    else:
        model = timm.create_model(args.model, num_classes=10)
    x = torch.randn(args.batch, 3, args.image, args.image)
    y = torch.randint(0, 10, (args.batch,))
    live = LiveCount(model)

    def step() -> None:
        cross_entropy(model(x), y).backward()
        model.zero_grad()

    def counted() -> None:
        live.start()
        step()
        live.stop()

    step()  # warm-up
    plain, under = [], []
    for _ in range(args.steps):
        plain.append(seconds(step))
        under.append(seconds(counted))
    meta = min(seconds(lambda: count_step(model, x)) for _ in range(args.steps))
    uncounted, with_count = statistics.median(plain), statistics.median(under)
    print(f"{args.model}{' (2 blocks, width 64)' if args.tiny else ''}, batch {args.batch}, "
          f"{args.image} x {args.image}, CPU, {torch.get_num_threads()} threads")
    print(f"training step, median of {args.steps}: uncounted {uncounted:.3f} s, counted as it "
          f"runs {with_count:.3f} s (+{with_count - uncounted:.3f} s, load noise included)")
    print(f"the meta count of the same step instead (best of {args.steps}): {meta:.3f} s")


if __name__ == "__main__":
    main()
