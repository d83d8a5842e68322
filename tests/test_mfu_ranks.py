"""vitprof.track in data-parallel loops: each rank counts its own step, and the world's step is
arithmetic on the ranks' logged values (issue 36, "MFU per rank").

Two real processes over gloo on the CPU (torch.multiprocessing) train a tiny timm ViT under
DistributedDataParallel, then under FSDP2 (``fully_shard`` on every block and on the root), with
per-rank batches of 2 and 4 so that the ranks' counts differ. Each rank's FLOPs must equal
``FlopCounterMode`` over that rank's real training step (forward and backward in the loop
itself, attention in its math form, which FlopCounterMode counts), and the world's figures the
sum of the ranks' logged FLOPs over the slowest rank's logged seconds over the summed peaks.
The world's arithmetic and the lockstep reading of CUDA marks are also checked with a faked
gather, with no process.
"""

from __future__ import annotations

import csv
import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import cross_entropy
from torch.utils.flop_counter import FlopCounterMode

from vitprof.measure.mfu.clocks import CudaClock, WallClock
from vitprof.measure.mfu.peaks import ChosenPeak
from vitprof.measure.mfu.ranks import WORLD_KEYS, RankStep, World, aggregate, every_rank_joins
from vitprof.measure.mfu.tracker import Tracker
from vitprof.render.mfu_summary import summary

PEAK = 1.0  # TFLOP/s given on every rank: far above a tiny CPU step
WORLD = 2
STEPS = 3
CLASSES, IMAGE = 10, 32


def per_rank_batch(rank: int) -> int:
    return 2 + 2 * rank  # rank 0: 2 images, rank 1: 4


# --- the world's arithmetic, no process ------------------------------------------------------

def test_aggregate_is_the_summed_flops_over_the_slowest_seconds_over_the_summed_peaks() -> None:
    ranks = [RankStep(3_000, 2.0, 1.0, True), RankStep(5_000, 4.0, 3.0, True)]
    figures = aggregate(ranks)
    assert figures["world_flops"] == 8_000  # 3,000 + 5,000
    assert figures["world_seconds"] == 4.0  # the slower rank's
    assert figures["world_tflops"] == 8_000 / 4.0 / 1e12
    assert figures["world_mfu"] == 8_000 / 4.0 / ((1.0 + 3.0) * 1e12)


@pytest.mark.parametrize("other, missing", [
    (RankStep(None, 1.0, None, False), ("world_flops", "world_tflops", "world_mfu")),  # no count
    (RankStep(5_000, 1.0, None, False), ("world_tflops", "world_mfu")),  # counted as it ran
    (RankStep(5_000, 1.0, None, True), ("world_mfu",)),  # above a peak given: no MFU
])
def test_a_rank_without_a_figure_leaves_the_world_without_it(
        other: RankStep, missing: tuple[str, ...]) -> None:
    figures = aggregate([RankStep(3_000, 2.0, 1.0, True), other])
    assert figures["world_seconds"] == 2.0
    for key in ("world_flops", "world_tflops", "world_mfu"):
        assert (figures[key] is None) == (key in missing), key


class FakeGather:
    """The other rank's steps as given; records what this rank sent."""

    def __init__(self, others: list[RankStep]) -> None:
        self.others = others
        self.sent: list[RankStep] = []

    def __call__(self, mine: RankStep) -> list[RankStep]:
        self.sent.append(mine)
        return [mine, self.others[len(self.sent) - 1]]


def linear_model() -> nn.Module:
    return nn.Linear(8, 4, bias=False)


def test_each_entry_holds_the_world_gathered_from_the_ranks() -> None:
    other = RankStep(1_000, 5.0, 2.0, True)
    gather = FakeGather([other])
    times = iter([0.0, 2.0, 2.0])
    tracker = Tracker(linear_model(), ChosenPeak(1.0, "test"), WallClock(lambda: next(times)),
                      world=World(0, 2, gather))
    with tracker:
        tracker.step(torch.randn(2, 3, 8))
    entry = tracker.history[0]
    flops = 2 * (2 * 3 * 8 * 4 + 2 * 3 * 8 * 4)  # forward 192 MACs, the weight gradient's 192
    assert entry["flops"] == flops
    assert gather.sent == [RankStep(flops, 2.0, 1.0, True)]
    assert (entry["rank"], entry["world_size"]) == (0, 2)
    assert entry["world_flops"] == flops + 1_000
    assert entry["world_seconds"] == 5.0
    assert entry["world_mfu"] == (flops + 1_000) / 5.0 / ((1.0 + 2.0) * 1e12)
    assert "- world: 2 ranks" in summary(tracker.history, tracker.peak, 1)


