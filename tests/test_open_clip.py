"""OpenCLIP's image towers, a model library added as one file (``open_clip:NAME``): counted
exactly, held against ``FlopCounterMode``, unknown names refused in one line. Skipped only where
open_clip is not installed (the ``open_clip`` extra; the test extra installs it)."""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from vitprof import analyze
from vitprof.cli.main import main
from vitprof.models.zoo import build

pytest.importorskip("open_clip")

# ViT-B-32's tower at its config's 224: 7 * 7 = 49 patches + the class token = 50 tokens, D 768,
# MLP 3072, 12 blocks, projected to the 512-wide embedding
TOKENS, WIDTH, MLP, DEPTH = 50, 768, 3072, 12
PATCH_MACS = 49 * WIDTH * 3 * 32 * 32  # = 115_605_504
BLOCK_MACS = (
    TOKENS * WIDTH * 3 * WIDTH  # qkv: 88_473_600
    + 2 * TOKENS * TOKENS * WIDTH  # q k^T and attention x v: 3_840_000
    + TOKENS * WIDTH * WIDTH  # out projection: 29_491_200
    + 2 * TOKENS * WIDTH * MLP  # MLP: 235_929_600
)
PROJECTION_MACS = WIDTH * 512  # the class token to the embedding: 393_216
VIT_B_32_MACS = PATCH_MACS + DEPTH * BLOCK_MACS + PROJECTION_MACS  # = 4_408_811_520


def test_vit_b_32_tower_is_counted_at_its_configs_image_size() -> None:
    profile = analyze("open_clip:ViT-B-32")
    assert profile.input_shape == (1, 3, 224, 224)  # vision_cfg.image_size
    assert profile.totals.macs == VIT_B_32_MACS
    # patch conv 768*3072 (no bias); class token 768 + position embedding 50*768; pre and post
    # LayerNorms 2*2*768; per block: qkv 768*2304 + 2304, out 768*768 + 768, MLP
    # 2*768*3072 + 3072 + 768, two LayerNorms 4*768; projection 768*512
    block = (WIDTH * 3 * WIDTH + 3 * WIDTH + WIDTH * WIDTH + WIDTH
             + 2 * WIDTH * MLP + MLP + WIDTH + 4 * WIDTH)
    assert profile.totals.params == (WIDTH * 3072 + WIDTH + TOKENS * WIDTH + 4 * WIDTH
                                     + DEPTH * block + WIDTH * 512)  # = 87_849_216
    assert profile.components["other"].macs == 0


def test_vit_b_32_totals_equal_flopcountermode() -> None:
    profile = analyze("open_clip:ViT-B-32")
    module = build("open_clip:ViT-B-32", device="meta").module
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        module(torch.empty(1, 3, 224, 224, device="meta"))
    assert counter.get_total_flops() == 2 * profile.totals.macs == 2 * VIT_B_32_MACS


def test_an_image_size_asked_for_builds_the_tower_for_it() -> None:
    # 160 / 32 = 5: 25 patches + the class token = 26 tokens
    profile = analyze("open_clip:ViT-B-32", image_size=160)
    assert profile.input_shape == (1, 3, 160, 160)
    tokens = 26
    block = (tokens * WIDTH * 3 * WIDTH + 2 * tokens * tokens * WIDTH + tokens * WIDTH * WIDTH
             + 2 * tokens * WIDTH * MLP)
    assert profile.totals.macs == 25 * WIDTH * 3072 + DEPTH * block + PROJECTION_MACS


@pytest.mark.parametrize(("argv", "message"), [
    (["analyze", "open_clip:ViT-B-33"],
     "vitprof: error: unknown open_clip model 'ViT-B-33'; did you mean open_clip:ViT-B-32"),
    (["analyze", "open_clip:ViT-B-32", "--num-classes", "10"],
     "vitprof: error: open_clip:ViT-B-32 is an image tower without a classifier"),
])
def test_refusals_are_one_line(argv: list[str], message: str, capsys) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1


def test_vitprof_models_lists_open_clip(capsys) -> None:
    assert main(["models"]) == 0
    assert "open_clip:NAME" in capsys.readouterr().out
