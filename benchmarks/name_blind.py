"""Name-blindness: per-component params and MACs of models analyzed under their own names and
under :func:`vitprof.testing.neutral_names` (every module, parameter, buffer and class renamed).

One line per model: the MACs that moved between components (half the sum of the per-component
differences) as a share of the total, and whether the neutral run warned "placed without
data-flow evidence"; then the count of silent changes (changed, no warning). Target: 0 silent.

    python benchmarks/name_blind.py [--models A,B]   # default: NAME_BLIND_MODELS
"""

from __future__ import annotations

import argparse
import sys
import time

from vitprof.testing import NAME_BLIND_MODELS, meta_builder, name_blindness


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", help="comma-separated names (default: the list above)")
    parser.add_argument("--recognizer", default="auto", help="analyze's recognizer (auto)")
    args = parser.parse_args()
    sizes = dict(NAME_BLIND_MODELS)
    names = args.models.split(",") if args.models else list(sizes)
    silent = 0
    for name in names:
        start = time.perf_counter()
        result = name_blindness(meta_builder(name), image_size=sizes.get(name),
                                in_chans=3, recognizer=args.recognizer)
        share = result.changed_macs / result.macs if result.macs else 0.0
        silent += not result.holds
        print(f"{name:40s} moved {share:7.2%} of MACs  warned={result.warned!s:5s} "
              f"{'ok' if result.holds else 'SILENT'}  {time.perf_counter() - start:5.1f} s",
              flush=True)
        for line in result.changes if not result.holds else ():
            print(f"    {line}", flush=True)
    print(f"{silent} silent change(s) in {len(names)} models")
    return 0


if __name__ == "__main__":
    sys.exit(main())
