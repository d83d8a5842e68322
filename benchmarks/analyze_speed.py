"""Wall time and peak memory of ``vitprof.analyze`` on the meta device.

Each case runs in a fresh process. The baseline is the resident memory after a bare
``import torch, torchvision``; the figure reported is the peak resident memory (VmHWM) above it.
Build time (model construction on meta) and counting time (one run under the counter) are
reported apart, and ``analyze()`` by name whole (build, count, breakdown); counting and
``analyze()`` are the best of ``--repeat`` runs; targets on a 2-core machine: counting
vit_b_16 < 0.1 s; vit_h_14 at 518 < 2 s and < 300 MB above the baseline; the 22B ViT < 10 s.

``--tree DIR`` (repeatable) runs the vitprof of another checkout (``DIR`` on ``PYTHONPATH``)
beside this one: the processes of a case alternate between the trees (A B A B ..., ``--rounds``
each) and every figure is the best of its tree's runs, so that load that comes and goes on a
shared machine falls on both alike. To compare with an older commit:

    git worktree add /tmp/old 5bee352
    python benchmarks/analyze_speed.py --tree /tmp/old --tree . --rounds 5 --model vit_b_16 \
        --model vit_22b

    python benchmarks/analyze_speed.py [--repeat 3] [--rounds 1] [--tree DIR ...] [--model NAME ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

CASES = [("vit_b_16", 224), ("vit_h_14", 518), ("vit_22b", 224)]
ROOT = Path(__file__).resolve().parent.parent
FIGURES = ("import_s", "build_s", "count_s", "analyze_s", "peak_above_baseline_mb")

CHILD = r"""
import json, sys, time

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
    raise KeyError(key)

import torch, torchvision  # noqa: F401  the baseline
baseline = status("VmRSS:")
start = time.perf_counter()
import vitprof
from vitprof.count.session import count, image_inputs
from vitprof.models.zoo import build
imported = time.perf_counter()
name, size, repeat = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
built = build(name, image_size=size)
example = torch.zeros(1, 3, size, size, device="meta")
built_at = time.perf_counter()
counts = []
for _ in range(repeat):
    t0 = time.perf_counter()
    run = count(built.module, image_inputs(example))
    counts.append(time.perf_counter() - t0)
analyses = []
for _ in range(repeat):
    t0 = time.perf_counter()
    profile = vitprof.analyze(name, image_size=size)
    analyses.append(time.perf_counter() - t0)
total = min(analyses)
print(json.dumps({
    "import_s": imported - start, "build_s": built_at - imported, "count_s": min(counts),
    "analyze_s": total, "peak_above_baseline_mb": (status("VmHWM:") - baseline) / 2**20,
    "params": profile.totals.params, "macs": profile.totals.macs,
}))
"""


def run_child(tree: Path, name: str, size: int, repeat: int) -> dict[str, float]:
    """One fresh process measuring ``name`` at ``size`` with the vitprof of ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, name, str(size), str(repeat)],
        capture_output=True, text=True, check=True, cwd=tree, env=env,
    ).stdout
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


def best_of(tree: Path, runs: list[dict[str, float]]) -> dict[str, float]:
    """The smallest of each figure over ``runs``; the counts must agree between runs."""
    if len({(r["params"], r["macs"]) for r in runs}) != 1:
        raise SystemExit(f"{tree}: the runs counted different params or MACs")
    return {**runs[0], **{key: min(r[key] for r in runs) for key in FIGURES}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3,
                        help="counting and analyze() runs per process; the best is kept")
    parser.add_argument("--rounds", type=int, default=1,
                        help="fresh processes per case and tree, alternating between the trees")
    parser.add_argument("--tree", action="append", type=Path, metavar="DIR",
                        help="a checkout whose vitprof to run (repeatable; default: this one)")
    parser.add_argument("--model", action="append", choices=[name for name, _ in CASES],
                        help="only these cases (repeatable; default: all)")
    args = parser.parse_args()
    trees = [tree.resolve() for tree in args.tree or [ROOT]]
    cases = [(name, size) for name, size in CASES if not args.model or name in args.model]
    several = len(trees) > 1  # a tree column only where trees are compared
    print(f"| model | image |{' tree |' if several else ''} params | GMACs | build (s) | "
          "counting (s) | analyze() (s) | peak RSS above torch+torchvision (MB) |")
    print(f"|---|---:|{'---|' if several else ''}---:|---:|---:|---:|---:|---:|")
    for name, size in cases:
        runs: dict[Path, list[dict[str, float]]] = {tree: [] for tree in trees}
        for turn in range(args.rounds):
            for index in range(len(trees)):
                tree = trees[(turn + index) % len(trees)]
                runs[tree].append(run_child(tree, name, size, args.repeat))
        for tree in trees:
            r = best_of(tree, runs[tree])
            print(f"| {name} | {size} |{f' {tree} |' if several else ''} {r['params']:,} | "
                  f"{r['macs'] / 1e9:,.3f} | "
                  f"{r['build_s']:.3f} | {r['count_s']:.3f} | {r['analyze_s']:.3f} | "
                  f"{r['peak_above_baseline_mb']:.0f} |")
    print("\nload average at the end: " + ", ".join(f"{x:.1f}" for x in os.getloadavg()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
