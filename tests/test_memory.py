"""``vitprof memory`` / ``vitprof.memory``: a training step's memory predicted on fake tensors,
held to a real CPU step measured by :mod:`vitprof.measure.memory.measured` (the profiler's
allocator events, no code shared with the predictor), and its command line.

The acceptance rows (DeiT-Ti and DeiT-S at 224, batch 8 and 32, float32 and bfloat16 autocast,
with and without block checkpointing; AdamW, ``--target cpu``, the CPU's fused attention) are
``slow`` (DeiT-Ti at batch 8) or ``exhaustive``; their twin, a 2-block ViT of width 64 on 32 x
32 images, runs in every run.

The prediction is held to the measured peak without the kernels' scratch (oneDNN's workspaces
and reorders, im2col buffers: what a kernel holds inside its op beyond the op's inputs and
outputs), which depends on the CPU's instruction set and thread count and which the measurement
itself finds on the machine running the test (``MeasuredMemory.scratch_bytes``); what is left
unmodelled is the same on every CPU and written out below (:func:`_unexplained`). A fixed
percentage would be both too wide (a prediction missing an activation passes) and too narrow
(a CPU whose bfloat16 matmuls reorder their weights fails).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import torch
from timm.models.vision_transformer import VisionTransformer

from vitprof import MemoryEstimate, memory
from vitprof.cli.main import main
from vitprof.core.errors import UserError
from vitprof.core.vocab import AttentionPath, MemoryTarget, Optimizer
from vitprof.measure.memory.fit import largest_batch
from vitprof.measure.memory.measured import (
    MeasuredMemory,
    measure_training_memory,
    repeated_blocks,
)
from vitprof.workload import InputRequest

# What the prediction leaves out besides the kernels' scratch: allocations made outside any op,
# alike on every CPU. torch.utils.checkpoint keeps the CPU generator's state
# (torch.get_rng_state()) from a checkpointed block's forward to its recompute, one per block at
# most; Python's `tensor / number` (Adam's division by its bias correction) wraps the number in a
# 0-dim float64 tensor before it dispatches, one at a time.
RNG_STATE_BYTES = torch.get_rng_state().nbytes
WRAPPED_NUMBER_BYTES = torch.tensor(0.0, dtype=torch.float64).nbytes  # 8

# width 64, 2 blocks of 2 heads, 32 x 32 images in 8 x 8 patches: 16 patches + a class token
TINY = dict(img_size=32, patch_size=8, embed_dim=64, depth=2, num_heads=2, num_classes=10)
TINY_PY = '''
from timm.models.vision_transformer import VisionTransformer


def tiny():
    return VisionTransformer(img_size=32, patch_size=8, embed_dim=64, depth=2, num_heads=2,
                             num_classes=10)
'''
# parameters of TINY: patch embedding 3*8*8*64 + 64; class token 64; positions 17*64;
# per block: 2 norms 4*64, qkv 64*192 + 192, proj 64*64 + 64, fc1 64*256 + 256, fc2 256*64 + 64;
# final norm 2*64; head 64*10 + 10
TINY_BLOCK = 4 * 64 + 64 * 192 + 192 + 64 * 64 + 64 + 64 * 256 + 256 + 256 * 64 + 64
TINY_PARAMS = (3 * 8 * 8 * 64 + 64) + 64 + 17 * 64 + 2 * TINY_BLOCK + 2 * 64 + 64 * 10 + 10
TINY_TENSORS = 4 + 2 * 12 + 2 + 2  # patch w, b, cls, pos; 12 per block; norm w, b; head w, b


def tiny() -> VisionTransformer:
    torch.manual_seed(0)
    return VisionTransformer(**TINY)  # type: ignore[arg-type]


def _unexplained(predicted: int, measured: MeasuredMemory, checkpointed_blocks: int = 0) -> int:
    """Bytes by which the ``predicted`` peak lies outside what the measurement allows: 0 when it
    is at most the measured peak between ops (the peak less the kernels' scratch, measured on
    this CPU) and falls short of it by no more than the unmodelled allocations outside ops
    (a generator state per checkpointed block, one wrapped number)."""
    between = measured.peak_between_ops_bytes
    unmodelled = RNG_STATE_BYTES * checkpointed_blocks + WRAPPED_NUMBER_BYTES
    return max(predicted - between, between - unmodelled - predicted, 0)


def _compare(model: torch.nn.Module, image: int, batch: int, amp: str | None,
             checkpoint: str) -> None:
    predicted = memory(model, InputRequest(batch_size=batch, image_size=image), target="cpu",
                       attention="flash", amp=amp, checkpoint=checkpoint)
    measured = measure_training_memory(model, torch.randn(batch, 3, image, image), amp=amp,
                                       checkpoint=checkpoint)
    assert predicted.saved_bytes == measured.saved_bytes
    blocks = len(repeated_blocks(model)) if checkpoint == "blocks" else 0
    assert _unexplained(predicted.peak_bytes, measured, blocks) == 0, (
        predicted.peak_bytes, measured)


@pytest.mark.parametrize("checkpoint", ["none", "blocks"])
@pytest.mark.parametrize("amp", [None, "bfloat16"])
def test_twin_matches_a_real_cpu_step(amp: str | None, checkpoint: str) -> None:
    _compare(tiny(), 32, 8, amp, checkpoint)


def _deit(name: str) -> torch.nn.Module:
    import timm

    torch.manual_seed(0)
    return timm.create_model(name, pretrained=False)


ROWS = [
    pytest.param(name, batch, amp, checkpoint, id=f"{name[:10]}-{batch}-{amp}-{checkpoint}",
                 marks=pytest.mark.slow if (name, batch, amp, checkpoint) == (
                     "deit_tiny_patch16_224", 8, None, "none") else pytest.mark.exhaustive)
    for name in ("deit_tiny_patch16_224", "deit_small_patch16_224")
    for batch in (8, 32) for amp in (None, "bfloat16") for checkpoint in ("none", "blocks")
]


@pytest.mark.parametrize(("name", "batch", "amp", "checkpoint"), ROWS)
def test_deit_matches_a_real_cpu_step(name: str, batch: int, amp: str | None,
                                      checkpoint: str) -> None:
    _compare(_deit(name), 224, batch, amp, checkpoint)


def test_a_model_with_buffers_is_predicted() -> None:
    """Buffers stand in as fake tensors, which hold no values: the run's model-state guard
    used to compare them after the step (torch.equal: DataDependentOutputException on fake
    tensors), so any model with a buffer (Swin's position index, a BatchNorm) failed."""
    def model() -> torch.nn.Module:
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 4, 4), torch.nn.BatchNorm2d(8),
                                   torch.nn.Flatten(), torch.nn.Linear(8 * 8 * 8, 10))

    built = model()
    running = built[1].running_mean.clone()
    predicted = memory(built, InputRequest(batch_size=4, image_size=32), target="cpu")
    assert torch.equal(built[1].running_mean, running)  # the real buffer is left alone
    measured = measure_training_memory(model(), torch.randn(4, 3, 32, 32))
    assert _unexplained(predicted.peak_bytes, measured) == 0, (predicted.peak_bytes, measured)


