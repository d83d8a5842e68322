"""``vit_22b_parallel``, vitprof's ViT-22B-style model, against its closed form, and the labels
that keep it apart from ``vit_22b`` (torchvision's class at ViT-22B's sizes).

Closed form of a block (Dehghani et al. 2023's shapes; N tokens, width D, MLP F, head width d):
params 3 D^2 (fused q, k, v, no biases) + D^2 (out, no bias) + 2 D F + F + D (MLP, with biases)
+ D (the one RMSNorm, no bias) + 2 d (QK-norm: an RMSNorm of d on q and one on k); MACs
3 N D^2 + N D^2 + 2 N^2 D (q k^T and A v) + 2 N D F.
"""

from __future__ import annotations

import pytest
import torch

from vitprof import analyze
from vitprof.core.errors import UserError
from vitprof.core.records import Component as C
from vitprof.models.spec_inference import spec_from_model
from vitprof.models.vit22b import ParallelViT
from vitprof.models.zoo import ZOO
from vitprof.recognize.tables import NO_TABLE, recognize


def block(n: int, d: int, f: int, head: int) -> dict[C, tuple[int, int]]:
    """(params, MACs) per component of one parallel block, by the closed form above."""
    return {
        C.ATTN_QKV: (3 * d * d, 3 * n * d * d),
        C.ATTN_CORE: (0, 2 * n * n * d),
        C.ATTN_PROJ: (d * d, n * d * d),
        C.MLP: (2 * d * f + f + d, 2 * n * d * f),
        C.NORM: (d + 2 * head, 0),
    }


def measured(profile, index: int) -> dict[C, tuple[int, int]]:
    counts = profile.blocks[index].components
    return {c: (counts[c].params, counts[c].macs) for c in block(1, 1, 1, 1)}


def test_small_config_matches_the_closed_form() -> None:
    # 28 px, patch 14: 4 patches + the class token, N = 5; D = 64, 4 heads of d = 16, F = 256
    with torch.device("meta"):
        model = ParallelViT(28, 14, 64, 2, 4, 256, 10)
    profile = analyze(model)
    assert recognize(model).family == NO_TABLE and not profile.warnings
    expected = block(5, 64, 256, 16)
    # qkv 3 x 64^2 = 12,288 / 61,440; proj 4,096 / 20,480; core 2 x 25 x 64 = 3,200 MACs;
    # MLP 2 x 64 x 256 + 256 + 64 = 33,088 / 163,840; norms 64 + 2 x 16 = 96
    assert expected == {C.ATTN_QKV: (12_288, 61_440), C.ATTN_CORE: (0, 3_200),
                        C.ATTN_PROJ: (4_096, 20_480), C.MLP: (33_088, 163_840), C.NORM: (96, 0)}
    assert [measured(profile, i) for i in range(2)] == [expected, expected]
    # patch (3 x 14^2 + 1) x 64 = 37,696; tokens 64 + 5 x 64 = 384; 2 blocks x 49,568;
    # final norm 64; head 64 x 10 + 10 = 650
    assert profile.totals.params == 37_696 + 384 + 2 * 49_568 + 64 + 650 == 137_930
    # patch 4 x 588 x 64 = 150,528; 2 blocks x 248,960; head 64 x 10 = 640
    assert profile.totals.macs == 150_528 + 2 * 248_960 + 640 == 649_088


def test_vit_22b_sizes_match_the_closed_form() -> None:
    # 224 px, patch 14: 256 patches + the class token, N = 257; D = 6144, 48 heads of
    # d = 128, F = 24576, 48 blocks
    profile = analyze("vit_22b_parallel")
    expected = block(257, 6144, 24576, 128)
    assert measured(profile, 0) == measured(profile, 47) == expected
    params = sum(p for p, _ in expected.values())
    macs = sum(m for _, m in expected.values())
    # 4 D^2 + 2 D F = 452,984,832 weights, + 24576 + 6144 = 30,720 MLP biases,
    # + 6144 + 2 x 128 = 6,400 norm weights
    assert params == 4 * 6144**2 + 2 * 6144 * 24576 + 30_720 + 6_400 == 453_021_952
    # 257 x (4 x 6144^2 + 2 x 6144 x 24576) + 2 x 257^2 x 6144
    assert macs == 117_228_711_936
    # + patch (3 x 14^2 + 1) x 6144 = 3,618,816, tokens 258 x 6144 = 1,585,152, final norm
    # 6,144, head 6144 x 1000 + 1000 = 6,145,000
    outside = 3_618_816 + 1_585_152 + 6_144 + 6_145_000
    assert profile.totals.params == 48 * params + outside == 21_756_408_808
    # + patch 256 x 588 x 6144 = 924,844,032, head 6,144,000
    assert profile.totals.macs == 48 * macs + 924_844_032 + 6_144_000 == 5_627_909_160_960


def test_vit_22b_parallel_differs_from_torchvision_vit_22b_in_params_only() -> None:
    # same MACs (biases and norms add none); torchvision's vit_22b has per block the biases of
    # in_proj (3 D) and out_proj (D), two LayerNorms with biases (4 D) where ours has one
    # RMSNorm (D), no QK-norm (2 d); its final LayerNorm has a bias (D):
    # 48 x (3 x 6144 + 6144 + 4 x 6144 - 6144 - 2 x 128) + 6144
    ours, theirs = analyze("vit_22b_parallel"), analyze("vit_22b")
    assert ours.totals.macs == theirs.totals.macs
    assert theirs.totals.params - ours.totals.params == 48 * (7 * 6144 - 256) + 6144


def test_no_spec_describes_it() -> None:
    with torch.device("meta"):
        model = ParallelViT(28, 14, 64, 2, 4, 256, 10)
    with pytest.raises(UserError, match="parallel attention/MLP blocks, QK-norm"):
        spec_from_model(model)


@pytest.mark.parametrize(
    ("model", "label"),
    [
        pytest.param("vit_22b", "torchvision's VisionTransformer at ViT-22B's sizes", id="tv"),
        pytest.param("vit_22b", "not ViT-22B itself", id="tv-not"),
        pytest.param("vit_22b_parallel", "ViT-22B-style (Dehghani et al. 2023), written by "
                     "vitprof: parallel attention/MLP blocks on one norm, QK-norm, "
                     "bias-free q/k/v/out linears, RMSNorms", id="parallel"),
    ],
)
def test_zoo_labels(model: str, label: str) -> None:
    assert label in ZOO[model].description
