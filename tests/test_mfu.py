"""vitprof.track's engine: the counts it takes (frozen parameters, one count per shape), the clocks
(faked), the peak table and the errors it must raise or only warn of."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import nullcontext
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from torch import nn

from vitprof.core.errors import UserError
from vitprof.count.formulas.forward import ADDCMUL_COST
from vitprof.integrations.feeding import model_inputs, precision_dtype, require
from vitprof.measure.mfu import flops as flops_module
from vitprof.measure.mfu.clocks import CudaClock, WallClock
from vitprof.measure.mfu.peaks import (
    ChosenPeak,
    choose_peak,
    dtype_name,
    given_peak,
    peak_table,
    table_peak,
)
from vitprof.measure.mfu.tracker import RunningMedian, Tracker, track
from vitprof.render.mfu_summary import summary

B, N, D, L, R = 2, 3, 8, 3, 2  # batch, tokens, width, layers, adapter rank
BND = B * N * D


class Adapted(nn.Module):
    """A linear layer with a LoRA-style adapter beside it: ``W x + B(A x)``."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Linear(D, D, bias=False)
        self.a = nn.Linear(D, R, bias=False)
        self.b = nn.Linear(R, D, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w(x) + self.b(self.a(x))


def stack() -> nn.Sequential:
    return nn.Sequential(*[Adapted() for _ in range(L)])


def clock(*times: float) -> WallClock:
    """A wall clock reading ``times`` in turn (the tracker marks: the ``with``'s entry, then
    each step's end and the next step's start)."""
    it: Iterator[float] = iter(times)
    return WallClock(now=lambda: next(it))


def one_step(model: nn.Module, x: torch.Tensor, peak: float = 1.0) -> dict[str, Any]:
    with track(model, peak, clock=clock(0.0, 2.0, 2.0)) as tracker:
        tracker.step(x)
    return tracker.history[0]


# --- the count: forward + backward, frozen parameters honoured -----------------------------

def test_frozen_adapters_leave_the_weight_and_input_gradients_of_w() -> None:
    model = stack()
    for name, p in model.named_parameters():
        p.requires_grad_(name.endswith("w.weight"))  # the adapters frozen, the W trained
    entry = one_step(model, torch.randn(B, N, D))
    forward = L * (BND * D + 2 * BND * R)  # per layer W: BND*D, A: BND*R, B: BN*R*D
    # W's weight gradient in every layer (BND*D each); the input gradient through W and the
    # adapter (BND*D + 2*BND*R) in every layer but the first, whose input needs none
    backward = L * BND * D + (L - 1) * (BND * D + 2 * BND * R)
    assert entry["flops"] == 2 * (forward + backward)  # 2 * (1728 + 2784) = 9024


def test_frozen_backbone_with_adapters_drops_weight_gradients() -> None:
    model = stack()
    for name, p in model.named_parameters():
        p.requires_grad_(not name.endswith("w.weight"))  # W frozen, the adapters trained
    entry = one_step(model, torch.randn(B, N, D))
    forward = L * (BND * D + 2 * BND * R)  # 3 * (384 + 192) = 1728
    # layer 0: the adapter's weight gradients (A, B: BND*R each) and the gradient of A x
    # (BND*R); no input gradient, no W gradient. Later layers: the input gradient through W
    # (BND*D) and the adapter (2 * BND*R), and the same three for the adapter's weights.
    backward = 3 * BND * R + (L - 1) * (BND * D + 4 * BND * R)  # 96 + 2 * 512 = 1120
    assert entry["flops"] == 2 * (forward + backward)


def test_linear_probe_backward_is_the_head_weight_gradient(tiny_vit: nn.Module) -> None:
    for name, p in tiny_vit.named_parameters():
        p.requires_grad_(name.startswith("head."))
    x = torch.randn(3, 3, 32, 32)
    entry = one_step(tiny_vit, x)
    full = flops_module.count_step(tiny_vit, x)
    width, classes = tiny_vit.head.in_features, tiny_vit.head.out_features
    assert full.backward_macs == 3 * width * classes  # grad W = grad_y^T x: B * D * C = 1920
    assert entry["flops"] == 2 * (full.forward_macs + 3 * width * classes)


@pytest.fixture
def tiny_vit() -> nn.Module:
    timm = pytest.importorskip("timm")
    return timm.create_model("vit_tiny_patch16_224", img_size=32, patch_size=8, depth=2,
                             embed_dim=64, num_heads=2, num_classes=10, pretrained=False)


# --- one count per shape, never scaled ------------------------------------------------------

def test_a_new_batch_size_is_counted_again_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[int, ...]] = []
    count = flops_module.count_step

    def counting(model: nn.Module, inputs: Any) -> flops_module.StepFlops:
        calls.append(tuple(inputs.shape))
        return count(model, inputs)

    monkeypatch.setattr(flops_module, "count_step", counting)
    model = stack()
    batches = [torch.randn(b, N, D) for b in (2, 2, 5, 2, 5)]
    with track(model, 1.0, clock=clock(*range(11))) as tracker:
        for x in batches:
            tracker.step(x)
    assert calls == [(2, N, D), (5, N, D)]  # one meta count per shape, in order
    assert tracker.counts.counts == 2
    per_shape = {b: count(model, torch.randn(b, N, D)).flops for b in (2, 5)}
    assert [e["flops"] for e in tracker.history] == [per_shape[x.shape[0]] for x in batches]


