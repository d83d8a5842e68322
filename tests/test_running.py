"""Running a model for real: which meta failures fall back, the memory guard, one factory call,
and the Python API's checks of its inputs."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import run_commands_in_one_interpreter
from torch import nn

from vitprof import Component, analyze
from vitprof.core.errors import UserError
from vitprof.count.running import meta_caused
from vitprof.measure.profile import profile_model
from vitprof.workload import InputRequest

META = torch.zeros(4, 4, device="meta")


def _raised(action: Callable[[], object]) -> BaseException:
    try:
        action()
    except Exception as error:
        return error
    raise AssertionError("expected an exception")


def _chained() -> None:
    try:
        int(META.sum())
    except RuntimeError as error:
        raise ValueError("the model wrapped it") from error


def _flex_attention() -> Callable[..., object]:
    """torch's own ``flex_attention``, which checks its inputs' device itself (a ValueError)."""
    flex = pytest.importorskip("torch.nn.attention.flex_attention")
    return flex.flex_attention


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        pytest.param(lambda: int(META.sum()), True, id="item-of-meta"),
        pytest.param(lambda: bool(META.sum() > 0), True, id="bool-of-meta"),
        pytest.param(lambda: META.tolist(), True, id="tolist-of-meta"),
        pytest.param(lambda: META[META[:, 0] >= 0], True, id="boolean-mask-nonzero"),
        pytest.param(lambda: torch.unique(META), True, id="no-meta-kernel"),
        pytest.param(lambda: META.numpy(), True, id="numpy-of-meta"),
        pytest.param(lambda: torch.repeat_interleave(META.long()[0]), True,
                     id="data-dependent-output-size"),
        pytest.param(_chained, True, id="raised-from-a-meta-failure"),
        pytest.param(lambda: _flex_attention()(*[META.view(1, 1, 4, 4)] * 3), True,
                     id="library-refuses-the-meta-device"),
        # torch.autocast("meta") raises "unsupported scalarType": torch's own code, called for
        # the meta device, whatever the message says
        pytest.param(lambda: torch.autocast("meta", enabled=False), True,
                     id="torch-called-for-the-meta-device"),
        pytest.param(lambda: torch.autocast("no-such-device"), False,
                     id="torch-refuses-another-device"),
        pytest.param(lambda: META @ torch.zeros(3, 3, device="meta"), False, id="shape-mismatch"),
        pytest.param(lambda: nn.Bilinear(4, 4, 4)(META), False, id="wrong-forward-signature"),
        pytest.param(lambda: torch.empty(2**40, 2**40, device="meta"), False,
                     id="size-overflow"),
        pytest.param(lambda: (_ for _ in ()).throw(RuntimeError("forward is broken")), False,
                     id="model-raises"),
        pytest.param(lambda: (_ for _ in ()).throw(NotImplementedError("todo")), False,
                     id="model-not-implemented"),
    ],
)
def test_meta_caused_tells_meta_failures_from_model_errors(
    action: Callable[[], object], expected: bool
) -> None:
    assert meta_caused(_raised(action)) is expected


MODELS_PY = '''
import os
import torch
from torch import nn

LOG = os.environ["VITPROF_TEST_LOG"]


def _log():
    with open(LOG, "a") as log:
        log.write(str(torch.get_default_device()) + "\\n")


class TwoInputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x, y):
        return self.proj(x) + y


class DataDependent(nn.Module):
    """Keeps int(x.sum()) + 1 patch tokens: a shape meta tensors cannot know."""

    def __init__(self, width=8):
        super().__init__()
        self.patch = nn.Conv2d(3, width, kernel_size=4, stride=4)
        self.head = nn.Linear(width, 2)

    def forward(self, x):
        keep = int(x.sum()) + 1
        tokens = self.patch(x).flatten(2).transpose(1, 2)[:, :keep]
        return self.head(tokens.mean(1))


def two_inputs():
    _log()
    return TwoInputs()


def data_dependent(image_size=32):
    _log()
    return DataDependent()


class BigDataDependent(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(12_288, 65_536, bias=False)

    def forward(self, x):
        return self.proj(x.flatten(1))[:, :int(x.sum()) + 1]


def big():
    # a 64 x 64 image, 3 * 64 * 64 = 12_288 inputs: 12_288 x 65_536 float32 weights, 3 GiB
    return nn.Sequential(nn.Flatten(), nn.Linear(12_288, 65_536, bias=False))


def big_data_dependent():
    # the same 3 GiB of weights, and a forward that needs the cpu fallback
    return BigDataDependent()
'''


@pytest.fixture
def models(tmp_path: Path, monkeypatch) -> Path:
    path = tmp_path / "models.py"
    path.write_text(MODELS_PY)
    monkeypatch.setenv("VITPROF_TEST_LOG", str(tmp_path / "calls.log"))
    return path


def _calls(models: Path) -> list[str]:
    return (models.parent / "calls.log").read_text().split()


def test_wrong_forward_signature_is_reported_at_once_without_a_cpu_build(
    models: Path, monkeypatch
) -> None:
    real_runs: list[str] = []
    monkeypatch.setattr("vitprof.analysis.on_device", lambda *args: real_runs.append(args[0]))
    with pytest.raises(UserError) as error:
        analyze(f"{models}:two_inputs")
    message = str(error.value)
    assert message.startswith(f"running {models}:two_inputs failed: TypeError: ")
    assert "missing 1 required positional argument: 'y'" in message
    assert message.endswith("(input of shape 1x3x224x224, on meta)")
    assert real_runs == []  # no fallback
    assert _calls(models) == ["meta"]  # built once, on meta; never on the cpu


@pytest.mark.parametrize("run", [analyze, profile_model], ids=["analyze", "profile"])
def test_factory_of_a_model_that_falls_back_runs_once(models: Path, run: Callable) -> None:
    kwargs = {"iters": 1, "warmup": 0} if run is profile_model else {}
    result = run(f"{models}:data_dependent", **kwargs)
    assert result.device == "cpu"
    assert _calls(models) == ["meta"]  # the cpu run materialised the meta build
    # at 224 (no size is inferred): the patch conv 56 * 56 positions x 8 channels x 4 * 4 * 3,
    # the head 8 * 2
    assert sum(op.macs for op in result.ops) == 56 * 56 * 8 * 48 + 8 * 2


WEIGHTS = 12_288 * 65_536 * 4  # 3_221_225_472 bytes of float32
GUARDED = [
    pytest.param(["analyze", "{models}:big", "--image-size", "64", "--device", "cpu"],
                 id="analyze-device-cpu"),
    pytest.param(["analyze", "{models}:big_data_dependent", "--image-size", "64"],
                 id="analyze-fallback"),
    pytest.param(["profile", "{models}:big", "--image-size", "64", "--iters", "1"], id="profile"),
]


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list]:
    """Each argv of GUARDED (as written, ``{models}`` unfilled) -> the argv run, its exit code,
    what it wrote to stderr and the peak RSS, under a memory limit of 100,000,000 bytes."""
    folder = tmp_path_factory.mktemp("guard")
    models = folder / "models.py"
    models.write_text(MODELS_PY)
    argvs = [case.values[0] for case in GUARDED]
    env = {"VITPROF_MEMORY_LIMIT": "100000000", "PATH": "/usr/bin:/bin",
           "VITPROF_TEST_LOG": str(folder / "calls.log"),
           "PYTHONPATH": str(Path(__file__).parents[1])}
    filled = [[arg.format(models=models) for arg in argv] for argv in argvs]
    done = run_commands_in_one_interpreter(filled, env=env)
    return {" ".join(argv): [run, d["code"], d["stderr"], d["peak_rss"]]
            for argv, run, d in zip(argvs, filled, done, strict=True)}


@pytest.mark.parametrize("argv", GUARDED)
def test_memory_guard_refuses_without_allocating(guarded: dict[str, list], argv: list[str]) -> None:
    run, code, stderr, peak_rss = guarded[" ".join(argv)]
    assert code == 2
    (line,) = stderr.splitlines()
    assert line.startswith(f"vitprof: error: {run[1]} needs about ")
    assert f"weights {WEIGHTS:,} + activations " in line
    assert line.endswith("but 100,000,000 bytes (0.1 GiB) is available (VITPROF_MEMORY_LIMIT)")
    assert peak_rss < WEIGHTS // 2  # the weights were never allocated


def _profile_requested(model: str, **inputs: Any) -> object:
    """``profile_model`` asked with the request the keywords make (it takes no input keywords:
    :class:`InputRequest` checks them as it is made)."""
    return profile_model(model, InputRequest(**inputs))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"image_size": (32, 32, 3)}, "image size must be one int or \\(height, "
                     r"width\), got \(32, 32, 3\)", id="triple"),
        pytest.param({"image_size": (32, 0)}, "image width must be at least 1, got 0",
                     id="zero-width"),
        pytest.param({"frames": 0}, "number of frames must be at least 1, got 0", id="frames"),
        pytest.param({"in_chans": 0}, "number of input channels must be at least 1, got 0",
                     id="channels"),
        pytest.param({"dtype": "float64"}, "unknown dtype 'float64'; choose from float32",
                     id="dtype"),
        pytest.param({"input_shape": (1, 3)}, "an input shape needs batch, channels and at "
                     "least one size", id="short-shape"),
        pytest.param({"input_shape": (1, 3, 32, 32), "image_size": 32},
                     "input_shape is the whole input: it excludes image_size", id="shape-and-size"),
        pytest.param({"input_shape": (2, 3, 32, 32), "batch_size": 2},
                     "input_shape is the whole input: its first size is the batch",
                     id="shape-and-batch"),
        pytest.param({"image_size": True}, "image size must be an int, got True", id="bool"),
        pytest.param({"image_size": 32.0}, "image size must be an int, got 32.0", id="float"),
        pytest.param({"image_size": 0}, "image size must be at least 1, got 0", id="zero"),
        pytest.param({"image_size": -32}, "image size must be at least 1, got -32",
                     id="negative"),
        pytest.param({"batch_size": True}, "batch size must be an int, got True",
                     id="bool-batch"),
        pytest.param({"batch_size": 2.0}, "batch size must be an int, got 2.0",
                     id="float-batch"),
        pytest.param({"num_classes": -1}, "number of classes must be at least 0, got -1",
                     id="negative-classes"),
        pytest.param({"num_classes": False}, "number of classes must be an int, got False",
                     id="bool-classes"),
    ],
)
@pytest.mark.parametrize("run", [analyze, _profile_requested], ids=["analyze", "profile"])
def test_api_rejects_bad_sizes_and_counts(run: Callable, kwargs: dict, message: str) -> None:
    with pytest.raises(UserError, match=message):
        run("note002_cifar_vit_tiny", **kwargs)


# timm vit_tiny (D=192, 12 blocks of 12 * 192^2 + 13 * 192 = 444_864): patch conv
# 3 * 16^2 * 192 + 192 = 147_648, class token 192, positions 197 * 192, final norm 2 * 192
TIMM_TINY_WITHOUT_HEAD = 147_648 + 192 + 197 * 192 + 12 * 444_864 + 2 * 192


@pytest.mark.parametrize(
    ("model", "params_without_head"),
    [
        # vit_b_32: 88_224_232 params (torchvision num_params) less the head 768 * 1000 + 1000
        pytest.param("vit_b_32", 88_224_232 - 769_000, id="torchvision"),
        pytest.param("timm:vit_tiny_patch16_224", TIMM_TINY_WITHOUT_HEAD, id="timm"),
    ],
)
def test_zero_classes_means_no_head(model: str, params_without_head: int) -> None:
    profile = analyze(model, num_classes=0)
    assert profile.components[Component.HEAD].params == 0
    assert profile.components[Component.HEAD].macs == 0
    assert profile.totals.params == params_without_head


def test_cli_accepts_zero_classes(capsys) -> None:
    from vitprof.cli.main import main

    assert main(["analyze", "vit_b_32", "--num-classes", "0", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["components"]["head"]["params"] == 0


def test_a_size_that_does_not_fit_is_refused_before_the_cpu_build(monkeypatch, capsys) -> None:
    from vitprof.cli.main import main

    monkeypatch.setenv("VITPROF_MEMORY_LIMIT", str(10**9))
    assert main(["analyze", "vit_b_16", "--image-size", "1024", "--device", "cpu"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    # vit_b_16: 86_567_656 params at 224; at 1024, 64^2 + 1 = 4097 positions instead of 197
    weights = (86_567_656 + (4097 - 197) * 768) * 4
    assert line.startswith("vitprof: error: vit_b_16 needs about ")
    assert f"on cpu (weights {weights:,} + activations " in line
    assert line.endswith("but 1,000,000,000 bytes (0.9 GiB) is available (VITPROF_MEMORY_LIMIT)")
