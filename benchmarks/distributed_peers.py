"""The peers' per-rank memory figures on the rows of benchmarks/distributed_measured.py (issue
36), beside the largest measured rank's peak, in reports/distributed_memory_peers.csv. No code
of vitprof computes a figure here (its atomic writer writes the file).

The peers, and what each counts and leaves out:

* ``FSDPMemTracker`` (torch.distributed._tools.fsdp2_mem_tracker; strategies ``zero2`` and
  ``fsdp``) and its base ``MemTracker`` (torch.distributed._tools.mem_tracker; ``none``,
  ``ddp``, ``zero1``, where FSDPMemTracker refuses a module that is not FSDP's). Run here on the
  real model and step of the measured rows, in one process as rank 0 of a fake process group
  (torch.testing._internal.distributed.fake_pg: its collectives move no data, but every buffer
  of theirs is allocated as the real code allocates it), tracking the model, its optimizer and
  the batch (DDP's bucket all-reduced by a hook that does what the default one does, which
  fails under the fake group) and, as torch's own tests do, reading the peak of the second step
  (``reset_mod_stats`` after the first). They count the tensor storages alive on the device, by
  kind (parameters, gradients, activations, optimizer state, all-gather and reduce-scatter
  buffers for FSDP2), rounding each to the CUDA allocator's 512 B blocks only on CUDA. On the
  CPU they are the live tensor storages, as distributed_measured.py's ``storage_peak_bytes``
  sums them (on DeiT-Ti, none and DDP at world size 2, the two are the same to the byte). They
  leave out what is no tensor storage made on the main thread: the kernels' scratch kept
  between ops, gloo's buffers and its threads' allocations, the allocator's overhead (what the
  heap reading holds beyond it);
* DeepSpeed's ``estimate_zero2_model_states_mem_needs`` (``zero1``, ``zero2``: its stage 1 and
  2 share it) and ``estimate_zero3_model_states_mem_needs`` (``fsdp``), per GPU without CPU
  offload, with ``num_gpus_per_node`` the world size. DeepSpeed is not installed here (its
  package is a source build); the formulas are re-derived from its source
  (deepspeed/runtime/zero/stage_1_and_2.py and stage3.py at DeepSpeed commit edaa722, August
  2026): zero2 ``2P + int(18P / G)``, zero3 ``4L + int(18P / G)``, with P the parameters (a
  shared one once), L the most held directly by one module, G the GPUs. Model states only, for
  16-bit mixed precision (16-bit parameters and gradients, float32 master weights, gradients
  and Adam's two moments): no activation, no communication buffer, and not our float32 step;
* ``accelerate estimate-memory`` (accelerate's ``calculate_maximum_sizes`` and
  ``estimate_training_usage``, called as its command calls them; the command itself reads the
  model's card on the Hub, out of reach here): "Training using Adam" in float32 is the largest
  of the model T, its gradients T, Adam's state 2T and the step 4T, T the bytes of parameters
  and buffers: 4T on every row. One process: no world size, no sharding, no activation.

    python benchmarks/distributed_peers.py

made reports/distributed_memory_peers.csv (the grid of distributed_measured.py; the torch
trackers run every row once, a few minutes on two cores; ``--models``, ``--strategies``,
``--world-sizes`` choose fewer). ``measured_peak_bytes`` is the largest rank's ``peak_bytes``
of the first repeat in reports/distributed_memory_measured.csv, empty where that file has no
such row (it is read after every row, so the two scripts may run at once).
"""

from __future__ import annotations

import argparse
import csv
import gc
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import torch
import torch.distributed as dist
from distributed_measured import (
    MODELS,
    OUT,
    STRATEGIES,
    TINY,
    WORLD_SIZES,
    Run,
    build,
    grid_done,
    keep_rows,
    runs,
    step,
    wrap,
)
from torch import nn
from torch.nn.parallel import DistributedDataParallel

PEERS_OUT = OUT.parent / "distributed_memory_peers.csv"
DEEPSPEED_SOURCE = "deepspeedai/DeepSpeed@edaa7221267243c7be7fb49c5d5f5c4fb97b4641"


