"""The memory guard's one estimate: the peak of the tensors a run holds at once, traced on meta;
for a meta run that stopped early, a stated bound from the shapes. Its refusals are one line,
exit code 2, before anything is allocated."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from vitprof import analyze
from vitprof.cli.main import main
from vitprof.core.errors import UserError
from vitprof.count import running
from vitprof.count.liveness import Liveness
from vitprof.count.running import CountFailed, Footprint, untraced
from vitprof.count.session import count, image_inputs
from vitprof.measure.memory.measured import allocation_peaks
from vitprof.workload import make_workload

# 3 x 2 x 2 images, 12 features: a linear 12 -> 8, a ReLU, a linear 8 -> 2
WEIGHTS = (12 * 8 + 8 + 8 * 2 + 2) * 4  # 488 bytes of float32

MODELS_PY = '''
import torch
from torch import nn


class FirstOpReads(nn.Module):
    """Reads a value of its input first: the meta run stops at its first operation."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(12, 8)
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        keep = int(x.sum()) + 1
        return self.head(torch.relu(self.proj(x.flatten(1))))[:, :keep]


def first_op_reads():
    return FirstOpReads()


def two_layers():
    return nn.Sequential(nn.Flatten(), nn.Linear(12, 8), nn.ReLU(), nn.Linear(8, 2))