SCRATCH_BYTES = 4 * 2**20  # above the twin's peak at batch 8 (2.8 MB): the step's peak is in it


@torch.library.custom_op("vitprof_tests::add_with_scratch", mutates_args=())
def add_with_scratch(x: torch.Tensor) -> torch.Tensor:
    """``x + 1``, by a kernel that fills a scratch buffer of :data:`SCRATCH_BYTES` first and
    frees it before it returns, as oneDNN's reorders do: no fake run can see it."""
    scratch = torch.ones(SCRATCH_BYTES, dtype=torch.uint8)
    return x + scratch[0]


@add_with_scratch.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


class _TinyBehindScratch(torch.nn.Module):
    """The twin, its image first through :func:`add_with_scratch` (which needs no gradient)."""

    def __init__(self) -> None:
        super().__init__()
        self.vit = tiny()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.vit(add_with_scratch(x))


def test_a_kernels_scratch_is_measured_and_a_wrong_prediction_is_not_explained_by_it() -> None:
    """A kernel's scratch lifts the measured peak where no prediction can see it, as oneDNN's do
    on CPUs whose kernels reorder (bfloat16 -3.2% and a conv+BatchNorm -5.0% on a Zen 4 against
    a fixed 3%): the measurement finds it, inside its op, and the prediction is held to the peak
    without it. A prediction one sample short of the step is still outside."""
    predicted = memory(_TinyBehindScratch(), InputRequest(batch_size=8, image_size=32),
                       target="cpu", attention="flash")
    torch.manual_seed(0)
    measured = measure_training_memory(_TinyBehindScratch(), torch.randn(8, 3, 32, 32))
    # the peak is inside the op: the scratch, beside what is alive there (up to the peak
    # between ops), is what lifts it
    assert 0 < measured.scratch_bytes <= SCRATCH_BYTES
    assert measured.peak_bytes - predicted.peak_bytes > 0.03 * measured.peak_bytes
    assert _unexplained(predicted.peak_bytes, measured) == 0, (predicted.peak_bytes, measured)
    # one sample short: 7 images' activations, the error of a prediction that drops one
    short = memory(_TinyBehindScratch(), InputRequest(batch_size=7, image_size=32), target="cpu",
                   attention="flash")
    assert _unexplained(short.peak_bytes, measured) > 0