@dataclass(frozen=True)
class PeerRow:
    """One peer's figure for one row (``peer_bytes`` empty where it has none for the row)."""

    model: str
    strategy: str
    world_size: int
    batch: int
    peer: str
    peer_bytes: int | None
    measured_peak_bytes: int | None
    counts: str
    leaves_out: str


def deepspeed_params(model: nn.Module) -> tuple[int, int]:
    """DeepSpeed's ``model_to_params`` (stage3.py): the parameters, a shared one once, and the
    most parameters one module holds directly (not its children's)."""
    total = sum({p.data_ptr(): p.numel() for p in model.parameters()}.values())
    largest = max(sum(p.numel() for p in m.parameters(recurse=False)) for m in model.modules())
    return total, largest


def deepspeed_zero2_gpu_bytes(params: int, gpus: int) -> int:
    """``estimate_zero2_model_states_mem_needs(..., cpu_offload=False)``'s GPU bytes: 2 (16-bit
    parameters) + 18 / GPUs (16-bit and float32 gradients, float32 parameters, Adam's two
    moments, partitioned) bytes a parameter."""
    return 2 * params + int(18 * params / gpus)


def deepspeed_zero3_gpu_bytes(params: int, largest_layer: int, gpus: int) -> int:
    """``estimate_zero3_model_states_mem_needs(..., cpu_offload=False)``'s GPU bytes: the
    largest layer gathered in float32 (4 bytes a parameter) + 18 / GPUs a parameter."""
    return 4 * largest_layer + int(18 * params / gpus)


def accelerate_bytes(model: nn.Module) -> int:
    """accelerate estimate-memory's "Training using Adam" in float32 (see the module)."""
    from accelerate.commands.estimate import (  # type: ignore[import-untyped]
        estimate_training_usage,
    )
    from accelerate.utils import calculate_maximum_sizes  # type: ignore[import-untyped]

    total, _ = calculate_maximum_sizes(model)
    return int(max(estimate_training_usage(total, "float32").values()))


def allreduce_in_place(state, bucket):
    """DDP's bucket (a ``dist.GradBucket``) all-reduced in place and handed back in a done
    future, as its default hook does, waited for here: under the fake group the default hook
    fails (the fake work's future holds None). No annotations: DDP refuses a hook whose
    ``bucket`` is annotated by anything but the class itself, and this module's annotations are
    strings."""
    dist.all_reduce(bucket.buffer())
    done: torch.futures.Future = torch.futures.Future()
    done.set_result(bucket.buffer())
    return done


def tracker_bytes(run: Run) -> tuple[str, int]:
    """torch's tracker's peak of ``run``'s second step as rank 0 of a fake group (see the
    module): FSDPMemTracker for FSDP2, MemTracker otherwise; its name and bytes."""
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
    from torch.distributed._tools.mem_tracker import MemTracker
    from torch.testing._internal.distributed.fake_pg import FakeStore

    torch.set_num_threads(1)
    if run.strategy != "none":
        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=run.world_size)
    try:
        torch.manual_seed(0)
        model, image = build(run.model)
        model, optimizer = wrap(model, run.strategy, run.world_size)
        if isinstance(model, DistributedDataParallel):
            model.register_comm_hook(None, allreduce_in_place)
        images = torch.randn(run.batch, 3, image, image)
        labels = torch.randint(0, 10 if run.model == TINY else 1000, (run.batch,))
        if run.strategy in ("zero2", "fsdp"):
            tracker: MemTracker = FSDPMemTracker(model, optimizer)
            name = "torch FSDPMemTracker"
        else:
            tracker = MemTracker()
            tracker.track_external(model, optimizer)
            name = "torch MemTracker"
        tracker.track_inputs((images, labels)) if isinstance(tracker, FSDPMemTracker) else (
            tracker.track_external(images, labels))
        with tracker:
            step(model, optimizer, images, labels)
            gc.collect()
            tracker.reset_mod_stats()
            step(model, optimizer, images, labels)
        peak = tracker.get_tracker_snapshot("peak")
        return name, int(peak[torch.device("cpu")]["Total"])
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def measured_peaks(path: Path) -> dict[tuple[str, str, int, int], int]:
    """The largest rank's ``peak_bytes`` of repeat 1, by (model, strategy, world size, batch)."""
    if not path.exists():
        return {}
    peaks: dict[tuple[str, str, int, int], int] = {}
    for row in csv.DictReader(path.open()):
        if row["repeat"] != "1":
            continue
        key = (row["model"], row["strategy"], int(row["world_size"]), int(row["batch"]))
        peaks[key] = max(peaks.get(key, 0), int(row["peak_bytes"]))
    return peaks