def test_without_a_process_group_the_world_keys_are_none() -> None:
    times = iter([0.0, 2.0, 2.0])
    with Tracker(linear_model(), None, WallClock(lambda: next(times))) as tracker:
        tracker.step(torch.randn(2, 3, 8))
    world_keys = ("rank", "world_size", "world_flops", "world_seconds", "world_tflops",
                  "world_mfu")
    assert all(tracker.history[0][k] is None for k in world_keys)
    assert "world" not in summary(tracker.history, None, 1)


class FakeEvent:
    """A CUDA event at ``at`` seconds, complete once ``done``; waiting completes it."""

    def __init__(self, at: float) -> None:
        self.at, self.done = at, False

    def record(self) -> None:
        pass

    def query(self) -> bool:
        return self.done

    def synchronize(self) -> None:
        self.done = True

    def elapsed_time(self, end: FakeEvent) -> float:
        return (end.at - self.at) * 1e3


def test_on_cuda_every_rank_reads_a_step_exactly_one_step_late() -> None:
    """In a world the gather is a collective: a step is entered at the next step's end on every
    rank, ready or not (its end waited for), never sooner because its event happened to be
    ready on one rank."""
    events: list[FakeEvent] = []

    def event() -> FakeEvent:
        events.append(FakeEvent(float(len(events))))
        events[-1].done = True  # ready at once: without lockstep it would be read at once
        return events[-1]

    gather = FakeGather([RankStep(None, 0.5, None, False)] * 2)
    tracker = Tracker(linear_model(), ChosenPeak(1.0, "test"), CudaClock(event),
                      world=World(1, 2, gather))
    with tracker:
        tracker.step(torch.randn(2, 3, 8))
        assert tracker.history == []  # read at the next step's end
        tracker.step(torch.randn(2, 3, 8))
        assert [e["step"] for e in tracker.history] == [1]
    assert [e["step"] for e in tracker.history] == [1, 2]  # the last one when tracking ends
    assert len(gather.sent) == 2


# --- two processes over gloo: DDP, then FSDP2 ---------------------------------------------------

def tiny_vit() -> nn.Module:
    import timm

    return timm.create_model("vit_tiny_patch16_224", img_size=IMAGE, patch_size=8, depth=2,
                             embed_dim=64, num_heads=2, num_classes=CLASSES, pretrained=False)


def train_tracked(model: nn.Module, rank: int) -> dict[str, Any]:
    """``STEPS`` training steps of ``model`` on this rank's batch, tracked; each step's forward
    and backward under FlopCounterMode (the reference: the rank's real step)."""
    from vitprof import track

    generator = torch.Generator().manual_seed(rank)
    batch = per_rank_batch(rank)
    x = torch.randn(batch, 3, IMAGE, IMAGE, generator=generator)
    y = torch.randint(0, CLASSES, (batch,), generator=generator)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    reference = []
    with track(model, peak_tflops=PEAK) as tracker:
        for _ in range(STEPS):
            with FlopCounterMode(display=False) as counter, sdpa_kernel(SDPBackend.MATH):
                cross_entropy(model(x), y).backward()
            optimizer.step()
            optimizer.zero_grad()
            tracker.step(x)
            reference.append(int(counter.get_total_flops()))
    return {"reference": reference, "history": tracker.history}