@pytest.fixture(scope="module")
def tiny_estimate() -> MemoryEstimate:
    return memory(tiny(), InputRequest(batch_size=2), target="cpu", attention="flash")


def test_states_and_gradients_are_the_optimizers(tiny_estimate: MemoryEstimate) -> None:
    total = tiny_estimate.total
    assert total.params == TINY_PARAMS * 4  # float32
    assert total.grads == TINY_PARAMS * 4
    # adamw: exp_avg and exp_avg_sq per element, and one float32 step per tensor on the CPU
    assert total.optimizer_state == 2 * TINY_PARAMS * 4 + 4 * TINY_TENSORS
    assert tiny_estimate.peak_bytes >= 4 * TINY_PARAMS * 4


@pytest.mark.parametrize(("optimizer", "per_element", "steps"),
                         [("sgd", 0, 0), ("sgd-momentum", 1, 0), ("adam", 2, 1)])
def test_optimizer_state_per_element(optimizer: str, per_element: int, steps: int) -> None:
    found = memory(tiny(), InputRequest(batch_size=1), target="cpu", optimizer=optimizer)
    # momentum: one buffer per element; adam: two moments per element and a float32 step per
    # tensor (on the CPU: CUDA keeps the steps on the host)
    assert found.total.optimizer_state == per_element * TINY_PARAMS * 4 + steps * 4 * TINY_TENSORS


def test_timeline_adds_up(tiny_estimate: MemoryEstimate) -> None:
    events = tiny_estimate.timeline
    assert [e.index for e in events] == list(range(len(events)))
    assert {e.phase for e in events} == {"forward", "backward", "optimizer"}
    assert max(e.total for e in events) == tiny_estimate.peak_bytes
    assert events[tiny_estimate.peak_index].total == tiny_estimate.peak_bytes
    # parameters are alive throughout; gradients appear in the backward and stay
    assert {e.live["parameters"] for e in events} == {TINY_PARAMS * 4}
    assert events[0].live["gradients"] == 0
    assert events[-1].live["gradients"] == TINY_PARAMS * 4
    assert sum(v.activations for v in tiny_estimate.by_component.values()) \
        == tiny_estimate.saved_bytes


