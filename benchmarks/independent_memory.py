"""A real CPU training step's peak memory, measured by code that shares none with vitprof,
beside what `vitprof memory` predicts for it with its default settings.

For each row (issue 33's acceptance: timm's DeiT-Ti at batch 8 and 32 in float32 and at batch 8
under bfloat16 autocast, DeiT-S at batch 8; AdamW, 224 x 224 images):

* measured: timm builds the model (no weights), ``torch.optim.AdamW`` with its defaults, two
  steps of the loop vitprof models (gradients set to None, the forward, a ones gradient on the
  logits backward, the optimizer's step). The second step runs under a dispatch mode of this
  file's own that reads glibc's heap (``mallinfo2()``: ``uordblks + hblkhd``, every arena and
  every mmapped chunk, so the kernels' threads too) after every aten op. Its peak is what was
  alive at the step's start (the parameters, AdamW's moments and steps, the input: their
  ``nbytes``) plus the heap's largest rise over its value there. So it counts what torch's
  kernels hold between ops (oneDNN's scratch, about 2.4 MB per thread, is in it), and
  malloc's chunk headers, but not a buffer made and freed inside one op;
* predicted: ``vitprof memory timm:MODEL --target cpu --optimizer adamw --batch-size B
  [--amp bfloat16] --format json`` run as a command (this file imports nothing of vitprof):
  the peak and the attention kernel its ``auto`` default chose.

    python benchmarks/independent_memory.py [--threads N] [--rows deit_tiny] [--no-page]
        [--save-results results.json]
    python benchmarks/independent_memory.py --from-results results.json   # the section again
    python benchmarks/independent_memory.py --check-heap

prints the table and writes it as a section of reports/memory.md (not with ``--no-page``).
A few minutes on two cores (bfloat16 is emulated on a CPU without AMX: its row is the slowest).
``--save-results`` keeps each row's prediction and measurement with the run's machine, threads
and time (JSON, bytes), from which ``--from-results`` writes the section again, running nothing.
A measuring run first checks that the heap reading sees a tensor made under it (a malloc other
than glibc's reads nothing) and stops in one line where it does not; ``--check-heap`` runs that
check alone and prints what the reading saw.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from saved_results import read_saved
from torch.utils._python_dispatch import TorchDispatchMode

ROOT = Path(__file__).resolve().parent.parent
HEADING = "## CPU, default settings: an independent measurement"
TOLERANCE = 3.0  # percent: issue 33's bound
IMAGE = 224


@dataclass(frozen=True)
class Row:
    model: str
    batch: int
    amp: str | None = None  # an autocast dtype of the forward

    @property
    def key(self) -> str:
        return f"{self.model} b{self.batch} {self.amp or 'float32'}"

    def vitprof_command(self) -> list[str]:
        amp = ["--amp", self.amp] if self.amp else []
        return [sys.executable, "-m", "vitprof", "memory", f"timm:{self.model}", "--target",
                "cpu", "--optimizer", "adamw", "--batch-size", str(self.batch), *amp,
                "--format", "json"]


ROWS = (
    Row("deit_tiny_patch16_224", 8),
    Row("deit_tiny_patch16_224", 32),
    Row("deit_tiny_patch16_224", 8, "bfloat16"),
    Row("deit_small_patch16_224", 8),
)


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


_LIBC = ctypes.CDLL("libc.so.6")
_LIBC.mallinfo2.restype = _MallInfo2


def heap_bytes() -> int:
    """Bytes glibc's malloc has handed out and not taken back: in its arenas and mmapped."""
    info = _LIBC.mallinfo2()
    return int(info.uordblks + info.hblkhd)


class HeapPeak(TorchDispatchMode):
    """Reads the heap after every aten op run under it; ``peak`` is the largest reading."""

    def __init__(self) -> None:
        super().__init__()
        self.peak = heap_bytes()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.peak = max(self.peak, heap_bytes())
        return out


CHECK_BYTES = 4 * 2**20  # the tensor of the heap check: 2**20 float32 elements


def check_heap() -> int:
    """How far :class:`HeapPeak`'s peak rose while a tensor of :data:`CHECK_BYTES` was made
    and kept under it (at least that much where the reading sees torch's allocations)."""
    with HeapPeak() as reading:
        start = reading.peak
        kept = torch.empty(CHECK_BYTES // 4, dtype=torch.float32).fill_(1.0)  # an op after it
    assert kept.nbytes == CHECK_BYTES
    return reading.peak - start


def heap_verdict() -> tuple[bool, str]:
    """Whether the heap reading sees torch's allocations, and a line saying what it saw."""
    rose = check_heap()
    return rose >= CHECK_BYTES, (f"heap reading: rose {rose:,} bytes while a {CHECK_BYTES:,}-byte "
                                 "tensor was made and kept under it")


def _step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, images: torch.Tensor,
          amp: torch.dtype | None) -> None:
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=amp or torch.bfloat16, enabled=amp is not None):
        logits = model(images)
    logits.backward(torch.ones_like(logits))
    optimizer.step()


def measure(row: Row) -> int:
    """The peak bytes of the second training step of ``row`` (see the module)."""
    import timm

    torch.manual_seed(0)
    model = timm.create_model(row.model, pretrained=False)
    optimizer = torch.optim.AdamW(model.parameters())
    images = torch.randn(row.batch, 3, IMAGE, IMAGE)
    amp = getattr(torch, row.amp) if row.amp else None
    _step(model, optimizer, images, amp)
    optimizer.zero_grad(set_to_none=True)
    gc.collect()
    state = [t for s in optimizer.state.values() for t in s.values()
             if isinstance(t, torch.Tensor)]
    held = sum(t.untyped_storage().nbytes() for t in
               [*model.parameters(), *model.buffers(), *state, images])
    start = heap_bytes()
    with HeapPeak() as reading:
        _step(model, optimizer, images, amp)
    return held + reading.peak - start


