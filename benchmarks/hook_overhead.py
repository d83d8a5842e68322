"""End-to-end latency with and without vitprof's timing hooks, and the overhead in percent.

``vitprof profile`` puts a forward pre-hook and a forward hook on every module and marks a clock
in each. This script times a model's forward both ways, alternating (so that a change of load
hits both alike), with the same interquartile means as ``vitprof profile``, and prints the
overhead. Target: below 3% for vit_b_16 at 224 (about 280 module events per forward).

On a shared machine the run-to-run noise of a forward can exceed the overhead itself, so the
script also prices the hooks alone: the best time of calling an ``nn.Identity`` with the two
marking hooks, less without, times the module calls of one forward, over the fastest forward
without hooks. That bound does not depend on the load.

    python benchmarks/hook_overhead.py [--model vit_b_16] [--batch-size 1] [--iters 10]
        [--warmup 2] [--device cpu] [--threads N]
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn

from vitprof.count.session import image_inputs, meta_twins
from vitprof.measure.timing import clock_for, marking, plan_intervals, time_forward
from vitprof.workload import make_workload


def seconds_per_call(module: nn.Module, x: torch.Tensor, calls: int = 20_000) -> float:
    """Best of five: seconds per ``module(x)`` call."""
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            module(x)
        best = min(best, (time.perf_counter() - start) / calls)
    return best


def hook_cost(clock_mark) -> float:
    """Seconds the two marking hooks add to one module call."""
    identity, x = nn.Identity(), torch.zeros(1)
    bare = seconds_per_call(identity, x)
    with marking(identity, lambda _kind, _path: clock_mark()):
        hooked = seconds_per_call(identity, x)
    return hooked - bare


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="vit_b_16")
    parser.add_argument("--image-size", type=int)
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--threads", type=int)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    work = make_workload(args.model, image_size=args.image_size, batch_size=args.batch_size,
                         device=args.device)
    model = work.module.eval()
    example = work.inputs.tensor(args.device, random=True)
    plan = plan_intervals(model, meta_twins(image_inputs(example))).plan
    t = time_forward(model, example, plan, clock_for(args.device), warmup=args.warmup,
                     iters=args.iters)
    print(f"model: {work.name}, input {work.inputs.describe()}, {args.device}, "
          f"{torch.get_num_threads()} threads; {len(plan.events)} module events per forward")
    print("| iteration | no hooks ms | hooks ms |")
    print("| ---: | ---: | ---: |")
    for i, (plain, hooked) in enumerate(zip(t.latencies, t.hooked_latencies, strict=True)):
        print(f"| {i} | {plain * 1e3:.2f} | {hooked * 1e3:.2f} |")
    print(f"\nlatency without hooks: {t.latency * 1e3:.2f} ms (interquartile mean)")
    print(f"latency with hooks:    {t.hooked_latency * 1e3:.2f} ms")
    print(f"hook overhead:         {t.overhead:+.2%} (median paired difference; target < 3%)")
    print(f"components add up to:  {t.attributed * 1e3:.2f} ms "
          f"({t.attributed / t.hooked_latency:.1%} of the hooked latency)")
    clock = clock_for("cpu")
    per_call = hook_cost(clock.mark)
    calls = len(plan.events) // 2
    priced = calls * per_call / min(t.latencies)
    print(f"hooks alone:           {per_call * 1e6:.2f} us per module call x {calls} calls = "
          f"{calls * per_call * 1e3:.3f} ms, {priced:.3%} of the fastest forward (target < 3%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