TRACKER_COUNTS = ("tensor storages alive in the step: parameters, gradients, activations, "
                  "optimizer state, FSDP2's all-gather and reduce-scatter buffers")
TRACKER_LEAVES_OUT = ("what is no tensor storage of the main thread: kernels' scratch, gloo's "
                      "buffers and threads, allocator overhead")
DEEPSPEED_COUNTS = "model states for 16-bit mixed precision with Adam, partitioned over GPUs"
DEEPSPEED_LEAVES_OUT = "activations, communication buffers; assumes 16-bit, not float32"
ACCELERATE_COUNTS = "the largest of model, gradients, Adam state, step in float32 (4 x model)"
ACCELERATE_LEAVES_OUT = "activations, world size and sharding, communication buffers"


def peer_rows(run: Run) -> list[PeerRow]:
    """Every peer's figure for ``run``."""
    model, _ = build(run.model)
    params, largest = deepspeed_params(model)
    name, tracked = tracker_bytes(run)
    zero: int | None = None
    if run.strategy in ("zero1", "zero2"):
        zero, zero_name = deepspeed_zero2_gpu_bytes(params, run.world_size), "deepspeed zero2"
    elif run.strategy == "fsdp":
        zero = deepspeed_zero3_gpu_bytes(params, largest, run.world_size)
        zero_name = "deepspeed zero3"
    else:
        zero_name = "deepspeed (no estimator for this strategy)"

    def peer(name: str, figure: int | None, counts: str, leaves_out: str) -> PeerRow:
        return PeerRow(run.model, run.strategy, run.world_size, run.batch, name, figure, None,
                       counts, leaves_out)

    return [peer(name, tracked, TRACKER_COUNTS, TRACKER_LEAVES_OUT),
            peer(zero_name, zero, DEEPSPEED_COUNTS, DEEPSPEED_LEAVES_OUT),
            peer("accelerate estimate-memory", accelerate_bytes(model), ACCELERATE_COUNTS,
                 ACCELERATE_LEAVES_OUT)]


def table(rows: Sequence[PeerRow]) -> str:
    lines = [f"{'model':24} {'strategy':8} {'ws':>2} {'peer':42} {'peer_bytes':>13} "
             f"{'measured':>13} {'vs measured':>11}"]
    for r in rows:
        figure = f"{r.peer_bytes:,}" if r.peer_bytes is not None else "-"
        measured = f"{r.measured_peak_bytes:,}" if r.measured_peak_bytes else "-"
        ratio = (f"{100 * (r.peer_bytes - r.measured_peak_bytes) / r.measured_peak_bytes:+.1f}%"
                 if r.peer_bytes is not None and r.measured_peak_bytes else "-")
        lines.append(f"{r.model:24} {r.strategy:8} {r.world_size:>2} {r.peer:42} {figure:>13} "
                     f"{measured:>13} {ratio:>11}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=MODELS)
    parser.add_argument("--strategies", nargs="+", default=STRATEGIES, choices=STRATEGIES)
    parser.add_argument("--world-sizes", nargs="+", type=int, default=WORLD_SIZES)
    parser.add_argument("--batch", type=int, default=8, help="images per rank")
    parser.add_argument("--measured", type=Path, default=OUT)
    parser.add_argument("--out", type=Path, default=PEERS_OUT)
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    rows: list[PeerRow] = []
    for run in runs(args.models, args.strategies, args.world_sizes, args.batch, 1):
        rows += peer_rows(run)
        # the measured file is read after every row: the grid may be running beside this
        measured = measured_peaks(args.measured)
        rows = [replace(row, measured_peak_bytes=measured.get(
            (row.model, row.strategy, row.world_size, row.batch))) for row in rows]
        print(table(rows[-3:]).split("\n", 1)[1], flush=True)
        keep_rows(rows, PeerRow, None if args.no_write else args.out)
    return grid_done(table(rows), None if args.no_write else args.out)


if __name__ == "__main__":
    sys.exit(main())