def predict(row: Row) -> tuple[int, str]:
    """vitprof's predicted peak of ``row`` and the attention it names, from its command."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(row.vitprof_command(), capture_output=True, text=True, env=env,
                          cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"{row.key}: vitprof memory failed: {done.stderr.strip()}")
    data = json.loads(done.stdout)
    return int(data["peak_bytes"]), str(data["settings"]["attention"])


def cpu_name() -> str:
    """The CPU's model name as Linux reports it (the machine's architecture elsewhere)."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.machine()
    names = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
    return names[0] if names else platform.machine()


def error(predicted: int, measured: int) -> float:
    return 100 * (predicted - measured) / measured


def table(results: Sequence[tuple[Row, int, int, str]]) -> list[str]:
    lines = ["| row | attention (vitprof's auto) | vitprof prediction | independent measurement "
             "| error |", "| :--- | :--- | ---: | ---: | ---: |"]
    for row, predicted, measured, attention in results:
        lines.append(f"| {row.key} | {attention} | {predicted:,} | {measured:,} | "
                     f"{error(predicted, measured):+.2f}% |")
    return lines


def section(results: Sequence[tuple[Row, int, int, str]], run: dict[str, Any]) -> str:
    """The page's section; ``run``: the measuring run's arguments, machine, threads and time
    (:func:`run_meta`)."""
    worst = max(abs(error(p, m)) for _, p, m, _ in results)
    within = sum(abs(error(p, m)) <= TOLERANCE for _, p, m, _ in results)
    command = shlex.join(["python", "benchmarks/independent_memory.py", *run["argv"]])
    return "\n".join([
        HEADING, "",
        f"Generated by `{command}` (CPU, measured) on {run['cpu']} with "
        f"{run['threads']} threads (`torch.get_num_threads()`), torch {run['torch']}, in "
        f"{run['seconds']:.0f} s. vitprof with its defaults (`--attention auto`) against a real "
        "step measured by a harness that shares no code with vitprof: the peak of the second AdamW "
        "step read from glibc's heap (`mallinfo2()`, arenas and mmapped chunks) after every "
        "aten op, plus what was alive when the step began. The heap holds what the kernels "
        "keep between ops (oneDNN's scratch grows by about 2.4 MB per thread) and malloc's "
        "headers, which vitprof does not model: the error depends on the thread count.", "",
        *table(results), "",
        f"{within} of {len(results)} rows within {TOLERANCE:g}% (largest error {worst:.2f}%). "
        "The prediction is the command of each row: `vitprof memory timm:MODEL --target cpu "
        "--optimizer adamw --batch-size B [--amp bfloat16]`.", "",
    ])


def run_meta(argv: Sequence[str], seconds: float) -> dict[str, Any]:
    """What the section says of the run that measured."""
    return {"argv": list(argv), "cpu": cpu_name(), "threads": torch.get_num_threads(),
            "torch": torch.__version__, "seconds": seconds}


def measure_rows(rows: Sequence[Row]) -> list[tuple[Row, int, int, str]]:
    """Each row predicted by vitprof's command and measured here."""
    results = []
    for row in rows:
        predicted, attention = predict(row)
        measured = measure(row)
        results.append((row, predicted, measured, attention))
        print(f"{row.key}: vitprof {predicted:,}, measured {measured:,}, "
              f"{error(predicted, measured):+.2f}% ({attention})", flush=True)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, help="torch.set_num_threads (default: torch's)")
    parser.add_argument("--rows", help="only the rows whose key contains this")
    parser.add_argument("--no-page", action="store_true", help="print the table only")
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "memory.md")
    parser.add_argument("--save-results", type=Path, metavar="JSON",
                        help="also write each row's prediction and measurement to this file")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--from-results", type=Path, metavar="JSON",
                      help="write the section from a file --save-results wrote (no run)")
    mode.add_argument("--check-heap", action="store_true",
                      help="only check that the heap reading sees a tensor made under it")
    args = parser.parse_args(argv)
    if args.check_heap and args.save_results:
        parser.error("--check-heap measures no row: --save-results does not apply")
    if args.from_results and (args.rows or args.threads):
        parser.error("--from-results writes the saved run's rows: --rows and --threads do not "
                     "apply")
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.check_heap or not args.from_results:
        sees, line = heap_verdict()
        if args.check_heap or not sees:
            print(line, file=sys.stdout if sees else sys.stderr)
            return 0 if sees else 1
    if args.from_results:
        saved = read_saved(args.from_results, ("rows", "run"), Path(__file__).name)
        results = [(Row(r["model"], r["batch"], r["amp"]), r["predicted"], r["measured"],
                    r["attention"]) for r in saved["rows"]]
        run = saved["run"]
    else:
        start = time.perf_counter()
        results = measure_rows([r for r in ROWS if args.rows is None or args.rows in r.key])
        run = run_meta(sys.argv[1:] if argv is None else argv, time.perf_counter() - start)
    text = section(results, run)
    print(text)
    # files are written atomically, by vitprof's writer (the measurement imports no vitprof)
    from sections import write_atomically, write_section

    if args.save_results:
        rows = [{**asdict(row), "predicted": predicted, "measured": measured,
                 "attention": attention} for row, predicted, measured, attention in results]
        write_atomically(args.save_results, json.dumps({"run": run, "rows": rows}, indent=1) + "\n")
    if not args.no_page:
        write_section(args.out, HEADING, text, level=2)
        print(f"wrote the section '{HEADING[3:]}' of {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
