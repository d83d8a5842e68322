"""``vitprof memory`` at its edges: a ``--fit`` no tensor could hold, a model whose forward
takes further inputs (``--input extra_shapes`` / ``patch_mask``) under ``--fit``, and a model
that fails on fake tensors, each ending in one line (found by an outside audit)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from models_styles import FlatViT, ParallelViT
from torch import nn

from vitprof import memory
from vitprof.cli.main import main
from vitprof.core.errors import UserError
from vitprof.measure.memory.measured import measure_training_memory
from vitprof.workload import InputRequest

MODELS_PY = '''
import torch
from torch import nn


class Biased(nn.Module):
    """A linear model with a second input added to its output: (x, bias)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3 * 8 * 8, 10)

    def forward(self, x, bias):
        return self.fc(x.flatten(1)) + bias


def biased():
    return Biased()
'''


class Biased(nn.Module):
    """A linear model with a second input added to its output: ``(x, bias)``."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3 * 8 * 8, 10)

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return self.fc(x.flatten(1)) + bias


@pytest.fixture
def biased_file(tmp_path: Path) -> str:
    (tmp_path / "models.py").write_text(MODELS_PY)
    return f"{tmp_path / 'models.py'}:biased"


def _one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_a_fit_beyond_what_a_tensor_holds_is_one_user_error() -> None:
    # 10**30 bytes: the line's batch (about 10**30 / 3,000 bytes a sample) is past int64
    with pytest.raises(UserError, match="memory size must be at most"):
        memory(Biased(), fit=10**30,
               request=InputRequest(image_size=8, extra_shapes=((1, 10),)))


def test_a_fit_beyond_what_a_tensor_holds_is_one_line_on_the_command_line(
        biased_file: str, capfd: pytest.CaptureFixture[str]) -> None:
    status = main(["memory", biased_file, "--image-size", "8", "--input", "extra_shapes=1,10",
                   "--fit", "1e30"])
    assert status == 2
    assert "memory size must be at most" in _one_error_line(capfd.readouterr().err)


def test_fit_scales_the_batch_of_the_further_inputs() -> None:
    """Each further input's first size is the batch (README): ``--fit`` predicts at other
    batches, so they follow it. The answer is held to predictions at it and one above."""
    def at(batch: int) -> int:
        request = InputRequest(image_size=8, batch_size=batch, extra_shapes=((batch, 10),))
        return memory(Biased(), request=request, target="cpu", optimizer="sgd").peak_bytes

    fit = at(3) + (at(4) - at(3)) // 2  # between the peaks at batch 3 and 4
    request = InputRequest(image_size=8, batch_size=2, extra_shapes=((2, 10),))
    found = memory(Biased(), request=request, target="cpu", optimizer="sgd", fit=fit)
    assert found.largest_batch == 3
    assert at(3) <= fit < at(4)


def test_a_model_failing_on_fake_tensors_is_one_line(
        biased_file: str, capfd: pytest.CaptureFixture[str]) -> None:
    """A bias of batch 3 against an input of batch 2 cannot broadcast: the fake run fails,
    and torch's own log of the failure does not reach the user beside vitprof's line."""
    status = main(["memory", biased_file, "--image-size", "8", "--batch-size", "2", "--input",
                   "extra_shapes=3,10"])
    assert status == 2
    line = _one_error_line(capfd.readouterr().err)
    assert line.startswith("vitprof: error:") and "could not run on fake CPU tensors" in line


@pytest.mark.parametrize("checkpoint", ["blocks", "every 2"])
def test_checkpoint_runs_the_blocks_the_graph_finds_in_a_model_no_table_knows(
        checkpoint: str) -> None:
    """A hand-written ViT (tests/models_styles.py: no table detects it) has the 2 blocks the
    graph finds checkpointed, as a real step checkpointing its ``blocks`` list saves: what
    autograd keeps for the backward is equal to the byte (main refused: 'the breakdown found
    none', while its own by_block listed blocks 0 and 1)."""
    torch.manual_seed(0)
    model = ParallelViT()
    kept = {}
    for setting in ("none", checkpoint):
        predicted = memory(model, InputRequest(batch_size=4, image_size=16), checkpoint=setting,
                           target="cpu", attention="flash", optimizer="sgd")
        measured = measure_training_memory(model, torch.randn(4, 3, 16, 16), optimizer="sgd",
                                           checkpoint=setting)
        assert list(predicted.by_block) == [0, 1]
        assert predicted.saved_bytes == measured.saved_bytes
        kept[setting] = predicted.saved_bytes
    assert kept[checkpoint] < kept["none"]


def test_checkpoint_of_a_model_without_block_modules_is_one_user_error() -> None:
    """FlatViT loops over raw parameters: the breakdown finds 2 blocks, but no module to run
    under the checkpoint; the error says so instead of 'found none'."""
    assert list(memory(FlatViT(), InputRequest(image_size=16)).by_block) == [0, 1]
    with pytest.raises(UserError, match="found no module that is a block"):
        memory(FlatViT(), InputRequest(image_size=16), checkpoint="blocks")


@pytest.mark.parametrize(("kwargs", "keyword"), [
    ({"optimizer": "adamw"}, "optimizer"),
    ({"optimizer": "sgd"}, "optimizer"),
    ({"checkpoint": "blocks"}, "checkpoint"),
])
def test_inference_refuses_the_settings_of_a_training_step(kwargs: dict[str, str],
                                                           keyword: str) -> None:
    """One forward without gradients has no optimizer and keeps nothing for a backward: an
    optimizer or checkpointing asked for with it is an error (main took them silently and
    reported 'optimizer adamw' for a forward). The error names the keywords written, not the
    command line's options (issue 38: it said '--mode inference ... --optimizer')."""
    with pytest.raises(UserError) as raised:
        memory(ParallelViT(), InputRequest(image_size=16), mode="inference", **kwargs)
    assert str(raised.value) == (f"mode='inference' is one forward without gradients: "
                                 f"{keyword} does not apply")


def test_inference_says_what_it_predicts(biased_file: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Its settings name no optimizer and its convention a forward, not 'the second training
    step'; a training step still defaults to adamw."""
    inference = memory(ParallelViT(), InputRequest(image_size=16), mode="inference")
    assert inference.settings["optimizer"] == "none"
    assert "forward without gradients" in inference.convention
    assert "training step" not in inference.convention
    assert memory(ParallelViT(), InputRequest(image_size=16)).settings["optimizer"] == "adamw"
    status = main(["memory", biased_file, "--image-size", "8", "--input", "extra_shapes=1,10",
                   "--mode", "inference", "--optimizer", "adamw"])
    assert status == 2
    assert "--optimizer does not apply" in _one_error_line(capsys.readouterr().err)


def test_the_report_of_an_inference_estimate_names_a_forward() -> None:
    """The markdown section and the figure of ``--mode inference`` say what was predicted:
    one forward without gradients (main titled both 'one training step' and listed a
    backward and an optimizer step in the convention)."""
    from vitprof.render.memory_report import memory_section, timeline_figure

    inference = memory(ParallelViT(), InputRequest(image_size=16), mode="inference", target="cpu")
    section = memory_section(inference, figure="timeline.png")
    assert "training step" not in section and "Training memory" not in section
    assert "one forward without gradients" in section
    assert timeline_figure(inference).title.endswith("memory over one forward without gradients")
    train = memory(ParallelViT(), InputRequest(image_size=16), target="cpu")
    assert "one training step (forward, backward, optimizer step)" in memory_section(train)


@pytest.mark.parametrize(("table", "fragment"), [
    ('{ checkpoint = "every 0" }', "checkpoint must be none, blocks or 'every N'"),
    # the table's keys as written (issue 38: '--mode inference ... --optimizer does not apply')
    ('{ mode = "inference", optimizer = "sgd" }',
     "key 'memory': mode = \"inference\" is one forward without gradients: optimizer does not "
     "apply"),
    # main read both and blamed the entry's model key once it was analysed, the world size
    # quoted as a string (world_size = "4"), which the table refuses
    ('{ strategy = "fsdp", world_size = 0 }', "key 'memory': world size must be at least 1"),
    ('{ world_size = 4 }', "key 'memory': world_size = 4 needs a strategy"),
])
def test_a_budgets_memory_settings_are_checked_where_they_are_written(
        tmp_path: Path, table: str, fragment: str) -> None:
    """A bad ``memory`` table is an error on its own line and key, when the file is read
    (main blamed the entry's ``model`` key, once the model had been analysed)."""
    from vitprof.checks.budget import load_budgets

    path = tmp_path / "budgets.toml"
    path.write_text(f'[tiny]\nmodel = "timm:vit_tiny_patch16_224"\nmax_peak_bytes = 1\n'
                    f'memory = {table}\n')
    with pytest.raises(UserError, match=fragment) as raised:
        load_budgets(path)
    assert "budgets.toml:4" in str(raised.value) and "'memory" in str(raised.value)


CONV_PY = """
from torch import nn


def make():
    return nn.Conv2d(3, 2, kernel_size=8, stride=8)
"""


def test_an_error_of_a_budgets_memory_prediction_names_its_keys(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """amp with the entry's float16 is found when the peak is predicted: the line names the
    budget's keys, as written (issue 38: it named '--amp' and 'dtype float32')."""
    monkeypatch.chdir(tmp_path)
    Path("models.py").write_text(CONV_PY)
    Path("budgets.toml").write_text('[m]\nmodel = "models.py:make"\nimage_size = 8\n'
                                    'dtype = "float16"\nmax_peak_bytes = 1_000_000\n'
                                    'memory = { amp = "bfloat16" }\n')
    assert main(["check", "budgets.toml"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith("vitprof: error: ")
    assert line.endswith(': amp keeps float32 master weights: it needs dtype = "float32", got '
                         'float16')


class SparseEmbedding(nn.Module):
    """A linear model plus a sparse embedding (``nn.Embedding(sparse=True)``) of fixed ids:
    its gradient is a sparse tensor, which has no storage."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3 * 8 * 8, 8)
        self.emb = nn.Embedding(10, 8, sparse=True)
        self.register_buffer("ids", torch.arange(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x.flatten(1)) + self.emb(self.ids).sum(0)


def test_a_sparse_gradient_is_one_user_error() -> None:
    """main raised NotImplementedError('Cannot access storage of SparseTensorImpl'), a
    traceback on the command line."""
    with pytest.raises(UserError, match=r"emb\.weight: a sparse gradient"):
        memory(SparseEmbedding(), InputRequest(image_size=8))


def test_a_budget_fails_closed_when_the_memory_engine_fails(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Any failure of the prediction a ``max_peak_bytes`` check needs is one UserError naming
    the entry, never a pass and never a traceback (main let a non-UserError through)."""
    import vitprof.checks.budget as budget_module
    from vitprof.checks.budget import evaluation

    def broken(*_: object, **__: object) -> None:
        raise RuntimeError("first line\nsecond line")

    monkeypatch.setattr(evaluation, "memory", broken)
    budget = budget_module.parse_budgets(
        {"tiny": {"model": "timm:vit_tiny_patch16_224", "max_peak_bytes": 1}})[0]
    with pytest.raises(UserError, match=r"memory prediction failed: RuntimeError: first line$"):
        evaluation._peak_bytes(budget)


@pytest.mark.parametrize(("pairs", "fragment"), [
    # the same one-shape input twice: the error names the option and the field
    ([("patch_mask", "1,16"), ("patch_mask", "1,16")],
     "--input patch_mask: given 2 times (1,16; 1,16); it takes one shape"),
    ([("patch_mask", "a,b")], "--input patch_mask: expected integers B,SIZE"),
    ([("extra_shapes", "2,x")], "--input extra_shapes: expected integers B,SIZE"),
])
def test_an_input_error_names_the_input(pairs: list[tuple[str, str]], fragment: str) -> None:
    with pytest.raises(UserError) as raised:
        InputRequest.from_text(pairs)
    assert str(raised.value).startswith(fragment)



def test_a_fit_below_what_any_batch_holds_is_refused_workspace_included() -> None:
    """On CUDA the 32 MiB cuBLAS workspace is held whatever the batch: a size between the
    parameters, gradients and optimizer state and that plus the workspace fits no batch, and
    is refused as a smaller one is (main answered 'largest batch 0')."""
    model = ParallelViT()
    step = memory(model, InputRequest(image_size=16))
    total = step.total
    state = total.params + total.grads + total.optimizer_state
    with pytest.raises(UserError, match="is smaller than the parameters, gradients and "
                                        "optimizer state alone"):
        memory(model, InputRequest(image_size=16),
               fit=state + 2**20)  # + 1 MiB < the 32 MiB workspace