def tensor_parallel_warnings() -> list[str]:
    """vitprof's warnings for a step of a column-parallel linear layer (tensor parallelism: each
    rank multiplies by its slice of the weight), and the step's FLOPs (None: not counted)."""
    import warnings

    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, parallelize_module

    from vitprof import track

    mesh = init_device_mesh("cpu", (WORLD,))
    model = parallelize_module(nn.Sequential(nn.Linear(8, 4)), mesh, {"0": ColwiseParallel()})
    x = torch.randn(2, 3, 8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with track(model, peak_tflops=PEAK) as tracker:
            model(x).sum().backward()
            tracker.step(x)
    return [str(w.message) for w in caught if "vitprof" in str(w.message)] + [
        str(tracker.history[0]["flops"])]


def rank_main(rank: int, port: int, out: str) -> None:
    """One rank: a DDP loop, then an FSDP2 loop (fully_shard on every block and the root), each
    on a fresh tiny ViT; the results in ``out/rank{rank}.json``."""
    import os

    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard
    from torch.nn.parallel import DistributedDataParallel

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    try:
        torch.manual_seed(0)
        results: dict[str, Any] = {
            "ddp": train_tracked(DistributedDataParallel(tiny_vit()), rank)}
        torch.manual_seed(0)
        model = tiny_vit()
        for block in model.blocks:  # type: ignore[union-attr]
            fully_shard(block)
        fully_shard(model)
        results["fsdp2"] = train_tracked(model, rank)
        results["tensor_parallel"] = tensor_parallel_warnings()
    finally:
        dist.destroy_process_group()
    Path(out, f"rank{rank}.json").write_text(json.dumps(results))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def gloo_ranks(tmp_path: Path) -> list[dict[str, Any]]:
    """Each rank's results of :func:`rank_main`, run in ``WORLD`` processes."""
    if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    pytest.importorskip("timm")
    import torch.multiprocessing as mp

    mp.spawn(rank_main, args=(free_port(), str(tmp_path)), nprocs=WORLD)
    return [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(WORLD)]


@pytest.mark.slow  # two processes importing torch and timm, two loops each: about 20 s
def test_ddp_and_fsdp2_ranks_count_their_own_steps_and_the_world_is_arithmetic(
        tmp_path: Path) -> None:
    ranks = gloo_ranks(tmp_path)
    for wrapper in ("ddp", "fsdp2"):
        histories = [r[wrapper]["history"] for r in ranks]
        for rank, result in enumerate(r[wrapper] for r in ranks):
            assert [e["flops"] for e in result["history"]] == result["reference"], (wrapper, rank)
            assert all(e["rank"] == rank and e["world_size"] == WORLD for e in result["history"])
        rank0, rank1 = histories
        # the ranks' batches differ (2 and 4 images), so do their steps: rank 1 does twice the work
        assert rank1[0]["flops"] == 2 * rank0[0]["flops"]
        for step in range(STEPS):
            flops = [h[step]["flops"] for h in histories]
            seconds = [h[step]["seconds"] for h in histories]
            for history in histories:  # every rank holds the same world, from the logged values
                world = history[step]
                assert world["world_flops"] == sum(flops)
                assert world["world_seconds"] == max(seconds)
                assert world["world_tflops"] == sum(flops) / max(seconds) / 1e12
                assert world["world_mfu"] == sum(flops) / max(seconds) / (WORLD * PEAK * 1e12)
    for result in ranks:  # tensor parallelism is out of scope: said so, and no FLOPs
        *warned, counted = result["tensor_parallel"]
        assert counted == "None"
        assert len(warned) == 1 and "tensor parallelism is out of" in warned[0], warned


# --- a loop tracked on some ranks only ----------------------------------------------------------

def test_the_ranks_agree_through_the_store_whether_every_one_tracks() -> None:
    """Every rank counts itself in; the last one makes the world, a rank that waited in vain
    closes it, and a rank that comes after the closing reads it closed too."""
    import threading

    store = torch.distributed.HashStore()
    assert every_rank_joins(store, 1, 0, 1.0)  # a world of one
    found: list[bool] = []
    ranks = [threading.Thread(target=lambda: found.append(every_rank_joins(store, 2, 1, 30.0)))
             for _ in range(2)]
    for thread in ranks:
        thread.start()
    for thread in ranks:
        thread.join()
    assert found == [True, True]
    assert not every_rank_joins(store, 2, 2, 0.1)  # the other rank never comes
    assert not every_rank_joins(store, 2, 2, 0.1)  # it comes late, and reads the same


def rank_zero_alone(rank: int, port: int, out: str) -> None:
    """A DDP loop tracked on rank 0 only (rank 0 logs, the habit): rank 0's gather was paired
    with rank 1's next collective (DDP's), and one of them timed out."""
    import os
    from datetime import timedelta

    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from vitprof import track
    from vitprof.measure.mfu import ranks

    ranks.JOIN_SECONDS = 2.0
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD, timeout=timedelta(seconds=20))
    try:
        torch.manual_seed(0)
        model = DistributedDataParallel(tiny_vit())
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        x, y = torch.randn(2, 3, IMAGE, IMAGE), torch.randint(0, CLASSES, (2,))

        def train(tracker: Tracker | None) -> None:
            for _ in range(STEPS):
                cross_entropy(model(x), y).backward()
                optimizer.step()
                optimizer.zero_grad()
                if tracker is not None:
                    tracker.step(x)

        result: dict[str, Any] = {}
        if rank == 0:
            with pytest.warns(UserWarning, match="not every rank") as caught, track(
                    model, peak_tflops=PEAK) as tracker:
                train(tracker)
            result = {"history": tracker.history, "warned": [str(w.message) for w in caught]}
        else:
            train(None)
        weights = [torch.empty(0)] * WORLD
        dist.all_gather_object(weights, model.module.head.weight.detach())
        result["same_weights"] = bool(torch.equal(*weights))
    finally:
        dist.destroy_process_group()
    Path(out, f"alone{rank}.json").write_text(json.dumps(result))


