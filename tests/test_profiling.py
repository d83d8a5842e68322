"""``vitprof profile`` and training counts: times, FLOP/s, bytes, memory, backward ratios, CLI.

Timing tests run a small torchvision ViT on the CPU (image 32, patch 8 -> 16 patches + the class
token = 17 tokens, width 64, 2 heads, MLP 128, 2 layers, 10 classes) with one thread. The only
timing assertion is the sum rule: per-component times add up to the hooked end-to-end time.
Expected counts and bytes are derived by the arithmetic beside them.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from pathlib import Path

import pytest
import torch
from models_styles import FusedViT
from torchvision.models.vision_transformer import VisionTransformer

from vitprof import UserError, analyze, memory
from vitprof.cli.main import main
from vitprof.core.records import COMPONENTS, Component, Counts
from vitprof.core.vocab import MemoryTarget
from vitprof.count.session import image_inputs
from vitprof.count.training import phase_components, phase_totals
from vitprof.measure.memory.by_kind import (
    activation_bytes,
    param_bytes_by_component,
    param_bytes_by_dtype,
    saved_for_backward,
)
from vitprof.measure.peak import Peak, best_seconds, matmul_flops, measure_peak
from vitprof.measure.profile import profile_model
from vitprof.measure.result import Row, SpeedProfile, above_peak_note
from vitprof.measure.timing import (
    CpuClock,
    CudaClock,
    Timings,
    interquartile_mean,
    middle_half,
    plan_intervals,
    time_forward,
)
from vitprof.recognize.tables import recognize
from vitprof.render.formats import choices
from vitprof.render.roofline import points, write_roofline
from vitprof.workload import InputRequest, make_workload

C = Component
BATCH = 4
TOKENS = 17  # (32 / 8) ** 2 + 1
SMALL_FILE = '''
from torchvision.models.vision_transformer import VisionTransformer

def small(image_size=32, num_classes=10):
    return VisionTransformer(image_size=image_size, patch_size=8, num_layers=2, num_heads=2,
                             hidden_dim=64, mlp_dim=128, num_classes=num_classes)

def cnn(num_classes=10):
    from torchvision.models import resnet18
    return resnet18(num_classes=num_classes)
'''
# Parameters of the small ViT:
# conv_proj 64*3*8*8 + 64 = 12_352; class_token 64; pos_embedding 17*64 = 1_088;
# per layer: ln_1 128, in_proj 3*64*64 + 192 = 12_480, out_proj 64*64 + 64 = 4_160, ln_2 128,
#   mlp 64*128 + 128 + 128*64 + 64 = 16_576 -> 33_472; two layers 66_944;
# encoder.ln 128; heads 64*10 + 10 = 650.
SMALL_PARAMS = 12_352 + 64 + 1_088 + 66_944 + 128 + 650  # = 81_226


def small_vit() -> VisionTransformer:
    torch.manual_seed(0)
    return VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2,
                             hidden_dim=64, mlp_dim=128, num_classes=10)


@pytest.fixture(scope="module")
def measured() -> SpeedProfile:
    return profile_model(small_vit(), InputRequest(batch_size=BATCH), device="cpu", warmup=1,
                         iters=8, threads=1, peak_tflops=0.05)


@pytest.fixture
def small_file(tmp_path: Path) -> Path:
    path = tmp_path / "small.py"
    path.write_text(SMALL_FILE)
    return path


# ------------------------------------------------------------------------------ timing


class TickClock(CpuClock):
    """Each mark one second after the one before, whatever the CPU's speed or load: every
    interval between two marks lasts 1 s."""

    def mark(self) -> None:
        self.marks.append(float(len(self.marks)))


def test_component_times_add_up_to_end_to_end(measured: SpeedProfile) -> None:
    """Every interval between two marks of the hooked forward goes to the components but the
    first and the last (outside the root module's hooks): exact with a clock that ticks once a
    mark. A wall clock makes those two intervals a share of the forward that depends on the
    CPU (main held it to 10%), so the real profile is held to what is exact on any CPU."""
    model, example = small_vit().eval(), torch.randn(BATCH, 3, 32, 32)
    plan = plan_intervals(model, image_inputs(example.to("meta"))).plan
    ticks = time_forward(model, example, plan, TickClock(), warmup=0, iters=4)
    # one mark per module event and one either side of the forward: events + 1 intervals
    assert ticks.hooked_latency == len(plan.events) + 1
    assert ticks.attributed == pytest.approx(len(plan.events) - 1)
    t = measured.timings
    assert 0 < t.attributed <= t.hooked_latency  # the same iterations, two intervals fewer
    assert sum(t.blocks.values()) < t.attributed  # blocks are part of the whole
    assert len(t.latencies) == len(t.hooked_latencies) == 8


def test_achieved_flops_are_counted_flops_over_time(measured: SpeedProfile) -> None:
    rows = {r.component: r for r in measured.rows()}
    # MLP MACs per image: 2 layers * 17 tokens * 2 linears * 64 * 128 = 557_056
    assert rows[C.MLP].flops == 2 * BATCH * 557_056
    # head: one linear 64 -> 10 on the class token
    assert rows[C.HEAD].flops == 2 * BATCH * 64 * 10
    counted = analyze(small_vit(), batch_size=BATCH).components
    assert {c: rows[c].flops for c in COMPONENTS} == {c: counted[c].flops for c in COMPONENTS}


def test_row_figures_from_counts_seconds_bytes_and_peak() -> None:
    peak = Peak(flops_per_s=8_000.0, bytes_per_s=None, source="given")
    row = Row(C.MLP, seconds=0.5, counts=Counts(macs=1_000, vector_flops=200), bytes_moved=550,
              param_bytes=0, activation_bytes=0, saved_bytes=None, estimated=False, peak=peak)
    assert row.flops == 2_000  # 2 x 1_000 MACs
    assert row.achieved == 4_000.0  # 2_000 FLOPs / 0.5 s
    assert row.share_of_peak == 0.5  # 4_000 / 8_000 FLOP/s
    assert row.intensity == 4.0  # (2_000 FLOPs + 200 vector FLOPs) / 550 bytes
    idle = dataclasses.replace(row, seconds=0.0, bytes_moved=0)
    assert (idle.achieved, idle.share_of_peak, idle.intensity) == (None, None, None)


def test_a_component_above_the_peak_is_noted_never_shown_bare() -> None:
    peak = Peak(flops_per_s=8_000.0, bytes_per_s=None, source="measured: best of 5")
    row = Row(C.MLP, seconds=0.5, counts=Counts(macs=1_000), bytes_moved=0, param_bytes=0,
              activation_bytes=0, saved_bytes=None, estimated=False, peak=peak)
    assert above_peak_note([row], peak) is None  # 2_000 FLOPs / 0.5 s = 50% of 8_000
    fast = dataclasses.replace(row, component=C.ATTN_CORE, seconds=0.125)
    # 2_000 FLOPs / 0.125 s = 16_000 FLOP/s = 200% of 8_000
    note = above_peak_note([row, fast], peak)
    assert note is not None and note.startswith("above 100% of peak (attn_core 200%)")
    assert "measured: best of 5" in note and "--peak-tflops" in note


def test_fused_attention_time_is_flagged_estimated(measured: SpeedProfile) -> None:
    # nn.MultiheadAttention runs qkv, core and projection inside one module: their times are
    # estimates, every other component is timed by its own modules.
    fused = {C.ATTN_QKV, C.ATTN_CORE, C.ATTN_PROJ}
    assert measured.timings.estimated == fused
    assert {r.component for r in measured.rows() if r.estimated} == fused


def test_interquartile_mean_drops_the_outer_quarters() -> None:
    values = [5.0, 1.0, 100.0, 2.0, 3.0, 4.0, 0.0, 6.0]  # sorted: 0 1 2 3 4 5 6 100
    assert sorted(values[i] for i in middle_half(values)) == [2.0, 3.0, 4.0, 5.0]
    assert interquartile_mean(values) == (2 + 3 + 4 + 5) / 4
    assert interquartile_mean([1.0, 2.0, 9.0]) == 4.0  # below four: all of them


def test_overhead_is_the_median_paired_difference() -> None:
    t = Timings(latency=2.0, hooked_latency=0.0, latencies=(2.0, 2.0, 3.0),
                hooked_latencies=(2.1, 2.0, 9.0), cells={}, components={}, blocks={},
                estimated=frozenset())
    # paired differences 0.1, 0.0, 6.0: median 0.1, over the 2.0 s latency
    assert t.overhead == pytest.approx(0.1 / 2.0)


# ------------------------------------------------------------------------------ bytes


def test_intensity_from_bytes_read_and_written(measured: SpeedProfile) -> None:
    head = next(r for r in measured.rows() if r.component is C.HEAD)
    # addmm(bias, x[:, 0], W^T): reads 4*64 + 64*10 + 10 floats, writes 4*10 floats
    assert head.bytes_moved == 4 * (BATCH * 64 + 64 * 10 + 10 + BATCH * 10)  # = 3_784
    # 2 x 4*64*10 = 5_120 FLOPs of the product and 4*10 = 40 vector FLOPs of the bias add
    assert head.intensity == (2 * BATCH * 64 * 10 + BATCH * 10) / 3_784


def test_bytes_follow_the_dtype() -> None:
    model = small_vit().eval()
    x = torch.zeros(BATCH, 3, 32, 32)
    fp32 = plan_intervals(model, image_inputs(x.to("meta"))).run.ops
    bf16 = plan_intervals(model.to(torch.bfloat16),
                          image_inputs(x.to("meta", torch.bfloat16))).run.ops
    assert [op.macs for op in fp32] == [op.macs for op in bf16]
    # Half the bytes, except that the 5 layer norms keep their mean and rstd (4 x 17 values
    # each) in float32: 2 extra bytes per value in bfloat16.
    stats = 5 * 2 * BATCH * TOKENS
    assert sum(op.bytes_written for op in bf16) == sum(op.bytes_written for op in fp32) // 2 + (
        2 * stats
    )


# ------------------------------------------------------------------------------ memory


def test_parameter_memory_by_dtype() -> None:
    model = small_vit()
    assert sum(p.numel() for p in model.parameters()) == SMALL_PARAMS
    assert param_bytes_by_dtype(model) == {"float32": 4 * SMALL_PARAMS}
    model.heads.to(torch.bfloat16)
    assert param_bytes_by_dtype(model) == {"float32": 4 * (SMALL_PARAMS - 650), "bfloat16": 2 * 650}
    model.to(torch.float16)
    by_component = param_bytes_by_component(model, analyze(model).params)
    assert by_component[C.MLP] == 2 * 2 * 16_576  # fp16 * two layers
    assert sum(by_component.values()) == 2 * SMALL_PARAMS


def test_a_fused_projection_is_shared_out_in_parameter_memory_and_timed_intervals() -> None:
    """tests/models_styles.py's FusedViT: ``mix`` (D = 32 -> 3 x 32 + 64, with a bias) is
    attn_qkv for its q/k/v rows and mlp for the rest, in parameter bytes and in the interval
    it runs in; the intervals after it still hold their own records (a share is a record more
    than the run counted)."""
    with torch.device("meta"):
        model = FusedViT()
    planned = plan_intervals(model, image_inputs(torch.zeros(1, 3, 16, 16, device="meta")),
                             recognizer="graph")
    by_component = param_bytes_by_component(model, planned.found.params)
    assert by_component[C.ATTN_QKV] == 4 * 2 * (96 * 32 + 96)  # float32, two blocks: 25_344
    assert sum(by_component.values()) == 4 * sum(p.numel() for p in model.parameters())
    shares = dict(zip(planned.plan.events, planned.plan.shares, strict=False))
    # work = 2 x MACs + vector FLOPs: q/k/v 2 x 16 x 32 x 96 + 16 x 96 = 99_840, the rest
    # 2 x 16 x 32 x 64 + 16 x 64 = 66_560, of 166_400: 0.6 and 0.4
    assert shares[("enter", "blocks.0.mix")] == (((C.ATTN_QKV, 0), 0.6), ((C.MLP, 0), 0.4))
    assert shares[("enter", "blocks.1.out")] == (((C.ATTN_PROJ, 1), 1.0),)
    assert shares[("enter", "blocks.1.down")] == (((C.MLP, 1), 1.0),)


def test_inference_activations_are_bytes_written() -> None:
    written = activation_bytes(analyze("vit_b_16").ops)
    # the qkv projection writes 197 tokens x 2304 floats in each of 12 blocks
    assert written[C.ATTN_QKV] == 12 * 197 * 2304 * 4  # = 21_786_624
    # each of 2 * 12 + 1 layer norms writes 197 x 768 floats, plus mean and rstd (197 each)
    assert written[C.NORM] == 25 * (197 * 768 + 2 * 197) * 4


def test_saved_for_backward_keeps_storages_not_parameters() -> None:
    model = small_vit()
    work = make_workload(model, InputRequest(batch_size=BATCH, image_size=32))
    saved = saved_for_backward(work, recognize(model), MemoryTarget.CPU)
    # The head saves its input x[:, 0], a view that keeps the whole final LayerNorm output
    # (4 x 17 x 64 floats) alive: under the norm, the op that made it; its weight is a
    # parameter and not counted, so the head keeps nothing of its own.
    assert saved[C.HEAD] == 0
    assert saved[C.NORM] >= BATCH * TOKENS * 64 * 4  # = 17_408
    # The patch convolution saves the image (the input, under the first op's component) for
    # its weight gradient: 4 x 3 x 32 x 32 floats.
    assert saved[C.PATCH_EMBED] == BATCH * 3 * 32 * 32 * 4  # = 49_152
    assert saved[C.OTHER] == 0
    assert model.training and all(p.grad is None for p in model.parameters())


def test_memory_in_the_profile(measured: SpeedProfile) -> None:
    assert measured.memory.params_by_dtype == {"float32": 4 * SMALL_PARAMS}
    assert measured.memory.peak_device is None  # the CPU allocator reports no peak
    rows = {r.component: r for r in measured.rows()}
    assert rows[C.PATCH_EMBED].saved_bytes == BATCH * 3 * 32 * 32 * 4  # the image: 49_152


def test_the_profile_reads_the_memory_steps_saved_for_backward(measured: SpeedProfile) -> None:
    # one saved-for-backward: the profile's column is the memory step's activations, per
    # component, on the profiled device's target
    model = small_vit()
    estimate = memory(model, InputRequest(batch_size=BATCH, image_size=32), optimizer="sgd",
                      target="cpu")
    rows = {r.component: r.saved_bytes for r in measured.rows()}
    assert rows == {c: estimate.by_component[c].activations for c in rows}


# ------------------------------------------------------------------------------ peak, figure


def test_peak_measured_or_given() -> None:
    assert matmul_flops("cpu", torch.float32, size=64, repeats=2) > 0
    given = measure_peak("cpu", torch.float32, given_tflops=2.5)
    assert given.flops_per_s == 2.5e12 and "given" in given.source
    assert given.ridge == given.flops_per_s / given.bytes_per_s


def test_roofline_png(measured: SpeedProfile, tmp_path: Path) -> None:
    found = {p.component for p in points(measured)}
    assert {C.MLP, C.NORM, C.HEAD} <= found and C.OTHER not in found
    path = write_roofline(measured, tmp_path / "roofline.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


class DataDependent(VisionTransformer):
    """Reads a value of its input: cannot run on meta."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.abs().sum().item() < 0:
            raise AssertionError("unreachable")
        return super().forward(x)


def test_data_dependent_model_is_counted_on_the_device() -> None:
    torch.manual_seed(0)
    model = DataDependent(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=64,
                          mlp_dim=128, num_classes=10)
    result = profile_model(model, InputRequest(batch_size=BATCH), warmup=0, iters=2, threads=1,
                           peak_tflops=0.05)
    mlp = next(r for r in result.rows() if r.component is C.MLP)
    assert mlp.flops == 2 * BATCH * 557_056  # as the torchvision ViT above
    assert result.memory.saved is None and mlp.saved_bytes is None
    # the fallback is recorded, not silent (the same rule and wording as analyze's)
    assert result.notes == (
        "meta device failed (RuntimeError: Tensor.item() cannot be called on meta tensors); "
        "counted on cpu with real tensors",
        "memory saved for backward not measured: DataDependent: a training step (forward in "
        "train mode, then backward) could not run on fake CPU tensors (meta storage): "
        "DataDependentOutputException: aten._local_scalar_dense.default (input of shape "
        "4x3x32x32)",
    )


class WallClockEvent:
    """Stands in for ``torch.cuda.Event`` on a machine without a GPU: ``record`` reads the wall
    clock, ``elapsed_time`` answers in milliseconds as CUDA does. It lets the CUDA clock's own
    logic (events reused across runs, one synchronize when read, ms -> s) run on the CPU."""

    def __init__(self, enable_timing: bool = False) -> None:
        assert enable_timing, "timing events must be created with enable_timing=True"
        self.at: float | None = None

    def record(self) -> None:
        self.at = time.perf_counter()

    def elapsed_time(self, end: WallClockEvent) -> float:
        assert self.at is not None and end.at is not None, "event read before it was recorded"
        return (end.at - self.at) * 1e3


@pytest.fixture
def wall_clock_cuda_events(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Patch ``torch.cuda.Event`` and ``torch.cuda.synchronize``; returns the sync calls."""
    synchronized: list[int] = []
    monkeypatch.setattr(torch.cuda, "Event", WallClockEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: synchronized.append(1))
    return synchronized


def test_cuda_clock_with_wall_clock_events(wall_clock_cuda_events: list[int]) -> None:
    model, example = small_vit().eval(), torch.randn(BATCH, 3, 32, 32)
    plan = plan_intervals(model, image_inputs(example.to("meta"))).plan
    clock = CudaClock()
    timings = time_forward(model, example, plan, clock, warmup=1, iters=4)
    assert 0 < timings.attributed <= timings.hooked_latency
    # one mark per module event plus the two around the forward, events reused across runs
    assert len(clock.events) == len(plan.events) + 2
    # one synchronize per forward read: 1 warm-up + 4 iterations x (hooked + plain)
    assert len(wall_clock_cuda_events) == 1 + 4 * 2


def test_cuda_peak_timing_with_wall_clock_events(wall_clock_cuda_events: list[int]) -> None:
    seconds = best_seconds(lambda: time.sleep(0.002), "cuda", repeats=3)
    assert 0.002 <= seconds < 1.0
    assert len(wall_clock_cuda_events) == 3  # one synchronize per timed repetition


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_profile() -> None:
    result = profile_model(small_vit().to("cuda", torch.bfloat16),
                           InputRequest(dtype=torch.bfloat16, batch_size=64), device="cuda",
                           warmup=2, iters=8)
    assert result.timings.attributed == pytest.approx(result.timings.hooked_latency, rel=0.10)
    assert result.memory.peak_device and result.memory.peak_device > 0


# ------------------------------------------------------------------------------ training


@pytest.fixture(scope="module")
def vit_b_16_train():
    return analyze("vit_b_16", mode="train")


def test_train_matmul_backward_is_two_matmuls(vit_b_16_train) -> None:
    phases = phase_components(vit_b_16_train.ops)
    forward = {
        C.PATCH_EMBED: 196 * 768 * (3 * 16 * 16),  # = 115_605_504
        C.ATTN_QKV: 12 * 197 * 768 * 3 * 768,  # = 4_183_031_808
        C.ATTN_CORE: 12 * 2 * 12 * 197 * 197 * 64,  # QK^T and AV per head = 715_327_488
        C.ATTN_PROJ: 12 * 197 * 768 * 768,  # = 1_394_343_936
        C.MLP: 12 * 2 * 197 * 768 * 3072,  # = 11_154_751_488
        C.HEAD: 768 * 1000,  # = 768_000
    }
    # Backward of Y = X W: dX = dY W^T and dW = X^T dY, two products of the forward's size.
    # The patch convolution's input (the image) needs no gradient: only dW, one product.
    backward = {c: 2 * macs for c, macs in forward.items()} | {C.PATCH_EMBED: 115_605_504}
    assert {c: phases[c].forward.macs for c in forward} == forward
    assert {c: phases[c].backward.macs for c in forward} == backward
    assert phases[C.PATCH_EMBED].macs_ratio == 1.0 and phases[C.MLP].macs_ratio == 2.0
    assert {op.op for op in vit_b_16_train.ops if op.phase == "backward" and op.macs} == {
        "aten.mm", "aten.bmm", "aten.convolution_backward"
    }
    totals = phase_totals(vit_b_16_train.ops)
    assert totals.backward.macs == 2 * totals.forward.macs - 115_605_504
    assert vit_b_16_train.totals.macs == totals.forward.macs + totals.backward.macs


def test_train_norm_backward_vector_flops(vit_b_16_train) -> None:
    # 25 layer norms over 197 x 768: input gradient 8 + weight 1, weight gradient 2, bias 1.
    # Plus 2 gradient accumulations of the residual stream per block, run by the layer norm's
    # node (its gradient completes the sum): 24 adds of 197 x 768.
    expected = 25 * 197 * 768 * (8 + 1 + 2 + 1) + 24 * 197 * 768  # = 49_019_904
    assert phase_components(vit_b_16_train.ops)[C.NORM].backward.vector_flops == expected


def test_train_counts_match_on_meta_and_cpu() -> None:
    """On the CPU attention runs a flash kernel (one backward op); on meta, its math
    decomposition (bmm, softmax backward, scaling): the formulas make them cost the same."""
    model = small_vit()
    meta = analyze(model, mode="train")
    cpu = analyze(model, mode="train", device="cpu")
    cpu_ops = {op.op for op in cpu.ops if op.phase == "backward"}
    assert "aten._scaled_dot_product_flash_attention_for_cpu_backward" in cpu_ops
    assert phase_components(meta.ops) == phase_components(cpu.ops)
    assert all(p.grad is None for p in model.parameters()) and model.training


def test_unknown_mode_is_a_user_error() -> None:
    with pytest.raises(UserError, match="unknown mode"):
        analyze("vit_b_16", mode="backward")


# ------------------------------------------------------------------------------ CLI


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


FAST = ["--warmup", "0", "--iters", "2", "--threads", "1", "--peak-tflops", "0.05",
        "--batch-size", "2", "--no-progress"]


def test_cli_profile_json(small_file: Path, capsys) -> None:
    code, out, err = run(["profile", f"{small_file}:small", *FAST, "--format", "json"], capsys)
    data = json.loads(out)
    assert code == 0 and err == ""
    assert set(data["components"]) == {c.value for c in COMPONENTS}
    assert data["input_shape"] == [2, 3, 32, 32] and data["dtype"] == "float32"
    assert data["memory"]["params_by_dtype"] == {"float32": 4 * SMALL_PARAMS}
    assert math.isclose(data["throughput_images_per_s"], 2 / data["latency_s"])
    assert [b["index"] for b in data["blocks"]] == [0, 1]


def test_cli_profile_table_and_roofline(small_file: Path, tmp_path: Path, capsys) -> None:
    png = tmp_path / "roof.png"
    code, out, _ = run(["profile", f"{small_file}:small", *FAST, "--roofline", str(png)], capsys)
    assert code == 0 and png.is_file()
    assert "hooks" in out and "overhead" in out and "images/s" in out and "attn_core *" in out
    # FAST gives --peak-tflops: the peak is said to be given, and nothing calls it measured
    assert "compute given (--peak-tflops)" in out and "measured matmul peak" not in out


@pytest.mark.parametrize("fmt", choices("profile"))
@pytest.mark.parametrize("factory", ["small", "cnn"])
def test_cli_profile_every_kind_of_model_in_every_format(small_file: Path, factory: str,
                                                         fmt: str, capsys) -> None:
    """A ViT and a CNN (no transformer blocks: no block table, and the header says so)."""
    code, out, _ = run(["profile", f"{small_file}:{factory}", *FAST, "--image-size", "32",
                        "--format", fmt], capsys)
    assert code == 0
    if fmt == "json":
        data = json.loads(out)
        assert set(data["components"]) == {c.value for c in COMPONENTS}
        assert len(data["blocks"]) == (2 if factory == "small" else 0)
        return
    lines = out.splitlines()
    assert any(line.split()[:1] == ["total"] or line.startswith("| total |") for line in lines)
    assert "1 thread;" in out  # FAST runs one thread
    no_blocks = "blocks: no transformer blocks recognized, so no per-block table" in out
    has_block_table = any(line.startswith(("block ", "| block |")) for line in lines)
    assert (no_blocks, has_block_table) == ((False, True) if factory == "small" else (True, False))


def test_speed_profile_repr_and_notebook_displays(measured: SpeedProfile) -> None:
    text = repr(measured)
    assert len(text) < 2_500 and "Timings(" not in text
    assert text.startswith("model: VisionTransformer") and "latency:" in text
    assert "attn_core *" in text and text.splitlines()[-1].startswith("total")
    assert "| total |" in measured._repr_markdown_()
    html = measured._repr_html_()
    assert html.count("<table>") == 2 and "<td style=\"text-align: left\">attn_core *</td>" in html


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present")
def test_cli_profile_cuda_without_gpu(capsys) -> None:
    code, out, err = run(["profile", "vit_b_16", "--device", "cuda"], capsys)
    assert code == 2 and out == ""
    assert err.startswith("vitprof: error: no CUDA device") and err.count("\n") == 1


def test_cli_profile_unknown_model(capsys) -> None:
    code, _, err = run(["profile", "vit_x_99", *FAST], capsys)
    assert code == 2 and err.startswith("vitprof: error: unknown model") and err.count("\n") == 1


def test_cli_analyze_train_json(capsys) -> None:
    code, out, _ = run(["analyze", "vit_b_32", "--mode", "train", "--format", "json"], capsys)
    data = json.loads(out)
    assert code == 0 and data["mode"] == "train"
    assert data["training"]["components"]["mlp"]["macs_ratio"] == 2.0
    assert data["training"]["components"]["patch_embed"]["macs_ratio"] == 1.0
    forward = data["training"]["total"]["forward"]["macs"]
    assert data["totals"]["macs"] == forward + data["training"]["total"]["backward"]["macs"]


def test_cli_analyze_train_table(capsys) -> None:
    code, out, _ = run(["analyze", "vit_b_32", "--mode", "train"], capsys)
    assert code == 0 and "bwd/fwd MACs" in out and "mode: train" in out


@pytest.mark.parametrize("recognizer", ["graph", "tables"])
def test_profile_attributes_with_the_breakdown_analyze_gives(recognizer: str, capsys) -> None:
    # ViT-22B-style parallel blocks (tests/models_styles.py): no table detects them, so the
    # name-based recognizer and the graph split them differently; profile follows the one asked
    source = Path(__file__).with_name("models_styles.py")
    code, out, err = run(["profile", f"{source}:ParallelViT", "--image-size", "16",
                          "--recognizer", recognizer, *FAST, "--format", "json"], capsys)
    assert code == 0, err
    data = json.loads(out)
    from models_styles import ParallelViT

    counted = analyze(ParallelViT(), image_size=16, batch_size=2, recognizer=recognizer)
    assert data["family"] == counted.recognizer
    assert {c: data["components"][c.value]["macs"] for c in COMPONENTS} == {
        c: counted.components[c].macs for c in COMPONENTS}
    # float32: 4 bytes per parameter, in the component the breakdown gives it
    assert {c: data["components"][c.value]["param_bytes"] for c in COMPONENTS} == {
        c: 4 * counted.components[c].params for c in COMPONENTS}
    assert [b["index"] for b in data["blocks"]] == [b.index for b in counted.blocks]
    # no table detects this model, so "tables" falls back to the graph (no recognizer reads
    # names): both place everything in the two blocks
    placed = (data["components"]["other"]["macs"] == 0, len(data["blocks"]) == 2)
    assert placed == (True, True)
