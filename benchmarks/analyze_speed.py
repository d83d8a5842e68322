"""Wall time and peak memory of ``vitprof.analyze`` on the meta device.

Each case runs in a fresh process. The baseline is the resident memory after a bare
``import torch, torchvision``; the figure reported is the peak resident memory (VmHWM) above it.
Build time (model construction on meta) and counting time (one run under the counter) are
reported apart; targets on a 2-core machine: counting vit_b_16 < 0.1 s; vit_h_14 at 518
< 2 s and < 300 MB above the baseline; the 22B ViT < 10 s.

    python benchmarks/analyze_speed.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CASES = [("vit_b_16", 224), ("vit_h_14", 518), ("vit_22b", 224)]

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
from vitprof.count.families import recognize
from vitprof.models.zoo import build
imported = time.perf_counter()
name, size, repeat = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
built = build(name, image_size=size)
mapping = recognize(built.module)
example = torch.zeros(1, 3, size, size, device="meta")
built_at = time.perf_counter()
counts = []
for _ in range(repeat):
    t0 = time.perf_counter()
    run = count(built.module, image_inputs(example), mapping)
    counts.append(time.perf_counter() - t0)
t0 = time.perf_counter()
profile = vitprof.analyze(name, image_size=size)
total = time.perf_counter() - t0
print(json.dumps({
    "import_s": imported - start, "build_s": built_at - imported, "count_s": min(counts),
    "analyze_s": total, "peak_above_baseline_mb": (status("VmHWM:") - baseline) / 2**20,
    "params": profile.totals.params, "macs": profile.totals.macs,
}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="counting runs; the best is kept")
    args = parser.parse_args()
    print("| model | image | params | GMACs | build (s) | counting (s) | analyze() (s) "
          "| peak RSS above torch+torchvision (MB) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, size in CASES:
        out = subprocess.run(
            [sys.executable, "-c", CHILD, name, str(size), str(args.repeat)],
            capture_output=True, text=True, check=True,
        ).stdout
        r = json.loads(out.strip().splitlines()[-1])
        print(f"| {name} | {size} | {r['params']:,} | {r['macs'] / 1e9:,.3f} | "
              f"{r['build_s']:.3f} | {r['count_s']:.3f} | {r['analyze_s']:.3f} | "
              f"{r['peak_above_baseline_mb']:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