# --- time, MFU, medians ----------------------------------------------------------------------

def test_mfu_is_flops_over_seconds_over_peak() -> None:
    model = stack()
    x = torch.randn(B, N, D)
    # entry 0; step 1 ends at 2 (2 s), starts again at 3; step 2 ends at 7 (4 s)
    # 9,408 FLOPs a step (the closed form above) in 2 s and 4 s: MFU 47% and 23.5% of 1e-8
    with track(model, 1e-8, clock=clock(0.0, 2.0, 3.0, 7.0, 7.0)) as tracker:
        tracker.step(x)
        tracker.step(x)
    first, second = tracker.history
    flops = first["flops"]
    assert (first["seconds"], second["seconds"]) == (2.0, 4.0)
    assert first["tflops"] == flops / 2.0 / 1e12
    assert second["mfu"] == flops / 4.0 / (1e-8 * 1e12)
    assert second["median_mfu"] == pytest.approx((flops / 2.0 + flops / 4.0) / 2 / 1e4)
    assert sum(first["components"].values()) == pytest.approx(1.0)
    assert "| component | share of FLOPs |" in tracker.summary()


def test_begin_marks_the_step_start() -> None:
    with track(stack(), 1.0, clock=clock(0.0, 5.0, 6.0, 7.0)) as tracker:
        tracker.begin()  # at 5: the data loading before it is not in the step
        tracker.step(torch.randn(B, N, D))  # ends at 6
    assert tracker.history[0]["seconds"] == 1.0


def test_mfu_above_a_given_peak_warns_once_and_gives_no_mfu_never_an_error() -> None:
    """A peak given (or the table's) that a step exceeds is wrong for the device: main raised
    'MFU above 100%' from tracker.step(), which stopped the training; now one warning names
    the peak and the FLOPs, and those steps keep their TFLOP/s but have no MFU."""
    model = stack()
    x = torch.randn(B, N, D)
    flops = flops_module.count_step(model, x).flops
    peak = flops / 1.0 / 1e12 / 2  # half of what the step achieves in 1 s: MFU 200%
    with (warnings.catch_warnings(record=True) as caught,
          track(model, peak, clock=clock(0.0, 1.0, 1.0, 2.0, 2.0)) as tracker):
        warnings.simplefilter("always")
        tracker.step(x)
        tracker.step(x)  # above the peak again: no second warning
    said = [str(w.message) for w in caught if "vitprof" in str(w.message)]
    assert len(said) == 1 and "MFU above 100% at step 1" in said[0]
    assert f"{flops:,} FLOPs" in said[0] and f"{peak:g} TFLOP/s" in said[0]
    assert [(e["mfu"], e["tflops"]) for e in tracker.history] == [(None, flops / 1.0 / 1e12)] * 2
    assert [e["peak_tflops"] for e in tracker.history] == [peak, peak]
    assert "- steps above the peak, without MFU: 2 of 2" in tracker.summary()


