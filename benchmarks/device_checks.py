"""Every CUDA check of vitprof in one short call: the CUDA model's parts, profile, training
memory, MFU.

Run on a machine with a GPU (the lent device: one call, minutes of budget):

    python benchmarks/device_checks.py OUT_DIR [--peak-tflops T]
        [--only cuda_parts,profile,memory,mfu,fsdp] [--rehearse [FAILING]]

0. ``benchmarks/device_cuda_parts.py`` in a fresh process (no cuBLAS handle has a workspace
   yet): the workspaces and the allocator's rounding that ``vitprof memory --target cuda``
   charges as modelled, not measured, read from ``torch.cuda.memory_snapshot()``
   (``OUT_DIR/cuda_parts.json``/``.md``);
1. ``vitprof profile vit_b_16 --device cuda --format json``: measured time, peak device memory
   (``torch.cuda.max_memory_allocated``) and the matmul peak, to ``OUT_DIR/profile_vit_b_16.json``;
2. :func:`device_memory.run`: the predicted training-step peaks against
   ``max_memory_allocated`` (``memory_cuda.json``/``.md``, which ``benchmarks/memory_accuracy.py``
   reads into the CUDA column of ``reports/memory.md``);
3. :func:`device_mfu.run`: ViT-B/16, 20 bf16 steps, MFU through the plain loop, Lightning and the
   Hugging Face Trainer (``device_mfu.md``). ``--peak-tflops`` is needed where the peak table has
   no dense figure for the GPU and dtype.
4. :func:`device_fsdp.run`: FSDP2 at world size 1 (DeiT-S, batch 32), ``vitprof memory
   --strategy fsdp --target cuda`` against ``max_memory_allocated`` (``fsdp_cuda.json``/``.md``).
   Multi-GPU rows stay unmeasured until a multi-GPU machine is lent.

Each check runs even if an earlier one failed; ``OUT_DIR/device_checks.md`` lists each with its
time and outcome, and the exit code is non-zero if any failed. Without CUDA it stops in one line.

``--rehearse [FAILING]`` runs no CUDA work and needs no GPU: each chosen check is a stand-in that
prints its name and peak, those named in ``FAILING`` (comma-separated) raise, and the page and
exit code are made as on the device, to try the call before spending the device's minutes.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

CHECKS = ("cuda_parts", "profile", "memory", "mfu", "fsdp")


def _cuda_parts(out_dir: Path, _peak: float | None) -> None:
    script = Path(__file__).parent / "device_cuda_parts.py"
    subprocess.run([sys.executable, str(script), str(out_dir)], check=True)


def _profile(out_dir: Path, _peak: float | None) -> None:
    command = [sys.executable, "-m", "vitprof", "profile", "vit_b_16", "--device", "cuda",
               "--format", "json", "--output", str(out_dir / "profile_vit_b_16.json"),
               "--no-progress"]
    subprocess.run(command, check=True)


def _memory(out_dir: Path, _peak: float | None) -> None:
    import device_memory

    device_memory.run(out_dir)


def _mfu(out_dir: Path, peak: float | None) -> None:
    import device_mfu

    device_mfu.run(out_dir, peak_tflops=peak)


def _fsdp(out_dir: Path, _peak: float | None) -> None:
    import device_fsdp

    device_fsdp.run(out_dir)


RUNNERS: dict[str, Callable[[Path, float | None], None]] = {
    "cuda_parts": _cuda_parts, "profile": _profile, "memory": _memory, "mfu": _mfu,
    "fsdp": _fsdp}


def rehearsals(failing: Sequence[str]) -> dict[str, Callable[[Path, float | None], None]]:
    """Stand-ins for :data:`RUNNERS` (``--rehearse``): each prints its check and the peak it
    was given; those in ``failing`` then raise ``RuntimeError``."""
    def stand_in(name: str) -> Callable[[Path, float | None], None]:
        def rehearsed(_out: Path, peak: float | None) -> None:
            print(f"rehearsed {name} (peak {peak})")
            if name in failing:
                raise RuntimeError(f"rehearsed failure of {name}")
        return rehearsed
    return {name: stand_in(name) for name in CHECKS}


def run_checks(out_dir: Path, names: Sequence[str], peak: float | None,
               runners: dict[str, Callable[[Path, float | None], None]] = RUNNERS) -> list[str]:
    """Run each named check, return one markdown line per check (name, seconds, outcome)."""
    lines = []
    for name in names:
        start = time.perf_counter()
        try:
            runners[name](out_dir, peak)
            outcome = "ok"
        except Exception as error:  # one failed check must not hide the others' results
            (out_dir / f"{name}_error.txt").write_text(traceback.format_exc())
            outcome = f"FAILED: {type(error).__name__}: {error}".splitlines()[0]
        lines.append(f"| {name} | {time.perf_counter() - start:.1f} | {outcome} |")
    return lines


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--peak-tflops", type=float, default=None)
    parser.add_argument("--only", default=",".join(CHECKS),
                        help=f"comma-separated subset of {', '.join(CHECKS)}")
    parser.add_argument("--rehearse", nargs="?", const="", metavar="FAILING",
                        help="no CUDA work: stand-ins for the checks, those named here failing")
    args = parser.parse_args(argv)
    failing = set(args.rehearse.split(",")) - {""} if args.rehearse else set()
    unknown = (set(args.only.split(",")) | failing) - set(CHECKS)
    if unknown:
        parser.error(f"unknown check(s): {', '.join(sorted(unknown))}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    if args.rehearse is not None:
        return write_page(args, rehearsals(args.rehearse.split(",")),
                          "# CUDA checks rehearsed (stand-ins, no CUDA work)")
    import torch

    if not torch.cuda.is_available():
        print("device_checks: no CUDA device here; run it on the lent GPU machine",
              file=sys.stderr)
        return 2
    sys.path.insert(0, str(Path(__file__).parent))
    title = f"# CUDA checks on {torch.cuda.get_device_name()} (torch {torch.__version__})"
    return write_page(args, RUNNERS, title)


def write_page(args: argparse.Namespace, runners: dict[str, Callable[[Path, float | None], None]],
               title: str) -> int:
    """Run the checks ``args`` choose with ``runners``, write and print ``device_checks.md``
    under ``title``; 0 when every check passed, else 1."""
    args.out_dir.mkdir(parents=True, exist_ok=True)
    lines = run_checks(args.out_dir, args.only.split(","), args.peak_tflops, runners)
    header = [title, "", "| check | seconds | outcome |", "|---|---:|---|"]
    (args.out_dir / "device_checks.md").write_text("\n".join(header + lines) + "\n")
    print("\n".join(header + lines))
    return 0 if all(line.endswith("| ok |") for line in lines) else 1


if __name__ == "__main__":
    sys.exit(main())
