"""Resident memory across repeated cross-checks in one process: the CPU copies the peers run on
must not pile up.

Runs ``run_crosscheck(name)`` ``--calls`` times (every peer, or those of ``--peers``) and prints
after each call its wall time, the resident memory (VmRSS of ``/proc/self/status``), the peak so
far (VmHWM) and the ``nn.Module`` objects the garbage collector still tracks, collected or not
(none should be: a cross-check frees its CPU model when it returns). Target: after the first
call, which imports the peers, RSS flat and no module left. Before issue 28 calflops kept every
model: on vit_b_32, +340 MB and +152 modules per call.

    python benchmarks/crosscheck_memory.py [vit_b_32] [--calls 5] [--peers calflops,fvcore]
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

from torch import nn

from vitprof.checks.crosscheck import run_crosscheck


def status_mb(key: str) -> float:
    """A ``kB`` line of ``/proc/self/status`` (``VmRSS``, ``VmHWM``) in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1]) / 1024
    raise KeyError(key)


def modules_tracked() -> int:
    """The ``nn.Module`` objects the garbage collector tracks, alive or awaiting collection."""
    return sum(issubclass(type(o), nn.Module) for o in gc.get_objects())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default="vit_b_32")
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--peers", help="comma-separated peers (default: every peer)")
    args = parser.parse_args()
    peers = args.peers.split(",") if args.peers else None
    print("| call | wall (s) | RSS (MiB) | peak RSS (MiB) | modules left |")
    print("|---:|---:|---:|---:|---:|")
    for call in range(1, args.calls + 1):
        start = time.perf_counter()
        run_crosscheck(args.model, peers=peers)
        wall = time.perf_counter() - start
        print(f"| {call} | {wall:.1f} | {status_mb('VmRSS'):,.0f} | {status_mb('VmHWM'):,.0f} | "
              f"{modules_tracked()} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