def test_a_backward_op_belongs_to_the_forward_op_whose_node_runs_it(
        tiny_estimate: MemoryEstimate) -> None:
    """On fake tensors as on meta: per component and block, the backward's MACs of the step
    equal those of ``analyze(mode="train")`` (on meta), and no backward op of the timeline
    falls back to ``other`` (a fake tensor's ``prim.device``, asked by autograd before it set
    the previous output's node, used to drop every forward node: the backward read ``other``)."""
    from collections import Counter

    from vitprof import analyze
    from vitprof.measure.memory.estimate import step_settings
    from vitprof.measure.memory.settings import MemorySettings
    from vitprof.measure.memory.step import run_step
    from vitprof.recognize.placement import place
    from vitprof.recognize.tables import recognize
    from vitprof.workload import make_workload

    def backward(ops) -> Counter:
        found: Counter = Counter()
        for op in ops:
            if op.phase == "backward":
                found[str(op.component), op.block] += op.macs
        return found

    work = make_workload(tiny(), batch_size=2)
    settings = step_settings(MemorySettings(Optimizer.ADAMW, target=MemoryTarget.CPU,
                                            attention=AttentionPath.FLASH))
    mapping = recognize(work.module, work.rules)
    step = run_step(work, mapping, settings, 2)
    on_meta = backward(analyze(tiny(), mode="train", batch_size=2).ops)
    placed = place(step.run.ops, step.run.whereabouts, mapping)  # the count places nothing
    assert backward(placed) == on_meta and on_meta[("attn_core", 1)] > 0
    assert "other" not in {e.component for e in tiny_estimate.timeline if e.phase == "backward"}


def test_math_attention_keeps_the_scores() -> None:
    wide = VisionTransformer(**{**TINY, "img_size": 64})  # type: ignore[arg-type]
    fused = memory(wide, InputRequest(batch_size=2), target="cpu", attention="flash")
    scores = memory(wide, InputRequest(batch_size=2), target="cpu", attention="math")
    # 64 / 8 = 8 x 8 patches + the class token: 65 tokens. Per block, the math path keeps the
    # softmax (batch 2 x 2 heads x 65 x 65 x 4 bytes = 67,600) where the fused kernel keeps its
    # output (2 x 2 x 65 x 32 x 4 = 33,280) and a log-sum-exp (2 x 2 x 65 x 4 = 1,040)
    per_block = 2 * 2 * 65 * 65 * 4 - 2 * 2 * 65 * 32 * 4 - 2 * 2 * 65 * 4
    assert scores.saved_bytes - fused.saved_bytes >= 2 * per_block


def test_cuda_rounds_every_allocation() -> None:
    cuda = memory(tiny(), InputRequest(batch_size=2), target="cuda", attention="efficient")
    assert cuda.peak_bytes % 512 == 0
    assert all(v % 512 == 0 for v in cuda.timeline[cuda.peak_index].live.values())


def test_checkpointing_saves_less(tiny_estimate: MemoryEstimate) -> None:
    blocks = memory(tiny(), InputRequest(batch_size=2), target="cpu", attention="flash",
                    checkpoint="blocks")
    assert blocks.saved_bytes < tiny_estimate.saved_bytes
    every = memory(tiny(), InputRequest(batch_size=2), target="cpu", attention="flash",
                   checkpoint="every 2")
    assert blocks.saved_bytes < every.saved_bytes < tiny_estimate.saved_bytes


def test_inference_holds_no_gradients() -> None:
    found = memory(tiny(), InputRequest(batch_size=2), target="cpu", mode="inference")
    assert found.saved_bytes == 0
    assert found.total.grads == found.total.optimizer_state == 0
    assert {e.phase for e in found.timeline} == {"forward"}


def test_fit_is_the_largest_batch_that_fits() -> None:
    start = memory(tiny(), InputRequest(batch_size=4), target="cpu", attention="flash")
    budget = start.peak_bytes * 3

    def peak(batch: int) -> int:
        return memory(tiny(), InputRequest(batch_size=batch), target="cpu",
                      attention="flash").peak_bytes

    found = memory(tiny(), InputRequest(batch_size=4), target="cpu", attention="flash", fit=budget)
    answer = found.largest_batch
    assert answer is not None and answer > 4
    assert peak(answer) <= budget < peak(answer + 1)


