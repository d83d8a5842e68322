"""Rendering: exact scaled counts, reprs, notebook displays, the column vocabulary, documents
and the format registry."""

from __future__ import annotations

import csv
import io
import json

import pytest

from vitprof import analyze
from vitprof.core.records import COMPONENTS, Component, Counts, OpRecord, ParamRecord
from vitprof.core.vocab import CellKind
from vitprof.count.result import Profile
from vitprof.render.document import COLUMNS, Col, Column, cell, giga
from vitprof.render.formats import FORMATS, render, text_table
from vitprof.render.sweep import sweep_cells
from vitprof.render.tables import profile_document
from vitprof.sweep import Sweep, SweepPoint

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
    assert head == ("Profile(vit_b_16, graph (torchvision table agrees), input 1x3x224x224 on "
                    "meta, inference)")
    assert summary.startswith(f"total: 86,567,656 params, {VIT_B_16_MACS:,} MACs (17.564 GMACs)")
    rows = {line.split()[0]: line for line in text.splitlines()[5:]}
    assert set(rows) == {*(c.value for c in COMPONENTS), "total"}
    assert f"{VIT_B_16_MACS:,}" in rows["total"] and rows["total"].endswith("100.00%")


def test_profile_notebook_displays(vit_b_16) -> None:
    markdown = vit_b_16._repr_markdown_()
    assert "- model: vit_b_16 (recognized as graph (torchvision table agrees))" in markdown
    assert f"| total | 86,567,656 | {VIT_B_16_MACS:,} |" in markdown
    html = vit_b_16._repr_html_()
    assert html.count("<table>") == 1 and html.count("<tr>") == 1 + len(COMPONENTS) + 1
    assert f'<td style="text-align: right">{VIT_B_16_MACS:,}</td>' in html
    assert len(html) < 5_000


def test_sweep_of_a_model_without_patches_shows_no_patch_count() -> None:
    counts = {c: Counts() for c in COMPONENTS} | {Component.MLP: Counts(10, 20, 0)}
    result = Sweep("cnn", "image_size", None,
                   (SweepPoint(32, None, counts, (1, 3, 32, 32), "float32"),))
    headers, (row,) = sweep_cells(result)
    assert row[headers.index("patches")] == "-"


# ------------------------------------------------------------------ documents and formats


def comma_profile() -> Profile:
    """A profile by hand whose module and op names hold commas and quotes: 2 ops of 6 and 4
    MACs in ``blocks.0,1`` (a name a user's ModuleDict may give), 5 params in ``head "x"``."""
    ops = (OpRecord("aten.mm", "blocks.0,1", Component.MLP, None, 6, 0),
           OpRecord("my_ops.fused,gelu", "blocks.0,1", Component.MLP, None, 4, 3))
    params = (ParamRecord('head "x".weight', 5, Component.HEAD, None),)
    return Profile("commas", (1, 3, 8, 8), "meta", "torch", "hand", params, ops)


@pytest.mark.parametrize("by", ["module", "op"])
def test_csv_keeps_a_comma_inside_a_cell(by: str) -> None:
    """Cells are quoted by the csv module, never stripped of their commas."""
    text = render(profile_document(comma_profile(), by), "csv")
    header, *rows = list(csv.reader(io.StringIO(text)))
    names = {row[0] for row in rows}
    if by == "module":  # the module's MLP row (6 + 4 MACs) and the parameters' owner
        assert names == {"blocks.0,1", 'head "x"'}
        assert next(r for r in rows if r[0] == "blocks.0,1")[header.index("macs")] == "10"
    else:  # each op, and the (parameters) row
        assert names == {"aten.mm", "my_ops.fused,gelu", "(parameters)"}
    # 6 + 4 MACs, 5 params, 3 vector FLOPs in every view
    assert sum(int(r[header.index("macs")]) for r in rows) == 6 + 4
    assert sum(int(r[header.index("params")]) for r in rows) == 5
    assert sum(int(r[header.index("vector_flops")]) for r in rows) == 3


@pytest.mark.parametrize(
    ("kind", "value", "shown"),
    [
        pytest.param(CellKind.TEXT, "attn_core", "attn_core", id="text"),
        pytest.param(CellKind.COUNT, 1_234_567, "1,234,567", id="count"),
        pytest.param(CellKind.COUNT, 17.564, "17.564", id="count-float-as-reported"),
        pytest.param(CellKind.SIGNED, -1_000, "-1,000", id="signed-negative"),
        pytest.param(CellKind.SIGNED, 1_000, "+1,000", id="signed-positive"),
        pytest.param(CellKind.SIGNED, 0, "0", id="signed-zero-has-no-sign"),
        pytest.param(CellKind.SHARE, 0.0407, "4.07%", id="share"),
        pytest.param(CellKind.PERCENT, 0.407, "40.7%", id="percent"),
        pytest.param(CellKind.GIGA, 17_563_828_224, "17.564", id="giga"),
        pytest.param(CellKind.MS, 0.0125, "12.500", id="ms"),
        pytest.param(CellKind.RATE, 2.5e9, "2.50", id="rate"),
        pytest.param(CellKind.RATIO, 2.0, "2.00", id="ratio"),
        pytest.param(CellKind.MIB, 3 * 2**20, "3.00", id="mib"),
        pytest.param(CellKind.COUNT, None, "", id="none-is-empty"),
    ],
)
def test_a_cell_is_written_by_its_column_kind(kind: CellKind, value: object, shown: str) -> None:
    assert cell(Column("x", "x", kind), value) == shown


def test_every_column_of_the_vocabulary_has_a_header_and_a_kind() -> None:
    assert set(COLUMNS) == set(Col)
    assert all(header and isinstance(kind, CellKind) for header, kind in COLUMNS.values())


def test_render_refuses_an_unknown_format_and_a_form_the_result_lacks() -> None:
    document = profile_document(comma_profile())
    with pytest.raises(ValueError, match="unknown format yaml"):
        render(document, "yaml")
    with pytest.raises(ValueError, match="no checks to write as JUnit"):
        render(document, "junit")


def test_every_format_of_the_registry_writes_a_profile() -> None:
    """table and markdown: the total row; json: the totals; csv: the rows; html: a table."""
    document = profile_document(comma_profile())
    written = {fmt: render(document, fmt) for fmt in FORMATS if fmt != "junit"}
    assert set(written) == {"table", "markdown", "json", "csv", "html"}
    # 5 params, 6 + 4 MACs, 20 FLOPs, 3 vector FLOPs
    total = next(line for line in written["table"].splitlines() if line.startswith("total "))
    assert total.split() == ["total", "5", "10", "20", "3", "100.00%"]
    assert "| total | 5 | 10 | 20 | 3 | 100.00% |" in written["markdown"]
    assert json.loads(written["json"])["totals"] == {"params": 5, "macs": 10, "flops": 20,
                                                     "vector_flops": 3}
    assert len(list(csv.reader(io.StringIO(written["csv"])))) == 1 + len(COMPONENTS)
    assert written["html"].count("<table>") == 1
