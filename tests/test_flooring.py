"""A size is refused only when the model refuses it; a patch convolution that floors the image
is counted as it computes, and said (issue 28, audit 1: ``timm:vit_so400m_patch14_siglip_384``
was refused at its own default size, "384 is not divisible by the patch size 14")."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torchvision.models import vit_b_16

from vitprof import UserError, analyze
from vitprof.cli.main import main
from vitprof.count.flooring import Floor, unread_tail
from vitprof.models.closed_form import closed_form
from vitprof.models.spec_inference import spec_from_model

# a SigLIP-shaped timm ViT, patch 14, small: D = 16, 1 block, 2 heads, MLP 64, 10 classes
SIGLIP_LIKE = """\
from timm.models.vision_transformer import VisionTransformer


def siglip_like(img_size=30):
    return VisionTransformer(img_size=img_size, patch_size=14, embed_dim=16, depth=1,
                             num_heads=2, num_classes=10)
"""
# floor(30 / 14) = 2: 2 x 2 = 4 patches, N = 5 tokens with the class token
# patch conv 4 x 16 x (3 x 14 x 14) = 37,632; qkv 5 x 16 x 48 = 3,840; QK^T + AV 2 x 5^2 x 16
# = 800; proj 5 x 16 x 16 = 1,280; MLP 2 x 5 x 16 x 64 = 10,240; head 16 x 10 = 160
SIGLIP_LIKE_MACS = 37_632 + 3_840 + 800 + 1_280 + 10_240 + 160
FLOORED_30 = ("patch_embed.proj (stride 14) floors its 30x30 input to 2x2, leaving the last 2 "
              "rows and 2 columns unread")  # 30 = 2 x 14 + 2


@pytest.fixture
def siglip_like(tmp_path: Path) -> str:
    pytest.importorskip("timm")
    source = tmp_path / "siglip_like.py"
    source.write_text(SIGLIP_LIKE)
    return f"{source}:siglip_like"


@pytest.mark.parametrize(
    ("size", "kernel", "stride", "padding", "dilation", "unread"),
    [
        pytest.param(384, 14, 14, 0, 1, 384 - 27 * 14, id="patch-14-of-384"),
        pytest.param(224, 16, 16, 0, 1, 0, id="patch-16-of-224"),
        # (224 - 3) // 2 + 1 = 111 windows, the last reads rows 220..222 of 0..223
        pytest.param(224, 3, 2, 0, 1, 223 - 222, id="3x3-stride-2-unpadded"),
        # 112 windows over 1 + 224 + 1 padded rows: the last reads rows 222..224, the last real
        pytest.param(224, 3, 2, 1, 1, 0, id="3x3-stride-2-padded"),
        pytest.param(57, 2, 2, 0, 1, 57 - 28 * 2, id="2x2-downsampling-of-an-odd-map"),
        pytest.param(56, 1, 2, 0, 1, 0, id="1x1-stride-2-skips-by-design"),
        pytest.param(10, 3, 1, 0, 2, 0, id="dilated-skips-by-design"),
    ],
)
def test_unread_tail(size: int, kernel: int, stride: int, padding: int, dilation: int,
                     unread: int) -> None:
    assert unread_tail(size, kernel, stride, padding, dilation) == unread


def test_the_statement_names_only_the_sides_left_unread() -> None:
    floor = Floor("stem", (224, 225), (14, 14), (16, 16), (0, 225 - 14 * 16))
    assert floor.text() == ("stem (stride 16) floors its 224x225 input to 14x14, leaving the last "
                            "1 column unread")


def test_a_floored_size_is_counted_and_said(siglip_like: str, capsys) -> None:
    assert main(["analyze", siglip_like]) == 0
    out, err = capsys.readouterr()
    assert err == f"vitprof: warning: {FLOORED_30}\n"
    assert "input: batch 1, 3x30x30" in out
    assert f"{SIGLIP_LIKE_MACS:,} MACs" in out and SIGLIP_LIKE_MACS == 53_952


@pytest.mark.parametrize(
    ("size", "warnings"),
    [
        pytest.param(28, (), id="28-divides"),  # 28 = 2 x 14: nothing floors
        pytest.param(30, (FLOORED_30,), id="30"),
        # 32 = 2 x 14 + 4
        pytest.param(32, ("patch_embed.proj (stride 14) floors its 32x32 input to 2x2, leaving "
                          "the last 4 rows and 4 columns unread",), id="32"),
    ],
)
def test_the_floored_grid_is_counted_as_the_closed_form(
    siglip_like: str, size: int, warnings: tuple[str, ...]
) -> None:
    """28, 30 and 32 make the same 2 x 2 grid: the same counts, which the closed form of the
    inferred spec (which refused 30 and 32 before) gives too."""
    profile = analyze(siglip_like, image_size=size)
    assert profile.totals.macs == SIGLIP_LIKE_MACS and profile.warnings == warnings
    with torch.device("meta"):
        from timm.models.vision_transformer import VisionTransformer

        model = VisionTransformer(img_size=size, patch_size=14, embed_dim=16, depth=1,
                                  num_heads=2, num_classes=10)
    assert closed_form(spec_from_model(model)).components == profile.components


def test_the_formula_says_where_it_floors(siglip_like: str, capsys) -> None:
    assert main(["formula", siglip_like]) == 0
    out = capsys.readouterr().out
    assert ("floored: the patch embedding (stride 14) floors its 30x30 input to 2x2, leaving "
            "the last 2 rows and 2 columns unread") in out
    assert f"{SIGLIP_LIKE_MACS:,} MACs" in out


def test_a_size_the_model_refuses_is_refused_with_its_reason(siglip_like: str) -> None:
    """timm's strict image size and torchvision's ViT refuse a size they were not built for:
    their own assertion, in one line."""
    pytest.importorskip("timm")
    from timm.models.vision_transformer import VisionTransformer

    with torch.device("meta"):
        timm_model = VisionTransformer(img_size=28, patch_size=14, embed_dim=16, depth=1,
                                       num_heads=2, num_classes=10)
        torchvision_model = vit_b_16()
    with pytest.raises(UserError) as timm_refusal:
        analyze(timm_model, image_size=30)
    assert str(timm_refusal.value) == (
        "running VisionTransformer failed: AssertionError: Input height (30) doesn't match "
        "model (28). (input of shape 1x3x30x30, on meta)")
    with pytest.raises(UserError) as torchvision_refusal:
        analyze(torchvision_model, image_size=225)
    assert str(torchvision_refusal.value) == (
        "running VisionTransformer failed: AssertionError: Wrong image height! Expected 224 but "
        "got 225! (input of shape 1x3x225x225, on meta)")


# SigLIP So400m/14 at 384: floor(384 / 14) = 27, 27 x 27 = 729 patches, no class token, D = 1152,
# 27 blocks, MLP 4304; one block 729 x 1152 x (3 x 1152 + 1152 + 2 x 4304) + 2 x 729^2 x 1152
# = 12,323,342,592 MACs; the patch conv 729 x 1152 x (3 x 14 x 14) = 493,807,104
SO400M_BODY = 27 * (729 * 1152 * (3 * 1152 + 1152 + 2 * 4304) + 2 * 729**2 * 1152) \
    + 729 * 1152 * 3 * 14 * 14
# the attention-pooling head on one latent query: q 1152^2, k and v 729 x 1152 x 2 x 1152,
# QK^T + AV 2 x 729 x 1152, proj 1152^2, MLP 2 x 1152 x 4304
SO400M_MAP_HEAD = 1152**2 + 729 * 1152 * 2 * 1152 + 2 * 729 * 1152 + 1152**2 + 2 * 1152 * 4304


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "macs"),
    [
        pytest.param("vit_so400m_patch14_siglip_384", SO400M_BODY + SO400M_MAP_HEAD, id="map"),
        pytest.param("vit_so400m_patch14_siglip_gap_384", SO400M_BODY, id="gap"),  # no head
    ],
)
def test_so400m_at_its_own_384_reconciles_with_timms_row(name: str, macs: int) -> None:
    """The two rows of timm's table the page listed as "not counted": counted at 384 on
    meta, and reconciled with the published param_count and infer_gmacs."""
    pytest.importorskip("timm")
    from vitprof.checks.crosscheck.peers.timm_published import explain, load_table
    from vitprof.study.published_rows import count_row

    table = load_table()
    row = table.find(name, 384)
    assert row is not None
    profile = count_row(row)
    assert profile.totals.macs == macs
    assert SO400M_BODY + SO400M_MAP_HEAD == 335_173_224_960
    assert profile.warnings == ("patch_embed.proj (stride 14) floors its 384x384 input to 27x27, "
                                "leaving the last 6 rows and 6 columns unread",)  # 384 - 27 x 14
    assert explain(profile, f"timm:{name}", row, table).reconciled
