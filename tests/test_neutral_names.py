"""vitprof.testing.neutral_names: every module path segment, parameter, buffer and class renamed in
place, indexed keys kept, the forward unchanged, and vitprof's totals identical."""

from __future__ import annotations

import re

import pytest
import torch
import torchvision
from torch import nn
from torchvision.models.vision_transformer import VisionTransformer

from vitprof import analyze
from vitprof.testing import neutral_names

NEUTRAL_SEGMENT = re.compile(r"[mpb]\d+|\d+")
NEUTRAL_CLASS = re.compile(r"C\d+")


def _names(model: nn.Module) -> list[str]:
    return [name for name, _ in [*model.named_modules(), *model.named_parameters(),
                                 *model.named_buffers()] if name]


def _old_names_left(model: nn.Module, kept: frozenset[str] = frozenset()) -> list[str]:
    """Paths with a segment that is neither neutral nor one of the ``kept`` keys, and modules
    whose class name is not neutral."""
    paths = [name for name in _names(model) if not all(
        NEUTRAL_SEGMENT.fullmatch(segment) or segment in kept for segment in name.split("."))]
    classes = [f"{name}: {type(module).__name__}" for name, module in model.named_modules()
               if not NEUTRAL_CLASS.fullmatch(type(module).__name__)]
    return paths + classes


class G0(nn.Module):
    """Reaches its children, parameters and buffers by name, and a ModuleDict by key."""

    def __init__(self) -> None:
        super().__init__()
        self.g1 = nn.ModuleDict({"left": nn.Linear(4, 4), "right": nn.Linear(4, 4)})
        self.g2 = nn.Sequential(nn.LayerNorm(4), nn.GELU())
        self.g3 = nn.Parameter(torch.ones(4))
        self.register_buffer("g4", torch.full((4,), 2.0))
        self.register_buffer("g5", torch.zeros(1), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.g1["left"](x) * self.g3 + self.g4
        return nn.functional.linear(self.g2(x), self.g1["right"].weight) + self.g5


def test_names_are_neutral_and_the_forward_unchanged() -> None:
    torch.manual_seed(0)
    model, x = G0(), torch.randn(2, 4)
    expected = model(x)
    state = [t.clone() for t in model.state_dict().values()]
    assert neutral_names(model) is model  # in place
    assert _old_names_left(model, kept=frozenset({"left", "right"})) == []
    # children m0..., parameters p0..., buffers b0..., per module in registration order
    assert _names(model) == ["m0", "m0.left", "m0.right", "m1", "m1.0", "m1.1", "p0",
                             "m0.left.p0", "m0.left.p1", "m0.right.p0", "m0.right.p1",
                             "m1.0.p0", "m1.0.p1", "b0", "b1"]
    assert "b0" in model.state_dict() and "b1" not in model.state_dict()  # b1: non-persistent
    assert torch.equal(model(x), expected)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), state, strict=True))
    # old names still resolve, for reading and for writing
    assert model.g3 is model.p0 and model.g2[0].weight is model.m1[0].p0
    model.g4 = torch.zeros(4)
    assert torch.equal(model.b0, torch.zeros(4)) and "g4" not in vars(model)
    assert isinstance(model.g2[0], nn.LayerNorm)  # the classes are subclasses of the originals
    # one number per original class, in module order: G0, ModuleDict, Linear, Sequential, LayerNorm
    assert type(model.g2[0]).__name__ == type(model.m1[0]).__name__ == "C4"
    # modules of one class share one class still (a recognizer may compare classes)
    assert type(model.m0.left) is type(model.m0.right)


def _totals_identical(original: nn.Module, renamed: nn.Module, **kwargs: object) -> None:
    before = analyze(original, **kwargs).totals  # type: ignore[arg-type]
    after = analyze(neutral_names(renamed), **kwargs).totals  # type: ignore[arg-type]
    assert _old_names_left(renamed) == []
    assert (after.params, after.macs) == (before.params, before.macs)


def test_a_small_torchvision_vit_keeps_its_totals() -> None:
    def small() -> nn.Module:
        with torch.device("meta"):
            return VisionTransformer(image_size=32, patch_size=16, num_layers=2, num_heads=2,
                                     hidden_dim=32, mlp_dim=64, num_classes=10)

    _totals_identical(small(), small())


@pytest.mark.slow
@pytest.mark.parametrize("name", [
    "vit_b_16", "timm:vit_tiny_patch16_224", "timm:swin_tiny_patch4_window7_224",
])
def test_named_models_keep_their_totals(name: str) -> None:
    if name.startswith("timm:"):
        timm = pytest.importorskip("timm")

        def build() -> nn.Module:
            with torch.device("meta"):
                return timm.create_model(name.removeprefix("timm:"), pretrained=False)
    else:
        def build() -> nn.Module:
            with torch.device("meta"):
                return getattr(torchvision.models, name)()

    _totals_identical(build(), build())
