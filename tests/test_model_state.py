"""A caller's model and the process's random number generators are left as they were by every
real run (analyze on the CPU, the meta -> CPU fallback, profile, crosscheck's peers)."""

from __future__ import annotations

import inspect
import random
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
import torchvision
from torch import nn

from vitprof import InputRequest, analyze, memory
from vitprof.checks.crosscheck import run_crosscheck
from vitprof.cli.main import main
from vitprof.measure.profile import profile_model


def _state(model: nn.Module) -> dict[str, torch.Tensor]:
    return {name: t.clone() for name, t in model.state_dict().items()}


def _identical(model: nn.Module, before: dict[str, torch.Tensor]) -> list[str]:
    """Names of the entries of ``model``'s state dict whose bits differ from ``before``."""
    after = model.state_dict()
    return [name for name, t in before.items()
            if t.dtype != after[name].dtype or not torch.equal(t.view(-1).view(torch.uint8),
                                                                after[name].view(-1).view(
                                                                    torch.uint8))]


def _modes(model: nn.Module) -> dict[str, bool]:
    return {name: m.training for name, m in model.named_modules()}


class Generators:
    """The global generators' states: torch's CPU one, Python's and numpy's."""

    def __init__(self) -> None:
        self.torch = torch.get_rng_state()
        self.python = random.getstate()
        self.numpy = np.random.get_state()[1].copy()

    def unchanged(self) -> bool:
        return (torch.equal(self.torch, torch.get_rng_state())
                and self.python == random.getstate()
                and (self.numpy == np.random.get_state()[1]).all())


@pytest.mark.slow  # its fast twins: the train-mode cases of Noisy below (a BatchNorm1d)
def test_resnet18_in_train_mode_keeps_its_batchnorm_statistics() -> None:
    model = torchvision.models.resnet18(weights=None).train()
    before = _state(model)
    tracked = [name for name in before if name.endswith("num_batches_tracked")]
    # 20 BatchNorm2d layers: running mean, running var and num_batches_tracked each
    assert len(tracked) == 20
    analyze(model, mode="train", device="cpu", image_size=32, batch_size=2)
    assert _identical(model, before) == []
    assert all(model.state_dict()[name].item() == 0 for name in tracked)
    assert model.training


class Noisy(nn.Module):
    """Draws from every global generator in its forward: dropout (torch), Python's ``random``
    and numpy's; it also binds an attribute and, in train mode, updates a BatchNorm."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.norm = nn.BatchNorm1d(4)
        self.drop = nn.Dropout(0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.last_scale = random.random() + float(np.random.rand())
        return self.drop(self.norm(self.proj(x.flatten(1)[:, :4]))) * self.last_scale


class NoisyDataDependent(Noisy):
    """:class:`Noisy` that keeps as many rows as are positive: meta cannot run it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = super().forward(x)
        return out[out[:, 0] >= 0]


@pytest.mark.parametrize(
    ("model", "kwargs"),
    [
        pytest.param(Noisy, {"device": "cpu"}, id="cpu"),
        pytest.param(Noisy, {"device": "cpu", "mode": "train"}, id="cpu-train"),
        pytest.param(NoisyDataDependent, {}, id="meta-fallback"),
        pytest.param(NoisyDataDependent, {"mode": "train"}, id="meta-fallback-train"),
    ],
)
def test_analyze_leaves_model_and_generators_as_they_were(model: type, kwargs: dict) -> None:
    noisy = model().train()
    noisy.norm.eval()  # mixed modes, as when fine-tuning with frozen statistics
    modes, before, generators = _modes(noisy), _state(noisy), Generators()
    profile = analyze(noisy, image_size=2, batch_size=4, **kwargs)
    assert profile.device == "cpu"
    assert (profile.fallback is not None) is (model is NoisyDataDependent)
    assert generators.unchanged()
    assert _identical(noisy, before) == []
    assert _modes(noisy) == modes
    assert not hasattr(noisy, "last_scale")


def test_analyze_on_meta_leaves_a_weighted_model_as_it_was() -> None:
    noisy = Noisy().train()
    noisy.norm.eval()
    modes, generators = _modes(noisy), Generators()
    analyze(noisy, image_size=2, batch_size=4)
    assert _modes(noisy) == modes  # model.train(False) then model.train(True) flattened these
    assert not hasattr(noisy, "last_scale")
    assert generators.unchanged()


def test_profile_leaves_model_and_generators_as_they_were() -> None:
    noisy = Noisy().train()
    noisy.norm.eval()
    modes, before, generators = _modes(noisy), _state(noisy), Generators()
    profile_model(noisy, InputRequest(image_size=2, batch_size=4), warmup=0, iters=1)
    assert generators.unchanged()  # the random example and the forwards drew from them
    assert _identical(noisy, before) == []
    assert _modes(noisy) == modes
    assert not hasattr(noisy, "last_scale")


