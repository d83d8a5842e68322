"""open_clip's published model profile: the shipped data, the ``open_clip-published`` peer and its
page. Every tower is built on the meta device, without weights."""

from __future__ import annotations

from pathlib import Path

import pytest
from torch import nn

from vitprof.checks.crosscheck import run_crosscheck
from vitprof.checks.crosscheck.peers.open_clip_published import (
    PEER,
    OpenClipRow,
    load_table,
    width_note,
)
from vitprof.cli.main import main
from vitprof.study.open_clip_rows import open_clip_rows
from vitprof.study.pages.open_clip_published import open_clip_published_page
from vitprof.workload import InputRequest

pytest.importorskip("open_clip")
ROOT = Path(__file__).resolve().parents[1]
OPEN_CLIP_COMMIT = "29b90b8dde9125c479c0ddbab477310f665a0435"

# ViT-B-32's image tower at 224 px, batch 1: 7 x 7 = 49 patches of 32 x 32, 50 tokens of 768
PATCH_EMBED = 49 * (3 * 32 * 32) * 768  # 115_605_504
BLOCK = (50 * 768 * 3 * 768  # qkv: 88_473_600
         + 2 * 50 * 50 * 768  # QK^T and AV: 3_840_000
         + 50 * 768 * 768  # out proj: 29_491_200
         + 2 * 50 * 768 * 3072)  # mlp: 235_929_600; the block: 357_734_400
PROJ = 768 * 512  # the class token to the 512-wide embedding: 393_216
VIT_B_32_MACS = PATCH_EMBED + 12 * BLOCK + PROJ  # 4_408_811_520
VIT_B_32_PARAMS = (3 * 32 * 32 * 768  # patch conv, no bias: 2_359_296
                   + 768 + 50 * 768 + 2 * 768  # class token, positions, ln_pre: 40_704
                   + 12 * (2 * 768 + 768 * 3 * 768 + 3 * 768 + 768 * 768 + 768 + 2 * 768
                           + 768 * 3072 + 3072 + 3072 * 768 + 768)  # 12 x 7_087_872
                   + 2 * 768 + 768 * 512)  # ln_post, proj: 394_752; in all 87_849_216


def test_shipped_table_names_its_source_and_has_every_image_tower_row() -> None:
    table = load_table()
    assert table.commit == OPEN_CLIP_COMMIT and table.date == "2023-11-22"
    assert table.source.endswith(f"{OPEN_CLIP_COMMIT}/docs/model_profile.csv")
    assert len(table.rows) == 85  # the file's 86 lines less its column names
    row = table.find("ViT-B-32")
    assert (row.image_size, row.image_width, row.image_mparams, row.image_gflops) == (
        224, 768, "87.85", "8.82")
    assert (row.params, row.flops) == (87_850_000, 8_820_000_000)  # exactly, as printed


def test_crosscheck_of_an_open_clip_tower_has_its_published_row_with_residual_0() -> None:
    (row,) = run_crosscheck("open_clip:ViT-B-32", peers=[PEER]).rows
    assert row.macs == 8_820_000_000 // 2  # FLOPs at 2 per MAC, halved
    assert row.params == 87_850_000
    assert row.delta_macs == 8_820_000_000 // 2 - VIT_B_32_MACS  # 1_188_480
    assert row.delta_params == 87_850_000 - VIT_B_32_PARAMS  # 784
    # 2 x 4_408_811_520 = 8_817_623_040 FLOPs, printed 8.82: (8_820_000_000 - 8_817_623_040) / 2
    assert [(c.macs, c.params) for c in row.causes] == [(1_188_480, 0), (0, 784)]
    assert row.residual_macs == 0 and row.residual_params == 0


@pytest.mark.parametrize(("model", "kwargs", "note"), [
    ("open_clip:ViT-B-32", {"image_size": 256},
     "open_clip's table has open_clip:ViT-B-32 at 224px only, not 256px"),
    ("open_clip:ViT-B-32", {"batch_size": 2},
     "open_clip's table is per image; run with batch size 1, not 2"),
    ("timm:test_vit", {}, "only for open_clip:NAME models"),
])
def test_a_case_without_a_row_says_why(model: str, kwargs: dict, note: str) -> None:
    (row,) = run_crosscheck(model, InputRequest(**kwargs), peers=[PEER]).rows
    assert row.macs is None and row.note == note


def _tower(**attributes: int) -> nn.Module:
    tower, trunk = nn.Module(), nn.Module()
    for name, value in attributes.items():
        setattr(trunk, name, value)
    tower.trunk = trunk
    return tower


def test_image_width_is_named_where_it_is_the_config_default_not_the_towers_width() -> None:
    row = OpenClipRow("ViT-SO400M-14-SigLIP", 224, 768, "427.68", "220.35")
    assert width_note(row, _tower(embed_dim=1152)) == (
        "image_width 768 is not the tower's width 1152 (CLIPVisionCfg's default: the config "
        "sets no width for this timm tower)")
    assert width_note(row, _tower(embed_dim=768)) == ""  # the default happens to be right


def test_page_has_one_verdict_per_row() -> None:
    page = open_clip_published_page(*open_clip_rows(["ViT-S-32", "RN50"]))
    assert page.name == "open_clip_published.md"
    rows = [line for line in page.text.splitlines() if line.startswith("| ViT-S-32 |")
            or line.startswith("| RN50 |")]
    assert len(rows) == 2 and all(line.endswith("| reconciled |") for line in rows)
    assert "- vision-transformer towers: 1, reconciled 1; other towers (ResNet, ConvNeXt...): " \
           "1, reconciled 1" in page.text


@pytest.mark.slow
@pytest.mark.exhaustive  # builds all 85 towers on meta: 2 min on 2 idle cores, 15 at load 13
def test_the_committed_page_is_up_to_date() -> None:
    if not (ROOT / "reports" / "open_clip_published.md").is_file():
        pytest.skip("reports/open_clip_published.md not generated yet")
    assert main(["report", "open_clip-published", "--check", "--out", str(ROOT / "reports")]) == 0
