"""Rendering helpers and result displays: exact scaled counts, reprs, notebook displays."""

from __future__ import annotations

import pytest

from vitprof import analyze
from vitprof.checks.sweep import Sweep, SweepPoint
from vitprof.core.records import COMPONENTS, Component, Counts
from vitprof.render.pages.markdown import sweep_cells
from vitprof.render.tables import giga, text_table

# torchvision vit_b_16, batch 1: 196 x 768 x 768 patch MACs + 12 blocks of 1,453,954,560 MACs
# + 768 x 1000 head MACs = 17,563,828,224
VIT_B_16_MACS = 196 * 768 * 768 + 12 * 1_453_954_560 + 768 * 1000


@pytest.mark.parametrize(
    ("count", "shown"),
    [
        pytest.param(17_563_828_224, "17.564", id="rounded-up"),
        pytest.param(5_684_615_000_000, "5,684.615", id="thousands-separators"),
        pytest.param(4_096, "0.000004096", id="small-count-in-full"),
        pytest.param(499_999, "0.000499999", id="below-half-a-thousandth"),
        pytest.param(500_000, "0.001", id="half-a-thousandth-rounds-up"),
        pytest.param(0, "0.000", id="zero"),
        # 10**11 images of vit_b_16: beyond a float's 16 digits, still exact
        pytest.param(10**11 * VIT_B_16_MACS, "1,756,382,822,400.000", id="huge"),
        # 27 digits, .499999 thousandths: rounds down; a float keeps 17 digits
        pytest.param(123_456_789_012_345_678_901_499_999, "123,456,789,012,345,678.901",
                     id="beyond-float-precision"),
    ],
)
def test_giga_is_exact_and_never_hides_a_nonzero_count(count: int, shown: str) -> None:
    assert giga(count) == shown


def test_text_table_without_rows() -> None:
    assert text_table(["block", "time ms"], []) == "block  time ms\n-----  -------"


@pytest.fixture(scope="module")
def vit_b_16():
    return analyze("vit_b_16")


def test_profile_repr_is_short_and_holds_the_component_table(vit_b_16) -> None:
    text = repr(vit_b_16)
    assert len(text) < 2_000 and "ParamRecord" not in text and "OpRecord" not in text
    head, summary = text.splitlines()[:2]
    assert head == "Profile(vit_b_16, torchvision, input 1x3x224x224 on meta, inference)"
    assert summary.startswith(f"total: 86,567,656 params, {VIT_B_16_MACS:,} MACs (17.564 GMACs)")
    rows = {line.split()[0]: line for line in text.splitlines()[5:]}
    assert set(rows) == {*(c.value for c in COMPONENTS), "total"}
    assert f"{VIT_B_16_MACS:,}" in rows["total"] and rows["total"].endswith("100.00%")


def test_profile_notebook_displays(vit_b_16) -> None:
    markdown = vit_b_16._repr_markdown_()
    assert "- model: vit_b_16 (recognized as torchvision)" in markdown
    assert f"| total | 86,567,656 | {VIT_B_16_MACS:,} |" in markdown
    html = vit_b_16._repr_html_()
    assert html.count("<table>") == 1 and html.count("<tr>") == 1 + len(COMPONENTS) + 1
    assert f'<td style="text-align: right">{VIT_B_16_MACS:,}</td>' in html
    assert len(html) < 5_000


def test_sweep_of_a_model_without_patches_shows_no_patch_count() -> None:
    counts = {c: Counts() for c in COMPONENTS} | {Component.MLP: Counts(10, 20, 0)}
    result = Sweep("cnn", "image_size", None, (SweepPoint(32, None, counts),))
    headers, (row,) = sweep_cells(result)
    assert row[headers.index("patches")] == "-"