@pytest.mark.slow  # two processes importing torch and timm: about 15 s
def test_a_loop_tracked_on_one_rank_trains_and_says_it_has_no_world(tmp_path: Path) -> None:
    if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    pytest.importorskip("timm")
    import torch.multiprocessing as mp

    mp.spawn(rank_zero_alone, args=(free_port(), str(tmp_path)), nprocs=WORLD)
    zero, one = (json.loads((tmp_path / f"alone{r}.json").read_text()) for r in range(WORLD))
    assert zero["same_weights"] and one["same_weights"]  # the training went on, in step
    assert [e["flops"] is not None for e in zero["history"]] == [True] * STEPS  # its own step
    assert all(e[key] is None for e in zero["history"] for key in WORLD_KEYS)
    assert len(zero["warned"]) == 1


# --- Lightning: the DDP strategy and FSDP2 (ModelParallelStrategy), two CPU processes ---------

@pytest.mark.slow  # Lightning's launcher starts a second interpreter; imports and fit: ~20 s
@pytest.mark.parametrize("strategy", ["ddp", "fsdp2"])
def test_lightning_ranks_log_their_own_steps_and_the_world(tmp_path: Path, strategy: str) -> None:
    """tests/lightning_ranks.py: ``strategy="ddp"``, or FSDP2 through ``ModelParallelStrategy``
    (Lightning's ``"fsdp"`` strategy is FSDP1 and refuses ``accelerator="cpu"``), batches of 2
    and 4 images on ranks 0 and 1."""
    if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    pytest.importorskip("lightning.pytorch")
    pytest.importorskip("timm")
    script = Path(__file__).with_name("lightning_ranks.py")
    subprocess.run([sys.executable, str(script), str(tmp_path), strategy], check=True,
                   capture_output=True, timeout=600)
    ranks = [json.loads((tmp_path / f"{strategy}-rank{r}.json").read_text()) for r in range(2)]
    histories = [r["history"] for r in ranks]
    for rank, result in enumerate(ranks):
        assert result["reference"]  # FlopCounterMode saw every step
        assert [e["flops"] for e in result["history"]] == result["reference"], rank
    assert histories[1][0]["flops"] == 2 * histories[0][0]["flops"]  # 4 images against 2
    for step, (mine, theirs) in enumerate(zip(*histories, strict=True)):
        flops, seconds = mine["flops"] + theirs["flops"], max(mine["seconds"], theirs["seconds"])
        for entry in (mine, theirs):
            assert entry["world_flops"] == flops, step
            assert entry["world_mfu"] == flops / seconds / (2 * 1.0 * 1e12), step  # peak 1.0 each
    metrics = Path(ranks[0]["log_dir"], "metrics.csv").read_text().splitlines()
    logged = [row for row in csv.DictReader(metrics) if row.get("vitprof/world_mfu")]
    assert [float(row["vitprof/world_mfu"]) for row in logged] == pytest.approx(
        [e["world_mfu"] for e in histories[0]], rel=1e-6)  # Lightning logs float32, rank 0's
