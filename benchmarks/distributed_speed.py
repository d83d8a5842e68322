"""Time of the per-rank memory prediction: ``vitprof memory MODEL --strategy S --world-size N``.

Issue 36 asks that ``vitprof memory timm:vit_giant_patch14_224 --strategy fsdp --world-size
64`` answer in seconds, and world size 1,024 too; docs/memory.md gives the figures. Every
run is one fresh process (``python -m vitprof memory ... --format json``), timed
from spawn to exit: wall seconds, and CPU seconds (user + sys of that one child, from
``os.times`` before and after), the figure to compare on a shared machine. Each row gives the
median of its runs and the per-rank peak the run printed.

``--tree DIR`` (repeatable; default this checkout) runs the vitprof of each tree (``DIR`` on
``PYTHONPATH``); the trees take turns, A B A B ... (``--reps`` each), so that load that comes
and goes falls on all alike, and a peak that differs between trees is flagged. To compare with
main:

    python benchmarks/distributed_speed.py --tree /work/main --tree . --reps 3

    python benchmarks/distributed_speed.py [--model M] [--strategy S] [--world-size 64,1024]
        [--reps 1] [--tree DIR ...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def timed_run(tree: Path, argv: list[str]) -> tuple[float, float, dict]:
    """Wall seconds, CPU seconds (user + sys) and the JSON output of ``vitprof`` run from
    ``tree`` with ``argv``, in a fresh process."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    before, start = os.times(), time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "vitprof", *argv], cwd=tree, env=env,
                          capture_output=True, text=True, check=False)
    wall, after = time.perf_counter() - start, os.times()
    if done.returncode != 0:
        raise SystemExit(f"distributed_speed.py: error: {tree}: vitprof {' '.join(argv)} "
                         f"exited {done.returncode}: {done.stderr.strip().splitlines()[-1:]}")
    cpu = (after.children_user - before.children_user) \
        + (after.children_system - before.children_system)
    return wall, cpu, json.loads(done.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="timm:vit_giant_patch14_224")
    parser.add_argument("--strategy", default="fsdp")
    parser.add_argument("--world-size", default="64,1024",
                        help="world sizes, joined by commas")
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--tree", action="append", type=Path,
                        help="a checkout whose vitprof to run (repeatable; default this one)")
    args = parser.parse_args()
    trees = [tree.resolve() for tree in args.tree or [ROOT]]
    print(f"{args.model} --strategy {args.strategy}; CPU = user + sys of the process\n")
    print("| tree | world size | wall s | CPU s | per-rank peak B | phase |")
    print("|---|---:|---:|---:|---:|---|")
    for size in args.world_size.split(","):
        argv = ["memory", args.model, "--strategy", args.strategy, "--world-size", size,
                "--format", "json"]
        runs: dict[Path, list[tuple[float, float, dict]]] = {tree: [] for tree in trees}
        for _ in range(args.reps):
            for tree in trees:
                runs[tree].append(timed_run(tree, argv))
        peaks = {run[2]["peak_bytes"] for each in runs.values() for run in each}
        for tree, each in runs.items():
            wall = statistics.median(run[0] for run in each)
            cpu = statistics.median(run[1] for run in each)
            found = each[-1][2]
            flag = "" if len(peaks) == 1 else " (differs between trees)"
            print(f"| {tree} | {int(size):,} | {wall:.1f} | {cpu:.1f} | "
                  f"{found['peak_bytes']:,}{flag} | {found['peak_phase']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
