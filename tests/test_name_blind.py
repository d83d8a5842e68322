"""Recognition reads the computation, not the names (issue 24): each rule that replaced a name
pattern has a fixture with neutral names whose breakdown is written as arithmetic, and the
breakdown of real models is the same under their own names and under
:func:`vitprof.testing.neutral_names` (or the neutral run says it placed something without
data-flow evidence)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from models_styles import patches
from torch import nn

from vitprof import analyze
from vitprof.core.records import Component as C
from vitprof.recognize.graph.roles import NO_EVIDENCE
from vitprof.testing import NAME_BLIND_MODELS, meta_builder, name_blindness, neutral_names

D, N, HIDDEN = 8, 16, 16  # width, tokens (16 patches of 4x4 of a 16x16 image), MLP hidden
# around every mixer: a patch embedding Linear(48, D), two blocks (norm, mixer, norm, MLP
# D -> 16 -> D, residual adds) and a head Linear(D, 10) on the mean token
FRAME = {
    C.PATCH_EMBED: (48 * D + D, N * 48 * D),  # 392 params, 6_144 MACs
    C.MLP: (2 * (D * HIDDEN + HIDDEN + HIDDEN * D + D), 2 * 2 * N * D * HIDDEN),  # 560, 8_192
    C.NORM: (2 * 2 * 2 * D, 0),  # two LayerNorms of weight and bias per block
    C.HEAD: (D * 10 + 10, D * 10),
}


class Block(nn.Module):
    def __init__(self, mixer: Callable[[], nn.Module], norm: Callable[[], nn.Module]) -> None:
        super().__init__()
        self.a, self.b, self.c = norm(), mixer(), norm()
        self.d, self.e = nn.Linear(D, HIDDEN), nn.Linear(HIDDEN, D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.b(self.a(x))
        return x + self.e(self.d(self.c(x)).relu())


class Net(nn.Module):
    def __init__(self, mixer: Callable[[], nn.Module],
                 norm: Callable[[], nn.Module] = lambda: nn.LayerNorm(D)) -> None:
        super().__init__()
        self.a = nn.Linear(48, D)
        self.b = nn.ModuleList(Block(mixer, norm) for _ in range(2))
        self.c = nn.Linear(D, 10)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        x = self.a(patches(image))
        for block in self.b:
            x = block(x)
        return self.c(x.mean(1))


class SoftmaxMix(nn.Module):
    """One product: weights made by a linear (one per token pair), a softmax, a product with
    the values (VOLO's outlook attention, reduced)."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.c = nn.Linear(D, D), nn.Linear(D, N), nn.Linear(D, D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c(self.b(x).softmax(-1) @ self.a(x))


class Additive(nn.Module):
    """No product: a one-channel score softmaxed over the tokens weights the keys, their sum
    multiplies the values (MobileViTv2's separable self-attention)."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(D, 1 + 2 * D), nn.Linear(D, D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        score, k, v = self.a(x).split([1, D, D], dim=-1)
        context = (k * score.softmax(dim=1)).sum(dim=1, keepdim=True)
        return self.b(v.relu() * context)


class Reduced(nn.Module):
    """Keys and values from the tokens reduced 16 -> 4 by a linear over the token axis before
    their projection (PVT's spatial reduction): the reduction feeds the core only through the
    k/v projection, so no walk from the core reaches it; it runs in the attention module."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(D, D), nn.Linear(N, N // 4)
        self.c, self.d = nn.Linear(D, 2 * D), nn.Linear(D, D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k, v = self.c(self.b(x.transpose(1, 2)).transpose(1, 2)).chunk(2, dim=-1)
        return self.d(nn.functional.scaled_dot_product_attention(self.a(x), k, v))


class Plain(nn.Module):
    """Dot-product attention: q/k/v in one linear, SDPA, an output linear."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(D, 3 * D), nn.Linear(D, D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(nn.functional.scaled_dot_product_attention(*self.a(x).chunk(3, dim=-1)))


class Rms(nn.Module):
    """An RMSNorm written out: pow, mean, rsqrt, multiply by its own weight."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Parameter(torch.ones(D))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.a


RULES = {
    # q/k/v: values D*D + D, weights D*N + N (72 + 144 params; 16*8*8 + 16*8*16 MACs),
    # the product 16 x 16 x 8, the output D*D + D
    "softmax-weighted-product": (SoftmaxMix, {
        C.ATTN_QKV: (2 * (D * D + D + D * N + N), 2 * (N * D * D + N * D * N)),
        C.ATTN_CORE: (0, 2 * N * N * D), C.ATTN_PROJ: (2 * (D * D + D), 2 * N * D * D)}),
    # score, keys and values in one linear D -> 1 + 2D (153 params, 16*8*17 MACs); the core is
    # element-wise (no MACs)
    "aggregation": (Additive, {
        C.ATTN_QKV: (2 * (D * (1 + 2 * D) + 1 + 2 * D), 2 * N * D * (1 + 2 * D)),
        C.ATTN_PROJ: (2 * (D * D + D), 2 * N * D * D)}),
    # q D*D on 16 tokens, the reduction 16 -> 4 on D channels (68 params, 8*16*4 MACs), k/v
    # D -> 2D on 4 tokens; products 16 x 4 x 8 twice; output D*D
    "attention-module": (Reduced, {
        C.ATTN_QKV: (2 * (D * D + D + N * 4 + 4 + D * 2 * D + 2 * D),
                     2 * (N * D * D + D * N * 4 + 4 * D * 2 * D)),
        C.ATTN_CORE: (0, 2 * 2 * N * 4 * D), C.ATTN_PROJ: (2 * (D * D + D), 2 * N * D * D)}),
}


def _breakdown(model: nn.Module) -> dict[C, tuple[int, int]]:
    profile = analyze(neutral_names(model), image_size=16)
    assert profile.warnings == ()
    return {c: (n.params, n.macs) for c, n in profile.components.items() if n.params or n.macs}


@pytest.mark.parametrize("rule", RULES)
def test_each_rule_places_its_fixture_under_neutral_names(rule: str) -> None:
    mixer, expected = RULES[rule]
    with torch.device("meta"):
        model = Net(mixer)
    assert _breakdown(model) == {**FRAME, **expected}


def test_a_norm_is_what_it_computes() -> None:
    # the written-out RMSNorm of each block (weight only): 2 blocks x 2 norms x D = 32 params
    with torch.device("meta"):
        model = Net(Plain, norm=Rms)
    assert _breakdown(model) == {
        **FRAME, C.NORM: (2 * 2 * D, 0),
        C.ATTN_QKV: (2 * (D * 3 * D + 3 * D), 2 * N * D * 3 * D),
        C.ATTN_CORE: (0, 2 * 2 * N * N * D), C.ATTN_PROJ: (2 * (D * D + D), 2 * N * D * D)}


class NormFirst(nn.Module):
    """A LayerNorm on the raw patches, before the patch projection; then the frame's blocks."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.LayerNorm(48), Net(Plain)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        x = self.a(patches(image))
        return self.b.c(self.b.b[1](self.b.b[0](self.b.a(x))).mean(1))


def test_a_norm_on_the_raw_input_is_a_norm_parameters_and_operations() -> None:
    with torch.device("meta"):
        model = NormFirst()
    found = _breakdown(model)
    assert found[C.NORM] == (FRAME[C.NORM][0] + 2 * 48, 0)  # its weight and bias: 96 params
    assert found[C.PATCH_EMBED] == FRAME[C.PATCH_EMBED]


class Idle(nn.Module):
    """The frame with a LayerNorm registered but never run."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = Net(Plain), nn.LayerNorm(D)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.a(image)


def test_parameters_never_read_are_placed_with_a_warning() -> None:
    with torch.device("meta"):
        model = neutral_names(Idle())
    profile = analyze(model, image_size=16)
    assert profile.warnings == (
        f"{NO_EVIDENCE}: m1, 0 MACs, 16 params no operation read, placed like the modules of "
        "their class that ran (norm)",)  # LayerNorm(8): weight and bias, 2 x 8


# the models timed under 1.5 s both ways on a 2-core machine run in the default set
FAST = {"vit_b_16", "swin_t", "timm:pvt_v2_b1", "timm:efficientvit_b1",
        "timm:coatnet_pico_rw_224", "timm:deit_tiny_patch16_224", "timm:levit_128s"}


@pytest.mark.parametrize("name", [
    pytest.param(name, marks=[] if name in FAST else [pytest.mark.slow])
    for name, _ in NAME_BLIND_MODELS])
def test_the_breakdown_is_the_same_under_neutral_names(name: str) -> None:
    if name.startswith("timm:"):
        pytest.importorskip("timm")
    found = name_blindness(meta_builder(name), image_size=dict(NAME_BLIND_MODELS)[name], in_chans=3)
    assert found.holds, found.changes