def test_a_step_faster_than_the_measured_peak_raises_the_peak_never_an_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The CPU's peak, measured when track() starts on a busy machine, below what a later quiet
    step reaches: main raised 'MFU above 100%' inside the training loop. The peak is raised to
    the fastest step's rate (one warning, naming the old and the new peak); each entry says
    which peak its MFU is against, and the summary says where the peak was raised."""
    model = stack()
    x = torch.randn(B, N, D)
    flops = flops_module.count_step(model, x).flops
    # the measurement under load: flops / 2 FLOP/s, what a 2 s step reaches
    monkeypatch.setattr("vitprof.measure.mfu.peaks.matmul_flops", lambda *a, **k: flops / 2)
    # steps of 4 s, 1 s, 0.5 s and 2 s (each start is the previous step's end)
    times = (0.0, 4.0, 4.0, 5.0, 5.0, 5.5, 5.5, 7.5, 7.5)
    with (warnings.catch_warnings(record=True) as caught,
          track(model, clock=clock(*times)) as tracker):
        warnings.simplefilter("always")
        for _ in range(4):
            tracker.step(x)
    said = [str(w.message) for w in caught if "vitprof" in str(w.message)]
    measured, first, second = flops / 2 / 1e12, flops / 1.0 / 1e12, flops / 0.5 / 1e12
    assert len(said) == 1  # the second raise (step 3) is in the history, not another warning
    assert f"step 2 ran at {first:.4g} TFLOP/s, above the peak measured" in said[0]
    assert f"({measured:.4g} TFLOP/s: the machine was busier then)" in said[0]
    # step 1: 2 s of work in 4 s; steps 2 and 3 set the peak (MFU 1); step 4: 1 s of 0.5 s
    # of work at the last peak in 2 s
    assert [e["mfu"] for e in tracker.history] == pytest.approx([0.5, 1.0, 1.0, 0.25])
    assert [e["peak_tflops"] for e in tracker.history] == pytest.approx(
        [measured, first, second, second])
    assert tracker.peak is not None and tracker.peak.tflops == second
    assert f"raised to {second:.4g} TFLOP/s at step 3" in tracker.summary()
    assert tracker.summary().count("raised to") == 1  # the last raise, never a chain


def test_the_summary_is_written_where_summary_says_when_tracking_ends(tmp_path: Path) -> None:
    path = tmp_path / "mfu.md"
    with track(stack(), 1.0, clock=clock(0.0, 2.0, 2.0), summary=path) as tracker:
        tracker.step(torch.randn(B, N, D))
        assert not path.exists()  # written at the end, not at each step
    assert path.read_text() == tracker.summary()
    assert "- steps: 1; input shapes counted: 1" in tracker.summary()


def test_a_summary_that_cannot_be_written_warns_and_training_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "no such folder" / "mfu.md"
    with (pytest.warns(UserWarning, match="MFU summary could not be written"),
          track(stack(), 1.0, clock=clock(0.0, 2.0, 2.0), summary=path) as tracker):
        tracker.step(torch.randn(B, N, D))
    assert len(tracker.history) == 1


@pytest.mark.parametrize("peak", [0, -1.5, float("nan"), "312"])
def test_a_peak_that_is_not_positive_is_one_line(peak: Any) -> None:
    with pytest.raises(UserError, match="peak_tflops must be a positive, finite number"):
        track(stack(), peak)


@pytest.mark.parametrize("model", [None, "vit_b_16", nn.Linear])
def test_a_model_that_is_not_a_module_is_one_line(model: Any) -> None:
    """main: vitprof.track(None) was an AttributeError ('NoneType' object has no attribute
    'parameters')."""
    with pytest.raises(UserError) as raised:
        track(model, 1.0)
    name = type(model).__name__  # NoneType, str, type
    assert str(raised.value) == f"vitprof.track needs the nn.Module being trained, got {name}"


def test_a_step_outside_the_block_warns_and_is_ignored() -> None:
    tracker = track(stack(), 1.0, clock=clock(0.0, 1.0, 2.0, 3.0))
    with pytest.warns(UserWarning, match=r"tracker.step\(\) outside"):
        tracker.step(torch.randn(B, N, D))
    assert tracker.history == []


def test_a_step_that_cannot_be_counted_warns_and_training_goes_on() -> None:
    class NoGrad(nn.Module):  # nothing to train: no training step to count
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Linear(D, D).requires_grad_(False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.w(x)

    with track(NoGrad(), 1.0, clock=clock(0.0, 1.0, 1.0, 2.0, 2.0)) as tracker:
        with pytest.warns(UserWarning, match="cannot be counted"):
            tracker.step(torch.randn(B, N, D))
        tracker.step(torch.randn(B, N, D))  # remembered: no second count, no second warning
    assert [e["flops"] for e in tracker.history] == [None, None]
    assert tracker.counts.counts == 1 and tracker.history[1]["seconds"] == 1.0


class FakeEvent:
    """A CUDA event stand-in: completes when the test says so."""

    def __init__(self, at: float) -> None:
        self.at, self.done, self.recorded = at, False, False

    def record(self) -> None:
        self.recorded = True

    def query(self) -> bool:
        return self.done

    def synchronize(self) -> None:
        self.done = True

    def elapsed_time(self, end: FakeEvent) -> float:
        return (end.at - self.at) * 1e3  # milliseconds, as CUDA's


def test_cuda_steps_are_read_when_their_events_complete_never_waited_for() -> None:
    events: list[FakeEvent] = []

    def event() -> FakeEvent:
        events.append(FakeEvent(float(len(events))))  # the n-th event at n seconds
        return events[-1]

    tracker = Tracker(stack(), ChosenPeak(1.0, "test"), CudaClock(event))
    x = torch.randn(B, N, D)
    with tracker:
        tracker.step(x)  # events 0 (entry), 1 (end), 2 (next start)
        assert tracker.history == []  # not complete yet: nothing waited for
        events[1].done = True
        tracker.step(x)  # events 3 (end), 4: step 1 is read now, one step late
        assert [e["step"] for e in tracker.history] == [1]
        assert tracker.history[0]["seconds"] == 1.0  # events 0 -> 1: 1,000 ms
    assert [e["step"] for e in tracker.history] == [1, 2]  # the end waited for the last
    assert tracker.history[1]["seconds"] == 1.0  # events 2 -> 3
    assert all(e.recorded for e in events)


# --- the peak table -------------------------------------------------------------------------

DEVICE_NAMES = {  # each row's GPU as torch.cuda.get_device_name() calls it
    "A100 SXM": "NVIDIA A100-SXM4-80GB", "A100 PCIe": "NVIDIA A100 80GB PCIe",
    "H100 SXM": "NVIDIA H100 80GB HBM3", "H100 PCIe": "NVIDIA H100 PCIe", "H200 SXM": "NVIDIA H200",
    "L4": "NVIDIA L4", "A10": "NVIDIA A10", "V100 SXM2": "Tesla V100-SXM2-16GB",
    "V100 PCIe": "Tesla V100-PCIE-32GB", "RTX 4090": "NVIDIA GeForce RTX 4090",
    "MI300X": "AMD Instinct MI300X", "MI325X": "AMD Instinct MI325X",  # ROCm's torch names them so
}


def test_every_row_has_a_source_and_every_gpu_every_dtype() -> None:
    rows = peak_table()
    for row in rows:
        assert row.source and row.url.startswith("https://") and row.written, row
        if row.dense_tflops is not None:
            assert row.dense_tflops > 0
            assert f"{row.dense_tflops:g}" in row.written.replace(",", "") or "one-half" in \
                row.written, row  # the figure is the one written (L4: the written halving rule)
    assert {(r.gpu, r.dtype) for r in rows} == {(g, d) for g in DEVICE_NAMES
                                                for d in ("fp32", "tf32", "bf16", "fp16", "fp8")}


def test_no_sparse_figure_is_used() -> None:
    for row in peak_table():
        name = DEVICE_NAMES[row.gpu]
        if row.dense_tflops is None:
            with pytest.raises(UserError, match="sparse figures are never used"):
                table_peak(name, row.dtype)
            continue
        peak = table_peak(name, row.dtype)
        assert peak.tflops == row.dense_tflops
        if row.sparse_tflops is not None:
            assert peak.tflops < row.sparse_tflops


@pytest.mark.parametrize(("name", "dtype", "tflops"), [
    ("NVIDIA A100-SXM4-80GB", "bf16", 312.0),  # datasheet: 312 TFLOPS | 624 TFLOPS*
    ("NVIDIA A100 80GB PCIe", "tf32", 156.0),
    ("NVIDIA H100 80GB HBM3", "bf16", 989.4),  # whitepaper: 989.4/1978.9 (dense/sparse)
    ("NVIDIA H100 PCIe", "fp8", 1513.0),
    ("NVIDIA A10", "fp16", 125.0),  # not the A100
    ("Tesla V100-SXM2-16GB", "fp16", 125.0),
    ("NVIDIA GeForce RTX 4090", "bf16", 165.2),
    ("NVIDIA L4", "bf16", 121.0),  # 242 with sparsity, "one-half lower without"
])
def test_the_gpu_is_found_by_its_name(name: str, dtype: str, tflops: float) -> None:
    peak = table_peak(name, dtype)
    assert peak.tflops == tflops and "dense" in peak.source


@pytest.mark.parametrize(("dtype", "dense"), [
    ("tf32", 989 / 2),  # the datasheet's "TF32 Tensor Core 989 TFLOPS" with sparsity = 494.5
    ("bf16", 1979 / 2),  # "BFLOAT16 Tensor Core 1,979 TFLOPS" with sparsity = 989.5
    ("fp16", 1979 / 2),  # "FP16 Tensor Core 1,979 TFLOPS" with sparsity = 989.5
    ("fp8", 3958 / 2),  # "FP8 Tensor Core 3,958 TFLOPS" with sparsity = 1979
])
def test_the_h200s_dense_peaks_are_its_datasheets_sparse_figures_halved(dtype: str,
                                                                        dense: float) -> None:
    row = next(r for r in peak_table() if r.gpu == "H200 SXM" and r.dtype == dtype)
    assert row.dense_tflops == dense == row.sparse_tflops / 2  # type: ignore[operator]
    assert f"/ 2 = {dense:g}" in row.written  # the derivation is written beside the figure
    assert table_peak("NVIDIA H200", dtype).tflops == dense
    # the H100 SXM5's die and clocks: its whitepaper's dense figure is within 0.1 TFLOP/s
    assert abs(dense - table_peak("NVIDIA H100 80GB HBM3", dtype).tflops) <= 0.2


@pytest.mark.parametrize(("name", "dtype", "tflops"), [
    ("AMD Instinct MI300X", "bf16", 1307.4),  # 1307.4 | 2614.9 with structured sparsity
    ("AMD Instinct MI300X", "fp8", 2614.9),
    ("AMD Instinct MI300X", "fp32", 163.4),  # matrix FP32
    ("AMD Instinct MI325X", "fp16", 1307.4),  # the MI300X's compute, HBM3E memory
    ("AMD Instinct MI325X", "tf32", 653.7),
])
def test_amds_instinct_gpus_are_found_by_their_rocm_names(name: str, dtype: str,
                                                          tflops: float) -> None:
    peak = choose_peak(None, torch.device("cuda"), dtype, device_name=name)
    assert peak.tflops == tflops and "AMD" in peak.source


@pytest.mark.parametrize("name", [
    "NVIDIA B200", "NVIDIA H200 NVL", "NVIDIA GH200 480GB", "NVIDIA H100 NVL", "NVIDIA A10G",
    "NVIDIA GeForce RTX 4090 D", "NVIDIA L40S", "Tesla V100S-PCIE-32GB",
])  # other parts than the rows' (other clocks, other figures), whatever their names share
def test_an_unknown_gpu_asks_for_the_peak_in_one_line(name: str) -> None:
    with pytest.raises(UserError, match=rf"no peak in vitprof's table for GPU '{name}'; "
                                        r"pass peak_tflops="):
        choose_peak(None, torch.device("cuda"), "fp32", device_name=name)


def test_an_unknown_gpu_in_track_warns_and_logs_no_mfu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("vitprof.measure.mfu.tracker.model_device",
                        lambda model: torch.device("cuda"))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Mystery GPU")
    with pytest.warns(UserWarning, match="no MFU, only TFLOP/s"):
        tracker = track(stack(), measure_dtype="bf16", clock=clock(0.0, 1.0, 1.0))
    with tracker:
        tracker.step(torch.randn(B, N, D))
    assert tracker.history[0]["mfu"] is None and tracker.history[0]["tflops"] > 0


def test_track_takes_the_peaks_dtype_as_measure_dtype_and_dtype_still_with_a_warning(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # the dtype track() takes is the matmuls' (the peak's), not a request's: measure_dtype
    monkeypatch.setattr("vitprof.measure.mfu.tracker.model_device",
                        lambda model: torch.device("cuda"))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H100 80GB HBM3")
    tracker = track(stack(), measure_dtype="bf16", clock=clock(0.0, 1.0))
    assert tracker.peak == table_peak("NVIDIA H100 80GB HBM3", "bf16")
    with pytest.warns(DeprecationWarning, match="measure_dtype"):
        old = track(stack(), dtype="bf16", clock=clock(0.0, 1.0))
    assert old.peak == tracker.peak


def test_fp32_is_tf32_when_matmuls_may_use_it() -> None:
    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("high")
        assert dtype_name(torch.float32) == "tf32"
        torch.set_float32_matmul_precision("highest")
        assert dtype_name(torch.float32) == "fp32"
    finally:
        torch.set_float32_matmul_precision(before)
    assert dtype_name(torch.bfloat16) == "bf16"


def test_the_cpu_peak_is_measured_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("vitprof.measure.mfu.peaks.matmul_flops", lambda *a, **k: 5e10)
    peak = choose_peak(None, torch.device("cpu"), torch.float32)
    assert peak.measured and peak.tflops == 0.05 and peak.source.startswith("measured")
    assert "a matmul rate, not a theoretical peak" in peak.source


def test_the_summary_calls_its_mfu_a_compute_window_mfu() -> None:
    """vitprof's clock runs over each step's window, the time between steps left out: the
    summary says so where it gives the MFU and defines it."""
    history = [{"step": 1, "seconds": 1.0, "flops": 2e12, "vector_flops": 0, "tflops": 2.0,
                "mfu": 0.5, "components": None, "time_components": None,
                "optimizer_vector_flops": None, "counted_in_step": False}]
    text = summary(history, given_peak(4.0), 1)
    assert "- median compute-window MFU: 50.00%" in text  # 2 TFLOP/s / 4 TFLOP/s
    assert "the time between steps is left out" in text


# --- the integrations' shared pieces --------------------------------------------------------

def test_a_missing_framework_is_one_line_naming_the_extra() -> None:
    with pytest.raises(UserError, match=r"pip install 'vitprof\[lightning\]'"):
        require("no_such_framework_vitprof", "lightning")


def test_inputs_are_read_from_a_batch() -> None:
    x = torch.randn(2, 3)
    assert model_inputs((x, torch.zeros(2))) is x and model_inputs(x) is x
    assert model_inputs({"pixel_values": x}) == {"pixel_values": x}
    with pytest.raises(UserError, match="pass inputs="):
        model_inputs(3)
    assert (precision_dtype("bf16-mixed"), precision_dtype("16-mixed"),
            precision_dtype("32-true")) == ("bf16", "fp16", None)


def test_the_running_median_is_the_median_of_all_values() -> None:
    median = RunningMedian()
    values = [5.0, 1.0, 4.0, 2.0, 3.0, 9.0]
    got = [median.add(v) for v in values]
    # sorted prefixes: [5] 5; [1,5] 3; [1,4,5] 4; [1,2,4,5] 3; [1..5] 3; [1,2,3,4,5,9] 3.5
    assert got == [5.0, 3.0, 4.0, 3.0, 3.0, 3.5]


@pytest.mark.parametrize("foreach", [False, True])
def test_the_optimizer_step_is_counted_apart_on_its_second_step(foreach: bool) -> None:
    model = stack()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, foreach=foreach)
    x = torch.randn(B, N, D)
    with track(model, 1.0, clock=clock(*range(7)), optimizer=optimizer) as tracker:
        for _ in range(3):
            model(x).sum().backward()
            optimizer.step()
            tracker.step(x)
    trainable = L * (D * D + 2 * D * R)  # 3 * (64 + 32) = 288 elements
    # from the second step on, per element: momentum buf * 0.9 (1), + grad (1), param += (1)
    assert [e["optimizer_vector_flops"] for e in tracker.history] == [None, 3 * trainable,
                                                                      3 * trainable]
    assert tracker.history[1]["flops"] == tracker.history[0]["flops"]  # apart, not added
    assert "864 vector FLOPs a step" in tracker.summary()  # 3 * 288
    assert not optimizer._optimizer_step_pre_hooks  # the hooks are gone after the count


@pytest.mark.parametrize("foreach", [False, True])
def test_adamw_step_per_element_closed_form(foreach: bool) -> None:
    model = stack()
    optimizer = torch.optim.AdamW(model.parameters(), foreach=foreach)
    x = torch.randn(B, N, D)
    with track(model, 1.0, clock=clock(*range(5)), optimizer=optimizer) as tracker:
        for _ in range(2):
            model(x).sum().backward()
            optimizer.step()
            tracker.step(x)
    addc = ADDCMUL_COST + 1  # addcmul_ / addcdiv_ with a value != 1
    # weight decay mul 1, exp_avg lerp 3, exp_avg_sq mul 1 + addcmul, sqrt 1, divide by the
    # bias correction 1, add eps 1, param addcdiv: 1 + 3 + 1 + 3 + 1 + 1 + 1 + 3 = 14
    per_element = 1 + 3 + 1 + addc + 1 + 1 + 1 + addc
    trainable = L * (D * D + 2 * D * R)  # 288 elements in 3 * 3 = 9 tensors
    # + one add per tensor for its step counter
    assert tracker.history[1]["optimizer_vector_flops"] == per_element * trainable + 3 * L


ADDC = ADDCMUL_COST + 1  # addcmul_ / addcdiv_ with a value != 1
OPTIMIZERS = {  # name: (optimizer, vector FLOPs per trainable element, one more per tensor?)
    # weight decay mul 1, exp_avg lerp 3, exp_avg_sq mul 1 + addcmul, sqrt 1, divide by the
    # bias correction 1, add eps 1, param addcdiv: 1 + 3 + 1 + 3 + 1 + 1 + 1 + 3 = 14; the
    # step counters' adds, one per tensor
    "AdamW": (lambda params, **kw: torch.optim.AdamW(params, **kw), 1 + 3 + 1 + ADDC + 3 + ADDC,
              True),
    # maximize: negate the gradient 1; weight decay added to the gradient 1; then Adam's 13
    # (AdamW's without its decay) and amsgrad's maximum 1: 1 + 1 + 13 + 1 = 16
    "Adam amsgrad": (lambda params, **kw: torch.optim.Adam(
        params, weight_decay=0.1, amsgrad=True, maximize=True, **kw),
        1 + 1 + (3 + 1 + ADDC + 3 + ADDC) + 1, True),
    # negate 1, weight decay 1, momentum buf * 0.9 + grad 2, nesterov's grad + buf 1, param 1
    "SGD nesterov": (lambda params, **kw: torch.optim.SGD(
        params, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.1, maximize=True, **kw),
        1 + 1 + 2 + 1 + 1, False),
    # state_sum addcmul with value 1: 2; sqrt and add eps 2; param addcdiv by -clr 3
    "Adagrad": (lambda params, **kw: torch.optim.Adagrad(params, **kw),
                ADDCMUL_COST + 2 + ADDC, True),
}


@pytest.mark.parametrize("kind", ["fused", "foreach", "for-loop"])
@pytest.mark.parametrize("name", OPTIMIZERS)
def test_a_fused_optimizer_step_costs_what_its_unfused_step_costs(name: str, kind: str) -> None:
    """The Hugging Face Trainer's default optimizer is fused AdamW, one aten._fused_adamw_
    kernel, which main left uncounted (None, a warning naming the kernel); Adam's, SGD's and
    Adagrad's fused kernels too. Each costs what the foreach and for-loop steps cost (main
    also missed the foreach amsgrad's _foreach_maximum_, whose base has no in-place twin)."""
    make, per_element, counters = OPTIMIZERS[name]
    model = stack()
    implementation = {"fused": {"fused": True}, "foreach": {"foreach": True},
                      "for-loop": {"foreach": False}}[kind]
    optimizer = make(model.parameters(), **implementation)
    x = torch.randn(B, N, D)
    with track(model, 1.0, clock=clock(*range(5)), optimizer=optimizer) as tracker:
        for _ in range(2):
            model(x).sum().backward()
            optimizer.step()
            optimizer.zero_grad()
            tracker.step(x)
    trainable = L * (D * D + 2 * D * R)  # 288 elements in 3 * 3 = 9 tensors
    assert tracker.history[1]["optimizer_vector_flops"] == (per_element * trainable
                                                            + counters * 3 * L)


