"""torchvision ViTs: params and MACs per component against the closed form written here.

The closed form below is plain arithmetic on the ViT shapes (n patches, N = n + 1 tokens,
width D, MLP width M, L blocks); it is independent of vitprof's own closed_form module.
"""

from __future__ import annotations

import pytest

from vitprof import Component as C
from vitprof import analyze
from vitprof.models.zoo import ZOO

# name: (patch, layers, width, mlp width)
SHAPES = {
    "vit_b_16": (16, 12, 768, 3072),
    "vit_b_32": (32, 12, 768, 3072),
    "vit_l_16": (16, 24, 1024, 4096),
    "vit_l_32": (32, 24, 1024, 4096),
    "vit_h_14": (14, 32, 1280, 5120),
}
CASES = [(name, 224) for name in SHAPES] + [
    ("vit_b_16", 384), ("vit_l_16", 384), ("vit_l_16", 512), ("vit_h_14", 518)
]


def expected(name: str, image: int, classes: int = 1000) -> dict[C, tuple[int, int]]:
    """(params, MACs) per component for a torchvision VisionTransformer, batch 1."""
    p, layers, d, m = SHAPES[name]
    n = (image // p) ** 2
    tokens = n + 1
    return {
        C.PATCH_EMBED: (3 * p * p * d + d, n * 3 * p * p * d),
        C.CONV: (0, 0),
        C.TOKENS: (d + tokens * d, 0),
        C.ATTN_QKV: (layers * (3 * d * d + 3 * d), layers * tokens * d * 3 * d),
        C.ATTN_CORE: (0, layers * 2 * tokens * tokens * d),
        C.ATTN_PROJ: (layers * (d * d + d), layers * tokens * d * d),
        C.MLP: (layers * (2 * d * m + m + d), layers * 2 * tokens * d * m),
        C.NORM: (layers * 4 * d + 2 * d, 0),
        C.HEAD: (d * classes + classes, d * classes),
        C.OTHER: (0, 0),
    }


@pytest.mark.parametrize(("name", "image"), CASES, ids=[f"{n}@{s}" for n, s in CASES])
def test_components_equal_closed_form(name: str, image: int) -> None:
    profile = analyze(name, image_size=image)
    got = {c: (v.params, v.macs) for c, v in profile.components.items()}
    assert got == expected(name, image)
    assert profile.unsupported_ops == {}
    assert profile.fallback is None


@pytest.mark.parametrize(("name", "image"), CASES, ids=[f"{n}@{s}" for n, s in CASES])
def test_matches_torchvision_published_figures(name: str, image: int) -> None:
    published = ZOO[name].published(image, 1000)
    if published is None:
        pytest.skip(f"torchvision publishes no weights for {name} at {image}")
    profile = analyze(name, image_size=image)
    assert profile.totals.params == published.params
    # torchvision's _ops are GMACs (labelled GFLOPS), printed to a few decimals: match them
    # at the precision they are printed with
    decimals = len(repr(published.gmacs).partition(".")[2])
    assert round(profile.totals.macs / 1e9, decimals) == published.gmacs


def test_vit_b_16_literals() -> None:
    profile = analyze("vit_b_16")
    # 196 * 768 * 768 = 115_605_504 (patch conv: 196 patches x 768 outputs x 3*16*16 inputs)
    assert profile.components[C.PATCH_EMBED].macs == 115_605_504
    # 12 blocks x 2 products (QK^T, AV) x 197^2 x 768 = 715_327_488
    assert profile.components[C.ATTN_CORE].macs == 715_327_488
    # 115_605_504 + 12 * (197*768*2304 + 2*197^2*768 + 197*768*768 + 2*197*768*3072)
    #   + 768*1000 = 17_563_828_224
    assert profile.totals.macs == 17_563_828_224
    assert profile.totals.flops == 2 * 17_563_828_224


def test_vit_b_16_vector_flops() -> None:
    c = analyze("vit_b_16").components
    n, d, m, layers, heads = 197, 768, 3072, 12, 12
    assert c[C.PATCH_EMBED].vector_flops == 196 * d  # conv bias: 150_528
    assert c[C.TOKENS].vector_flops == n * d  # position embedding add: 151_296
    assert c[C.ATTN_QKV].vector_flops == layers * n * 3 * d  # qkv bias: 5_446_656
    # per score: scale 1 + softmax 5 -> 12 * 12 * 197^2 * 6 = 33_530_976
    assert c[C.ATTN_CORE].vector_flops == layers * heads * n * n * 6
    # out-proj bias + the residual add that closes the attention branch
    assert c[C.ATTN_PROJ].vector_flops == layers * 2 * n * d
    # fc1 bias + GELU (5) + fc2 bias + residual add
    assert c[C.MLP].vector_flops == layers * (n * m + 5 * n * m + n * d + n * d)
    # 25 LayerNorms (2 per block + final) at 7 per element (5 + weight + bias)
    assert c[C.NORM].vector_flops == (2 * layers + 1) * n * d * 7
    assert c[C.HEAD].vector_flops == 1000  # head bias


def test_blocks_sum_to_encoder_components() -> None:
    profile = analyze("vit_b_32")
    assert [b.index for b in profile.blocks] == list(range(12))
    for component in (C.ATTN_QKV, C.ATTN_CORE, C.ATTN_PROJ, C.MLP):
        in_blocks = sum(b.components[component].macs for b in profile.blocks)
        assert in_blocks == profile.components[component].macs
    # 49 patches + 1 token: per block 50*768*2304 + 2*50^2*768 + 50*768^2 + 2*50*768*3072
    assert profile.blocks[0].total.macs == 50 * 768 * 2304 + 2 * 50**2 * 768 + 50 * 768**2 + (
        2 * 50 * 768 * 3072
    )


def test_batch_size_scales_macs_not_params() -> None:
    one, four = analyze("vit_b_32"), analyze("vit_b_32", batch_size=4)
    assert four.totals.macs == 4 * one.totals.macs
    assert four.totals.params == one.totals.params
    assert four.input_shape == (4, 3, 224, 224)