def test_fit_holds_against_a_measured_cpu_step() -> None:
    """The largest batch --fit finds for a budget fits in a real CPU step, measured by the
    allocator's events (measure_training_memory) without the kernels' scratch (which depends on
    the CPU and is not predicted), and the next batch does not."""
    def predicted(batch: int) -> int:
        return memory(tiny(), InputRequest(batch_size=batch), target="cpu",
                      attention="flash").peak_bytes

    def measured(batch: int) -> int:
        torch.manual_seed(0)
        step = measure_training_memory(tiny(), torch.randn(batch, 3, 32, 32))
        return step.peak_between_ops_bytes

    # halfway between the predicted peaks at batch 8 and 9 (in the backward, where the peak
    # grows with the batch): a margin of half a sample's activations either side, about 3% of
    # the peak, far above the 0.004% a prediction is off by
    budget = (predicted(8) + predicted(9)) // 2
    found = memory(tiny(), InputRequest(batch_size=2), target="cpu", attention="flash", fit=budget)
    assert found.largest_batch == 8
    assert measured(8) <= budget < measured(9)


def test_fit_solves_a_line_in_few_steps() -> None:
    calls: list[int] = []

    def peak(batch: int) -> int:  # 1,000 fixed + 300 per sample
        calls.append(batch)
        return 1_000 + 300 * batch

    class Start:
        batch_size, peak_bytes = 2, 1_600

    # (10_000 - 1_000) / 300 = 30 exactly; 31 is 10_300
    assert largest_batch(peak, 10_000, Start(), 1_000) == 30
    assert len(calls) <= 3
    with pytest.raises(UserError, match="smaller than the parameters"):
        largest_batch(peak, 999, Start(), 1_000)


@pytest.mark.slow
def test_fit_of_vit_b_16_at_80gib() -> None:
    budget = 80 * 2**30
    found = memory("vit_b_16", InputRequest(batch_size=64), optimizer="adamw", fit=budget)
    answer = found.largest_batch
    assert answer is not None
    assert memory("vit_b_16", InputRequest(batch_size=answer)).peak_bytes <= budget
    assert memory("vit_b_16", InputRequest(batch_size=answer + 1)).peak_bytes > budget


@pytest.fixture
def tiny_file(tmp_path: Path) -> str:
    (tmp_path / "tiny.py").write_text(TINY_PY)
    return f"{tmp_path / 'tiny.py'}:tiny"