@pytest.mark.parametrize("positional", [True, False])
def test_a_closure_run_inside_the_step_is_not_priced(positional: bool) -> None:
    model = stack()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(B, N, D)

    def closure() -> torch.Tensor:  # the forward and backward, as Lightning runs them
        optimizer.zero_grad()
        loss = model(x).sum()
        loss.backward()
        return loss

    with track(model, 1.0, clock=clock(*range(5)), optimizer=optimizer) as tracker:
        for _ in range(2):
            if positional:
                optimizer.step(closure)
            else:
                optimizer.step(closure=closure)
            tracker.step(x)
    trainable = L * (D * D + 2 * D * R)  # 288: one add a trainable element (param -= lr * grad)
    assert tracker.history[1]["optimizer_vector_flops"] == trainable


def test_time_per_component_attributes_the_forward(tiny_vit: nn.Module,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    ticks = iter(range(100_000))  # every mark of the hooks one second after the one before
    monkeypatch.setattr("vitprof.measure.timing.time",
                        SimpleNamespace(perf_counter=lambda: float(next(ticks))))
    x = torch.randn(2, 3, 32, 32)
    tracker = track(tiny_vit, 1.0, clock=clock(*range(9)), timing=True)
    assert tracker.timer is not None
    with tracker:
        for _ in range(2):
            tiny_vit(x).sum().backward()
            tracker.step(x)
    plan = tracker.timer.plans[flops_module.signature(x)]
    assert plan is not None
    # one second per interval between module events: each component's share is the sum of
    # its fractions over the plan's intervals, over their number
    expected: dict[str, float] = {}
    for parts in plan.shares:
        for (component, _block), fraction in parts:
            expected[str(component)] = expected.get(str(component), 0.0) + fraction
    intervals = len(plan.events) - 1
    assert {"patch_embed", "attn_qkv", "mlp", "head"} <= expected.keys()
    for entry in tracker.history:
        shares = entry["time_components"]
        assert shares.keys() == expected.keys()
        for component, share in shares.items():
            assert share == pytest.approx(expected[component] / intervals)
    assert not any(m._forward_pre_hooks for m in tiny_vit.modules())  # the hooks are gone
    assert "share of forward time" in tracker.summary()


def test_a_batch_that_is_none_is_one_warning_not_the_models_own_input() -> None:
    """main counted tracker.step(None) as analyze(inputs=None) does: the model's own input,
    batch 1 at 224 x 224 (4,817,376 FLOPs here, against the 197,568 of the batch it trained on),
    and said nothing."""
    model = nn.Sequential(nn.Conv2d(3, 8, 4, stride=4), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(8, 10))
    with (track(model, 1.0, clock=clock(0.0, 1.0, 1.0, 2.0, 2.0)) as tracker,
          pytest.warns(UserWarning, match="cannot be counted, no MFU for it: the batch is None")):
        tracker.step(torch.randn(2, 3, 32, 32))
        tracker.step(None)
    # batch 2 of 8 x 8 patches: the convolution 2 x 64 x 8 x 48 = 49,152 MACs forward and as many
    # for its weight's gradient; the linear layer 2 x 8 x 10 = 160 forward, its weight's and
    # its input's gradients 160 each: 2 x (2 x 49,152 + 3 x 160) = 197,568 FLOPs
    assert [entry["flops"] for entry in tracker.history] == [197_568, None]


def test_an_internal_failure_of_the_count_warns_and_training_goes_on(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(model: nn.Module, inputs: Any) -> flops_module.StepFlops:
        raise RuntimeError("something vitprof did not foresee")

    monkeypatch.setattr(flops_module, "count_step", broken)
    with (track(stack(), 1.0, clock=clock(0.0, 1.0, 1.0)) as tracker,
          pytest.warns(UserWarning, match="RuntimeError: something vitprof did not")):
        tracker.step(torch.randn(B, N, D))
    assert tracker.history[0]["flops"] is None and tracker.history[0]["seconds"] == 1.0


def seeded_training(tracked: bool, *, counted_optimizer: bool = False,
                    timing: bool = False) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Three steps of a seeded model with dropout, tracked by ``track(model)`` (the peak
    measured on the CPU; the optimizer's step counted, the forward timed, if asked) or not:
    its losses and its parameters at the end."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(D, D), nn.Dropout(0.5), nn.Linear(D, D))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(B, N, D)
    losses = []
    with (track(model, optimizer=optimizer if counted_optimizer else None, timing=timing)
          if tracked else nullcontext()) as tracker:
        for _ in range(3):
            loss = model(x).square().mean()  # dropout draws from the global generator
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            losses.append(loss.detach())
            if tracker is not None:
                tracker.step(x)
    return losses, [p.detach() for p in model.parameters()]


@pytest.mark.parametrize("everything", [False, True])
def test_a_tracked_seeded_run_equals_the_untracked_one_bit_for_bit(everything: bool) -> None:
    """main drew the measured peak's matrices from torch's global generator when track()
    started, so the dropout masks, the losses and the parameters differed from the same seeded
    run untracked; nothing else the tracker runs (the counts, the timing plan, the optimizer's
    pricing: ``everything``) may draw from it either."""
    losses, parameters = seeded_training(False)
    tracked_losses, tracked_parameters = seeded_training(True, counted_optimizer=everything,
                                                         timing=everything)
    assert all(map(torch.equal, losses, tracked_losses))
    assert all(map(torch.equal, parameters, tracked_parameters))
    assert not torch.equal(losses[0], losses[1])  # the steps did train