@pytest.mark.slow
def test_crosscheck_peers_leave_model_and_generators_as_they_were() -> None:
    model = torchvision.models.resnet18(weights=None).eval()
    model.fc.train()
    modes, before, generators = _modes(model), _state(model), Generators()
    attributes = {name: set(vars(m)) for name, m in model.named_modules()}
    run_crosscheck(model, InputRequest(image_size=32),
                   peers=["torchinfo", "ptflops-pytorch", "calflops", "flopcounter-cpu"])
    # ptflops bound start_flops_count, stop_flops_count, reset_flops_count,
    # compute_average_flops_cost and __batch_counter__ to the root module
    assert {name: set(vars(m)) for name, m in model.named_modules()} == attributes
    assert _modes(model) == modes
    assert _identical(model, before) == []
    assert generators.unchanged()


def test_a_callers_hook_handle_still_removes_its_hook() -> None:
    model = Noisy()
    calls: list[int] = []
    handle = model.proj.register_forward_hook(lambda *_: calls.append(1))
    # channels given, so no forward traces them: the meta run and the cpu run alone
    analyze(model, image_size=2, batch_size=4, in_chans=3, device="cpu")
    assert calls == [1, 1]
    handle.remove()
    assert not model.proj._forward_hooks


class Drifting(nn.Module):
    """Changes its own parameter in place in every forward."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            self.scale.add_(1)
        return x.flatten(1)[:, :4] * self.scale


CHANGED = "the run changed parameters in place, which vitprof cannot put back: scale"
ON_META = ("the forward changes parameters in place (counted as it ran; on the meta device no "
           "value changed): scale")


def test_a_parameter_changed_in_place_is_named_in_the_profiles_warnings() -> None:
    """One line of the profile's warnings, no Python warning (main: a raw UserWarning with
    vitprof's source path)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        profile = analyze(Drifting(), image_size=2, device="cpu")
    assert CHANGED in profile.warnings


def test_the_cli_names_a_parameter_changed_in_place_in_one_warning_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A model built on meta by its factory: on meta no value changed, and the line says so."""
    factory = tmp_path / "drifting.py"
    factory.write_text(DRIFTING_PY)
    assert main(["analyze", f"{factory}:make", "--input-shape", "1,4,1"]) == 0
    err = capsys.readouterr().err
    assert f"vitprof: warning: {ON_META}\n" in err
    assert "UserWarning" not in err and "state.py" not in err


def test_memorys_fake_run_changes_nothing_and_says_nothing() -> None:
    """vitprof.memory runs the forward on fake stand-ins: no parameter of the model changes
    (main warned that one had), and neither a Python warning nor a line says one did."""
    model = Drifting()
    before = model.scale.clone()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        estimate = memory(model, InputRequest(input_shape=(1, 4, 1)))
    assert not any("in place" in line for line in estimate.warnings)
    assert torch.equal(model.scale, before)


# Drifting as a module of its own, for the command line's FILE.py:make
DRIFTING_PY = ("import torch\nfrom torch import nn\n\n\n" + inspect.getsource(Drifting)
               + "\n\ndef make() -> nn.Module:\n    return Drifting()\n")


def test_the_channel_probe_says_nothing_the_count_says_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Given only an image size, the channels are traced by a probe forward before the count:
    the probe names nothing (main: a raw UserWarning from reached_channels.py saying values
    could not be put back, on meta), the count names the parameter once."""
    factory = tmp_path / "drifting.py"
    factory.write_text(DRIFTING_PY)
    with warnings.catch_warnings(record=True) as raised:
        warnings.simplefilter("always")
        assert main(["analyze", f"{factory}:make", "--image-size", "2"]) == 0
    assert [str(w.message) for w in raised] == []
    err = capsys.readouterr().err
    assert err.count("in place") == 1 and f"vitprof: warning: {ON_META}\n" in err
    assert "UserWarning" not in err


def test_crosscheck_and_profile_name_a_parameter_changed_in_place_in_their_own_lines() -> None:
    """The peers' forwards and profile's timed forwards change the caller's parameter: each
    result names it in one line (main: a Python warning per run), crosscheck once although
    vitprof's count and each peer changed it."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        checked = run_crosscheck(Drifting(), InputRequest(image_size=2),
                                 peers=["fvcore", "torchinfo"])
        timed = profile_model(Drifting(), InputRequest(image_size=2), warmup=0, iters=1)
    assert checked.warnings.count(CHANGED) == 1
    assert CHANGED in timed.notes