'''


def two_layers() -> nn.Module:
    return nn.Sequential(nn.Flatten(), nn.Linear(12, 8), nn.ReLU(), nn.Linear(8, 2))


def _footprint(model: nn.Module, batch: int, train: bool = False) -> Footprint:
    with torch.device("meta"):
        image = torch.zeros(batch, 3, 2, 2)
    return count(model, image_inputs(image), train=train).footprint


# B = 16: input 16 * 12 * 4 = 768 bytes; the first linear's output h and the ReLU's r
# 16 * 8 * 4 = 512 each; the head's output o 16 * 2 * 4 = 128
INPUT, HIDDEN, OUT = 768, 512, 128
# The ReLU runs with x, h and r alive (h dies when the ReLU returns: nothing saves it; the
# flatten is a view): 768 + 512 + 512 = 1_792, in both grad modes
FORWARD_PEAK = INPUT + 2 * HIDDEN
# A training step's peak is the ReLU's backward (threshold_backward): alive are x, r (saved by
# the ReLU and the head), o, the ones gradient (128), the head's input gradient (512), its weight
# and bias gradients (2 * 8 * 4 = 64, 2 * 4 = 8) and the new gradient of h (512):
# 768 + 512 + 128 + 128 + 512 + 64 + 8 + 512 = 2_632
TRAIN_PEAK = INPUT + HIDDEN + OUT + OUT + HIDDEN + 64 + 8 + HIDDEN


@pytest.mark.parametrize(
    ("grad", "train", "peak"),
    [
        pytest.param(False, False, FORWARD_PEAK, id="no-grad"),
        pytest.param(True, False, FORWARD_PEAK, id="grad"),
        pytest.param(True, True, TRAIN_PEAK, id="train"),
    ],
)
def test_the_peak_of_a_two_layer_model_by_arithmetic(grad: bool, train: bool, peak: int) -> None:
    with torch.set_grad_enabled(grad):
        footprint = _footprint(two_layers(), 16, train)
    assert footprint.activations == peak == {FORWARD_PEAK: 1_792, TRAIN_PEAK: 2_632}[peak]
    passes = "forward and backward" if train else "forward"
    assert footprint.counted.startswith(f"the peak of tensors alive at once in the {passes}")


@pytest.mark.slow
@pytest.mark.parametrize("grad", [False, True], ids=["no-grad", "grad"])
def test_a_vit_estimate_is_within_a_factor_of_its_real_peak(grad: bool) -> None:
    """The meta estimate against the CPU allocator's peak of the same forward between its ops
    (without the kernels' scratch, which depends on the CPU and which no count sees: measured
    by measure.memory.measured.allocation_peaks): at least it, at most 1.5 times it (on meta
    attention runs its math decomposition and keeps the batch x heads x L x L scores, which the
    CPU's flash kernel never stores)."""
    meta = make_workload("timm:vit_tiny_patch16_224")
    cpu = make_workload("timm:vit_tiny_patch16_224", device="cpu")
    image = cpu.inputs.tensor("cpu", random=True)
    model = cpu.module.eval()
    with torch.set_grad_enabled(grad):
        estimate = count(meta.module,
                         image_inputs(meta.inputs.tensor("meta"))).footprint.activations
        real = allocation_peaks(lambda: model(image)).between_ops + image.nbytes
    assert real <= estimate <= 1.5 * real


def test_a_run_that_stops_early_is_bounded_from_the_shapes() -> None:
    live = Liveness()
    with torch.device("meta"):
        image = torch.zeros(512, 3, 2, 2)  # alive to the end, as a run's inputs are
    live.hold(((image,), {}))
    model = two_layers()
    # inputs 512 * 12 * 4 = 24_576 bytes; 4 leaf modules (flatten, linear, relu, linear)
    inference = untraced(model, live, 1, train=False)
    assert inference.activations == 24_576 * (1 + 4)
    assert inference.counted == ("no full trace, the meta run stopped after 1 counted ops: "
                                 "inputs 24,576 x (1 + 4 leaf modules)")
    training = untraced(model, live, 1, train=True)
    assert training.activations == 24_576 * 5 + WEIGHTS  # + the gradients of every parameter
    assert training.counted.endswith(f", + gradients {WEIGHTS:,}")
    # a run that held more than the bound before it stopped: what it held is the figure
    with torch.device("meta"):
        held = torch.zeros(1_000_000)
    live.created(torch.ops.aten.zeros.default, held)
    assert untraced(model, live, 1, train=False).counted == (
        "no full trace, the meta run stopped after 1 counted ops: the 4,024,576 alive by then, "
        "more than inputs 24,576 x (1 + 4 leaf modules)")  # 24_576 + 4 * 1_000_000


def test_a_failed_meta_run_carries_the_bound_not_the_bytes_it_wrote() -> None:
    class Reads(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x[: int(x.sum()) + 1]

    with torch.device("meta"):
        image = torch.zeros(512, 3, 2, 2)
    with pytest.raises(CountFailed) as failed:
        count(Reads(), image_inputs(image))
    # the sum wrote 4 bytes before the failure; one leaf module (the root): 24_576 * 2
    assert failed.value.footprint.activations == 24_576 * 2


@pytest.fixture
def models(tmp_path: Path) -> Path:
    path = tmp_path / "guard_models.py"
    path.write_text(MODELS_PY)
    return path


@pytest.fixture
def materialised(monkeypatch: pytest.MonkeyPatch) -> list[nn.Module]:
    """The modules given real storage (none, when the guard refuses first)."""
    calls: list[nn.Module] = []
    real = running.materialize

    def spy(module: nn.Module, device: str) -> nn.Module:
        calls.append(module)
        return real(module, device)

    monkeypatch.setattr(running, "materialize", spy)
    return calls


# FirstOpReads at batch 512: inputs 512 * 12 * 4 = 24_576 bytes, 2 leaf modules (proj, head)
FALLBACK_BOUND = 24_576 * (1 + 2)  # 73_728; the old guard counted the sum's 4 bytes
NO_FULL_TRACE = "no full trace, the meta run stopped after 1 counted ops: inputs 24,576 x (1 + 2 "\
    "leaf modules)"


def needs(model: str, weights: int, activations: int, why: str, available: int) -> str:
    """The guard's refusal: weights + activations against the memory available."""
    return (f"FILE:{model} needs about {weights + activations:,} bytes (0.0 GiB) on cpu "
            f"(weights {weights:,} + activations {activations:,}: {why}) but {available:,} "
            "bytes (0.0 GiB) is available (VITPROF_MEMORY_LIMIT)")


# Each row: argv (FILE is the models file), the memory limit, and what the line says after
# "vitprof: error: "; every one is refused before any weight is allocated. In train mode the
# activations hold the gradients too (+ WEIGHTS).
FIRST_OP = ["FILE:first_op_reads", "--image-size", "2", "--batch-size", "512"]
REFUSED = [
    pytest.param(["analyze", *FIRST_OP], "50000",
                 needs("first_op_reads", WEIGHTS, FALLBACK_BOUND, NO_FULL_TRACE, 50_000),
                 id="fallback-first-op"),
    pytest.param(["analyze", *FIRST_OP, "--mode", "train"], "50000",
                 needs("first_op_reads", WEIGHTS, WEIGHTS + FALLBACK_BOUND,
                       f"{NO_FULL_TRACE}, + gradients {WEIGHTS:,}", 50_000),
                 id="fallback-first-op-train"),
    pytest.param(["profile", *FIRST_OP, "--iters", "1"], "50000",
                 needs("first_op_reads", WEIGHTS, FALLBACK_BOUND, NO_FULL_TRACE, 50_000),
                 id="profile-fallback-first-op"),
    pytest.param(["analyze", "FILE:two_layers", "--image-size", "2", "--batch-size", "16",
                  "--device", "cpu"], "2000",
                 needs("two_layers", WEIGHTS, FORWARD_PEAK, "the peak of tensors alive at once "
                       "in the forward, grad enabled (autograd keeps what a backward needs)",
                       2_000),
                 id="device-cpu-traced"),
    pytest.param(["analyze", "FILE:two_layers", "--image-size", "2", "--device", "cpu"],
                 "lots", "VITPROF_MEMORY_LIMIT must be a number of bytes, got 'lots'",
                 id="limit-not-a-number"),
    pytest.param(["analyze", "FILE:two_layers", "--image-size", "2", "--device", "cpu"],
                 "-1", "VITPROF_MEMORY_LIMIT must be at least 0, got -1", id="limit-negative"),
]


@pytest.mark.parametrize(("argv", "limit", "line"), REFUSED)
def test_refusals_are_one_line_before_any_allocation(
    argv: list[str], limit: str, line: str, models: Path, materialised: list[nn.Module],
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("VITPROF_MEMORY_LIMIT", limit)
    assert main([arg.replace("FILE", str(models)) for arg in argv]) == 2
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [f"vitprof: error: {line.replace('FILE', str(models))}"]
    assert captured.out == ""
    assert materialised == []


def test_a_callers_model_that_stops_early_is_refused_before_its_cpu_forward(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The API, a model with weights: the guard refuses before the real forward."""
    model = nn.Sequential(nn.Flatten(), nn.Linear(12, 8))
    devices: list[str] = []
    model.register_forward_pre_hook(lambda _m, args: devices.append(args[0].device.type))
    model.register_forward_hook(lambda _m, _a, out: out[: int(out.sum()) + 1])
    monkeypatch.setenv("VITPROF_MEMORY_LIMIT", str(24_576 * 2))
    with pytest.raises(UserError, match=r"activations 73,728: no full trace"):
        # 24_576 input bytes x (1 + 2 leaves); the weights are there already (0 to allocate)
        analyze(model, image_size=2, batch_size=512, in_chans=3)  # no forward traces channels
    assert devices == ["meta"]