def test_cli_json(tiny_file: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["memory", tiny_file, "--batch-size", "2", "--target", "cpu", "--format",
                 "json", "--fit", "1GiB"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["schema_version"] == 2
    assert isinstance(data["peak_bytes"], int) and isinstance(data["largest_batch"], int)
    assert data["fit_bytes"] == 2**30
    assert data["total"]["params"] == TINY_PARAMS * 4


def test_cli_table(tiny_file: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["memory", tiny_file, "--checkpoint", "every 1"]) == 0
    out = capsys.readouterr().out
    assert "peak: " in out and "blocks:" in out and "optimizer B" in out


def test_the_repr_of_an_estimate_is_the_table_the_command_prints(
        tiny_file: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["memory", tiny_file, "--target", "cpu"]) == 0
    printed = capsys.readouterr().out
    shown = repr(memory(tiny_file, target="cpu"))
    assert shown.startswith("model: ") and "peak: " in shown  # not the dataclass's repr
    assert printed.rstrip("\n") == shown.rstrip("\n")


def test_cli_markdown_is_the_report_section_with_its_figure(
        tiny_file: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--format markdown writes the report's section (memory_report.memory_section), linking
    the timeline figure --figure wrote, relative to the --output file's folder."""
    from vitprof.render import figures
    from vitprof.render.memory_report import memory_section, timeline_figure

    (tmp_path / "out").mkdir()
    argv = ["--batch-size", "2", "--target", "cpu", "--attention", "flash"]
    assert main(["memory", tiny_file, *argv, "--format", "markdown", "--figure",
                 str(tmp_path / "timeline.png"), "--output", str(tmp_path / "out/m.md")]) == 0
    estimate = memory(tiny(), InputRequest(batch_size=2), target="cpu", attention="flash")
    text = (tmp_path / "out/m.md").read_text()
    section = memory_section(estimate, figure="../timeline.png")
    # the model's name is the file's in the command, the class's in the API
    assert text == section.replace("VisionTransformer", tiny_file).rstrip("\n") + "\n"
    assert "](../timeline.png)" in text
    drawn = timeline_figure(dataclasses.replace(estimate, model=tiny_file))
    assert figures.read_digest(tmp_path / "timeline.png") == drawn.digest
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize(("argv", "fragment"), [
    (["--batch-size", "0"], "expected a positive integer, got 0"),
    (["--fit", "0GiB"], "expected a positive memory size"),
    (["--fit=-3GB"], "expected a positive memory size"),
    (["--fit", "1000"], "is smaller than the parameters, gradients and optimizer state alone"),
    (["--optimizer", "lion"], "invalid choice: 'lion'"),
    (["--dtype", "int8"], "invalid choice: 'int8'"),
    (["--checkpoint", "every 0"], "expected a positive integer, got 0"),
    (["--amp", "bfloat16", "--dtype", "float16"], "--amp keeps float32 master weights"),
])
def test_bad_input_is_one_line(tiny_file: str, argv: list[str], fragment: str,
                               capsys: pytest.CaptureFixture[str]) -> None:
    try:
        status = main(["memory", tiny_file, *argv])
    except SystemExit as exit_:  # argparse's usage errors exit on their own
        status = exit_.code
    assert status == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert fragment in lines[0]


@pytest.mark.parametrize(("inputs", "kwargs", "fragment"), [
    ({}, {"optimizer": "lion"}, "unknown optimizer 'lion'"),
    ({}, {"amp": "int8"}, "unknown amp dtype 'int8'"),
    ({"batch_size": 0}, {}, "batch size must be at least 1"),
    ({}, {"fit": 0}, "memory size must be at least 1"),
    ({}, {"checkpoint": "sometimes"}, "checkpoint must be none, blocks or 'every N'"),
    ({}, {"target": "tpu"}, "unknown target 'tpu'"),
])
def test_bad_api_arguments(inputs: dict[str, Any], kwargs: dict[str, object],
                           fragment: str) -> None:
    with pytest.raises(UserError, match=fragment):
        memory(tiny(), InputRequest(**inputs), **kwargs)  # type: ignore[arg-type]


def test_a_model_without_a_backward_says_what_it_tried() -> None:
    class Frozen(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(3 * 8 * 8, 2)
            self.linear.requires_grad_(False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.linear(x.flatten(1))

    with pytest.raises(UserError, match="no parameter requires a gradient"):
        memory(Frozen(), InputRequest(image_size=8))


def test_a_model_that_cannot_run_on_fake_tensors_says_what_it_tried() -> None:
    class DataDependent(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(3 * 8 * 8, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            keep = int(x.sum()) + 1  # reads a value: no fake tensor has one
            return self.linear(x.flatten(1)[:, :keep])

    with pytest.raises(UserError, match=r"a training step \(forward in train mode, then "
                                        r"backward\) could not run on fake CPU tensors"):
        memory(DataDependent(), InputRequest(image_size=8))


def _budget(tiny_file: str, limit: int, memory_table: str) -> list[object]:
    import tomllib

    from vitprof.checks.budget import parse_budgets

    text = f'''
[tiny]
model = "{tiny_file}"
batch_size = 2
max_peak_bytes = {limit}
memory = {memory_table}
'''
    return parse_budgets(tomllib.loads(text), text=text)  # type: ignore[return-value]


def test_a_budget_bounds_the_peak(tiny_file: str) -> None:
    from vitprof.checks.budget import evaluate

    peak = memory(tiny(), InputRequest(batch_size=2), target="cpu", optimizer="sgd").peak_bytes
    settings = '{ target = "cpu", optimizer = "sgd" }'
    at, below = (evaluate(b) for b in  # type: ignore[arg-type]
                 (*_budget(tiny_file, peak, settings), *_budget(tiny_file, peak - 1, settings)))
    assert at.passed and not below.passed
    assert [r.actual for r in below.failures] == [peak]


def test_a_budget_refuses_unknown_memory_settings(tiny_file: str) -> None:
    with pytest.raises(UserError, match="expected one of sgd, sgd-momentum, adam, adamw"):
        _budget(tiny_file, 1, '{ optimizer = "lion" }')
    with pytest.raises(UserError, match="unknown memory setting 'batch'"):
        _budget(tiny_file, 1, '{ batch = "2" }')
