"""The Workload and its InputSpec: what is fed to the model, built in one place."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from vitprof import Component, Profile, UserError, analyze
from vitprof.core.records import OpRecord, ParamRecord
from vitprof.models.zoo import DEFAULT_IMAGE_SIZE, lookup
from vitprof.render.formats import render
from vitprof.render.tables import profile_document
from vitprof.workload import InputSpec, deployed, make_workload


class Tubelets(nn.Module):
    """A video patch embedding: a Conv3d over 2-frame, 4 x 4-pixel tubelets, 8 channels."""

    def __init__(self) -> None:
        super().__init__()
        self.patch_embed = nn.Conv3d(3, 8, kernel_size=(2, 4, 4), stride=(2, 4, 4))

    def forward(self, x: torch.Tensor, scale: float = 1.0, *, shift: float = 0.0) -> torch.Tensor:
        return self.patch_embed(x).flatten(2).transpose(1, 2) * scale + shift


@pytest.mark.parametrize(
    ("spec", "shape", "text"),
    [
        pytest.param(InputSpec.image(224), (1, 3, 224, 224), "1x3x224x224 float32", id="image"),
        pytest.param(InputSpec(2, 3, (224, 320)), (2, 3, 224, 320), "2x3x224x320 float32",
                     id="non-square"),
        pytest.param(InputSpec(1, 3, (16, 224, 224), torch.bfloat16), (1, 3, 16, 224, 224),
                     "1x3x16x224x224 bfloat16", id="video"),
        pytest.param(InputSpec(4, 1, (128,)), (4, 1, 128), "4x1x128 float32", id="rank-1"),
    ],
)
def test_input_spec_shape_of_any_rank(spec: InputSpec, shape: tuple[int, ...], text: str) -> None:
    assert spec.shape == shape
    assert spec.describe() == text


def test_image_size_is_the_side_of_a_square_image_only() -> None:
    assert InputSpec.image(32, batch=2).image_size == 32
    for spec in (InputSpec(1, 3, (224, 320)), InputSpec(1, 3, (16, 224, 224))):
        with pytest.raises(UserError, match="needs a square image input, got 1x3x"):
            _ = spec.image_size


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        pytest.param((0, 3, (32, 32)), "batch size must be at least 1, got 0", id="batch"),
        pytest.param((1, 0, (32, 32)), "input channels must be at least 1, got 0", id="chans"),
        pytest.param((1, 3, (32, 0)), "input size must be at least 1, got 0", id="size"),
        pytest.param((1, 3, ()), "at least one spatial size", id="no-spatial"),
    ],
)
def test_input_spec_refuses_bad_sizes(fields: tuple, message: str) -> None:
    with pytest.raises(UserError, match=message):
        InputSpec(*fields)


def test_example_on_meta_has_the_shape_and_dtype_and_feeds_a_video_model() -> None:
    spec = InputSpec(2, 3, (4, 8, 8), torch.float16, args=(2.0,), kwargs={"shift": 1.0})
    args, kwargs = spec.example()
    (video, scale), = (args,)
    assert (video.device.type, video.shape, video.dtype) == ("meta", (2, 3, 4, 8, 8),
                                                             torch.float16)
    assert (scale, kwargs) == (2.0, {"shift": 1.0})
    out = Tubelets().to("meta", torch.float16)(*args, **kwargs)
    # (4 / 2) x (8 / 4) x (8 / 4) = 8 tubelets of 8 channels per clip
    assert out.shape == (2, 2 * 2 * 2, 8)


def test_tensor_on_a_real_device_is_zeros_unless_random() -> None:
    spec = InputSpec.image(4, batch=2, dtype=torch.bfloat16)
    zeros, noise = spec.tensor("cpu"), spec.tensor("cpu", random=True)
    assert zeros.dtype == noise.dtype == torch.bfloat16
    assert zeros.shape == noise.shape == (2, 3, 4, 4)
    assert not zeros.any() and noise.any()


def test_defaults_come_from_the_zoo_entry_not_224() -> None:
    work = make_workload("note002_cifar_vit", batch_size=2)
    # note 002: 32 px CIFAR images, patch 4: an 8 x 8 grid of patches, RGB
    assert work.inputs.shape == (2, 3, 8 * 4, 8 * 4)
    assert lookup("note002_cifar_vit").image_size == 8 * 4
    assert (work.name, work.entry.name, work.module.training) == (
        "note002_cifar_vit", "note002_cifar_vit", True)
    profile = analyze("note002_cifar_vit", batch_size=2)
    assert profile.input_shape == (2, 3, 32, 32)
    # patch embedding: 2 images x 64 patches x (3 x 4 x 4 = 48 inputs) x 512 channels
    assert profile.components[Component.PATCH_EMBED].macs == 2 * 64 * 48 * 512


def test_a_modules_defaults_come_from_the_module() -> None:
    class PosEmbed(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.patch = nn.Conv2d(1, 8, kernel_size=4, stride=4)
            self.pos_embed = nn.Parameter(torch.zeros(1, 1 + 6 * 6, 8))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.patch(x)

    # 37 tokens = 1 class token + a 6 x 6 grid of 4-px patches: 24 px, one channel
    assert make_workload(PosEmbed()).inputs.shape == (1, 1, 6 * 4, 6 * 4)
    # nothing says a size: the zoo's default, on the module's channels
    plain = make_workload(nn.Conv2d(5, 2, 1), batch_size=3, name="plain")
    assert plain.inputs.shape == (3, 5, DEFAULT_IMAGE_SIZE, DEFAULT_IMAGE_SIZE)
    assert plain.name == "plain"


def test_rules_are_the_entrys_then_the_callers() -> None:
    mine = (r"^head", Component.OTHER)
    work = make_workload("note002_dynamic_vit", overrides=[mine])
    assert work.rules == (*lookup("note002_dynamic_vit").overrides, mine)


def test_named_model_in_a_dtype_and_its_deploy_form() -> None:
    work = make_workload("note002_cifar_vit", dtype=torch.bfloat16)
    assert {p.dtype for p in work.module.parameters()} == {torch.bfloat16}
    assert work.inputs.tensor().dtype == torch.bfloat16
    deploy = deployed(work, True)
    assert deploy.name == "note002_cifar_vit (deploy form)" and deploy.module is not work.module
    assert deployed(work, False) is work


@pytest.mark.parametrize(
    ("model", "kwargs", "message"),
    [
        pytest.param(42, {}, "expected an nn.Module or a model name, got int", id="not-a-model"),
        pytest.param(nn.Linear(2, 2), {"num_classes": 3}, "num_classes applies to a model built",
                     id="classes-of-a-module"),
        pytest.param("vit_b_16", {"image_size": 225}, "building vit_b_16 at image size 225 "
                     "failed: AssertionError: Input shape indivisible by patch size!",
                     id="size-the-model-refuses"),
        pytest.param("vit_b_16", {"image_size": (224, 320)},
                     "vit_b_16 takes a square image size only", id="pair"),
        pytest.param("vit_b_16", {"batch_size": 0}, "batch size must be at least 1", id="batch"),
    ],
)
def test_make_workload_refuses_in_one_line(model: object, kwargs: dict, message: str) -> None:
    with pytest.raises(UserError, match=message) as caught:
        make_workload(model, **kwargs)  # type: ignore[arg-type]
    assert "\n" not in str(caught.value)


def _video_profile() -> Profile:
    """A hand-made profile of :class:`Tubelets` on one 4-frame 8 x 8 clip."""
    # 8 tubelets x 8 channels x (3 x 2 x 4 x 4 = 96 inputs) = 6,144 MACs; 8 x 96 + 8 params
    op = OpRecord("aten.convolution", "patch_embed", Component.PATCH_EMBED, None, 8 * 8 * 96, 0)
    params = (ParamRecord("patch_embed.weight", 8 * 96, Component.PATCH_EMBED, None),
              ParamRecord("patch_embed.bias", 8, Component.PATCH_EMBED, None))
    return Profile("tubelets", InputSpec(1, 3, (4, 8, 8)).shape, "meta", torch.__version__,
                   "generic", params, (op,))


def test_a_video_profile_renders_its_shape_as_given() -> None:
    profile = _video_profile()
    assert "input: batch 1, 3x4x8x8; device meta" in render(profile_document(profile))
    assert "- input: batch 1, 3x4x8x8;" in render(profile_document(profile), "markdown")
    assert repr(profile).startswith("Profile(tubelets, generic, input 1x3x4x8x8 on meta")
    # 8 x 96 + 8 params; 8 x 8 x 96 MACs
    assert "total: 776 params, 6,144 MACs" in render(profile_document(profile))
    assert json.loads(render(profile_document(profile), "json"))["input_shape"] == [1, 3, 4, 8, 8]


# ------------------------------------------------------------------ channels the image reaches


class C0(nn.Module):
    """Registers a 64-channel convolution ``c0`` first; the image reaches the stem ``c1`` (3
    channels, 4 x 4 patches) first, and ``c0`` after it. Declares nothing of its input."""

    def __init__(self) -> None:
        super().__init__()
        self.c0 = nn.Conv2d(64, 64, 3)
        self.c1 = nn.Conv2d(3, 64, 4, 4)
        self.c2 = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c2(self.c0(self.c1(x)).mean((2, 3)))


def test_channels_come_from_the_convolution_the_image_reaches_first() -> None:
    work = make_workload(C0(), image_size=32)
    assert work.inputs.shape == (1, 3, 32, 32)
    assert "guessed 3 channels from the first convolution the image reaches" in work.input_source
    profile = analyze(C0(), image_size=32)
    # c1: 8 x 8 outputs x 64 x (3 x 4 x 4); c0: 6 x 6 outputs x 64 x (64 x 3 x 3); c2: 64 x 10
    assert profile.totals.macs == 8 * 8 * 64 * 3 * 4 * 4 + 6 * 6 * 64 * 64 * 9 + 64 * 10


class C1(nn.Module):
    """Its forward first convolves a learned 8-channel map (not the image), then the image with
    a 3-channel stem: the first convolution computed is not the image's."""

    def __init__(self) -> None:
        super().__init__()
        self.c0 = nn.Parameter(torch.zeros(1, 8, 4, 4))
        self.c1 = nn.Conv2d(8, 16, 1)
        self.c2 = nn.Conv2d(3, 16, 8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c1(self.c0) + self.c2(x)


def test_traced_channels_the_model_rejects_are_retried_with_three() -> None:
    work = make_workload(C1(), image_size=32)
    assert work.inputs.shape == (1, 3, 32, 32)
    assert "guessed 3 channels (the model rejects the 8 of the first convolution it computes)" \
        in work.input_source
    # c2: 4 x 4 outputs x 16 x (3 x 8 x 8); c1: 4 x 4 outputs x 16 x 8
    assert analyze(C1(), image_size=32).totals.macs == 4 * 4 * 16 * 3 * 64 + 4 * 4 * 16 * 8


def test_a_model_without_convolution_gets_three_channels() -> None:
    work = make_workload(nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 10)), image_size=8)
    assert work.inputs.shape == (1, 3, 8, 8)
    assert "guessed 3 channels (no convolution reads the image)" in work.input_source


def test_traced_channels_other_than_three_are_kept_when_the_model_takes_them() -> None:
    work = make_workload(nn.Sequential(nn.Conv2d(1, 4, 2, 2), nn.Flatten()), image_size=8)
    assert work.inputs.shape == (1, 1, 8, 8)  # a grayscale model
