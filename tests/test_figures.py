"""The report figures: what each one's data function computes (checked by arithmetic), that two
renders of the same data are the same bytes, how the drawings scale and mark, and that every
figure is linked from the page that discusses it.

Expected numbers are derived by the arithmetic written beside them.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text

from vitprof import analyze
from vitprof.core.records import COMPONENTS
from vitprof.models.closed_form import ViTSpec
from vitprof.models.zoo import ZOO
from vitprof.render import figures, memory_report, world_size_figure
from vitprof.study.generate import NOTE_MODELS
from vitprof.study.pages import (
    correction_figures,
    timm_published,
    token_reduction,  # noqa: F401 (registers its figure's kind)
    zoo_table,
)
from vitprof.study.pages.markdown import blocks_differ, same_blocks_text
from vitprof.sweep import size_marks, sweep

REPORTS = Path(__file__).resolve().parents[1] / "reports"


# torchvision vit_b_16 per block at N tokens, D = 768, 12 heads of 64, M = 3072
def attention_layer(n: int) -> int:
    return n * 768 * 2304 + 2 * 12 * n * n * 64 + n * 768 * 768  # qkv + QK^T, AV + proj


def mlp(n: int) -> int:
    return 2 * n * 768 * 3072


def drawn(figure: figures.FigureData) -> Figure:
    """``figure`` drawn onto a fresh matplotlib Figure, as :func:`figures.save` draws it."""
    fig = Figure(figsize=figures.SIZE_IN, dpi=figures.DPI)
    FigureCanvasAgg(fig)
    figures._DRAW[figure.kind](fig, figure.data)
    return fig


# ------------------------------------------------------------------------------- model pages


def test_component_shares_leave_out_zero_components_and_every_one_has_a_colour() -> None:
    profile = analyze("vit_b_16")
    data = figures.component_shares(profile).data
    assert "conv" not in data["components"] and "other" not in data["components"]
    # the MLP: 12 x (768 x 3072 + 3072 + 3072 x 768 + 768) of 86,567,656 params
    assert data["params"][data["components"].index("mlp")] == pytest.approx(
        12 * (768 * 3072 + 3072 + 3072 * 768 + 768) / 86_567_656, abs=1e-6)
    assert set(COMPONENTS) <= set(figures.COLORS)  # conv included


@pytest.mark.parametrize(("percent", "label"), [
    pytest.param(65.5313, "65.53%", id="large"),
    pytest.param(0.0044, "0.0044%", id="tiny"),  # two significant digits, not "0.00%"
    pytest.param(0.01, "0.01%", id="boundary"),
])
def test_share_labels(percent: float, label: str) -> None:
    assert figures.share_label(percent) == label


def test_shares_axis_runs_to_the_largest_share_and_marks_tiny_bars() -> None:
    data = figures.FigureData("shares", "t", {"components": ["mlp", "tokens", "head"],
                                              "params": [0.6, 0.00001, 0.0],
                                              "macs": [0.4, 0.0, 0.2]})
    (ax,) = drawn(data).axes
    assert ax.get_xlim() == pytest.approx((0, 1.2 * 60))  # 1.2 x the largest share, 60%
    labels = sorted(t.get_text() for t in ax.texts)
    # the four non-zero bars labelled, the two zeros left out; 0.00001 is 0.001%
    assert labels == ["0.001%", "20.00%", "40.00%", "60.00%"]
    markers = [line for line in ax.lines if line.get_marker() == "o"]
    assert [line.get_xdata()[0] for line in markers] == [pytest.approx(0.001)]  # < 1% of 60


def test_blocks_figure_only_where_blocks_differ() -> None:
    assert not blocks_differ(analyze("vit_b_16"))
    assert blocks_differ(analyze("note002_dynamic_vit"))  # tokens pruned before blocks 2 and 4


def test_pages_of_equal_blocks_say_so_instead_of_a_figure() -> None:
    text = (REPORTS / "vit_b_16.md").read_text()
    per_block = 7_087_872  # two LayerNorms, in_proj, out_proj, MLP (see test_report.py)
    macs = attention_layer(197) + mlp(197)  # 1,453,954,560
    assert f"All 12 blocks count the same ({per_block:,} params and {macs:,} MACs each)" in text
    assert "_blocks.png" not in text and not (REPORTS / "vit_b_16_blocks.png").exists()
    profile = analyze("vit_b_16")
    assert same_blocks_text(profile).startswith(f"All 12 blocks count the same ({per_block:,}")


def test_sweep_figure_has_the_total_and_the_attention_layer() -> None:
    data = figures.sweep_macs(sweep("vit_b_16", "image_size", [224, 448], progress=False)).data
    tokens = [197, 785]  # 196 + 1 and 784 + 1
    assert data["attention"] == [12 * attention_layer(n) for n in tokens]
    assert data["attn_core"] == [12 * 2 * 12 * n * n * 64 for n in tokens]
    outside = [196 * 768 * 768 + 768 * 1000, 784 * 768 * 768 + 768 * 1000]  # patches, head
    assert data["rest"] == outside
    assert data["total"] == [12 * (attention_layer(n) + mlp(n)) + o
                             for n, o in zip(tokens, outside, strict=True)]
    assert data["marks"] == [224, 384]  # 518 lies past the largest size swept


@pytest.mark.parametrize(("model", "patch", "marks"), [
    # own size 224, and the crop sizes of torchvision's published weights
    pytest.param("vit_b_16", 16, (224, 384), id="vit_b_16"),  # IMAGENET1K_V1, SWAG_E2E
    pytest.param("vit_b_32", 32, (224,), id="vit_b_32"),
    pytest.param("vit_l_16", 16, (224, 512), id="vit_l_16"),
    pytest.param("vit_l_32", 32, (224,), id="vit_l_32"),
    pytest.param("vit_h_14", 14, (224, 518), id="vit_h_14"),  # 16 and 37 patches a side
    pytest.param("note002_dynamic_vit", 4, (32,), id="cifar"),  # its own 32 px only
])
def test_sweeps_mark_the_sizes_the_model_is_made_for(model: str, patch: int,
                                                     marks: tuple[int, ...]) -> None:
    found = size_marks(model, ZOO[model].image_size)
    assert found == marks and all(size % patch == 0 for size in found)


def test_a_cifar_sweep_marks_no_imagenet_size() -> None:
    data = figures.sweep_macs(sweep("note002_dynamic_vit", "image_size", [32, 224, 384],
                                    progress=False)).data
    assert data["marks"] == [32]


def test_the_sweep_figure_names_its_rest_apart_from_the_tables_other() -> None:
    data = figures.FigureData("sweep", "t", {
        "axis": "image_size", "values": [224, 448], "total": [10, 40], "attention": [4, 20],
        "attn_core": [1, 10], "mlp": [5, 15], "rest": [1, 5], "marks": [224],
        "crossover": None, "crossover_tokens": None})
    (ax,) = [a for a in drawn(data).axes if a.get_legend() is not None]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "outside attention layer and MLP" in labels
    assert not any("other" in label or "everything else" in label for label in labels)


def zoo_data() -> dict:
    """The zoo figure's data read back from the committed zoo.md (GMACs to three decimals)."""
    rows = [line.split(" | ") for line in (REPORTS / "zoo.md").read_text().splitlines()
            if line.startswith("| ") and not line.startswith(("| model", "| :"))]
    return {"models": [r[0].removeprefix("| ") for r in rows], "families": [r[1] for r in rows],
            "params": [int(r[3].replace(",", "")) for r in rows],
            "macs": [round(float(r[4]) * 1e9) for r in rows]}


def test_zoo_labels_are_legible() -> None:
    data = zoo_data()
    fig = drawn(figures.FigureData("zoo", "t", data))
    (ax,) = fig.axes
    renderer = fig.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    boxes = [Text.get_window_extent(t, renderer) for t in ax.texts]
    # one label per group of points within 5% of each other on both axes
    assert len(boxes) == len(figures.label_groups(data["macs"], data["params"],
                                                  zoo_table.NEAR)) > 10
    for i, box in enumerate(boxes):
        assert frame.contains(box.x0, box.y0) and frame.contains(box.x1, box.y1)
        assert not any(box.overlaps(other) for other in boxes[i + 1:]), ax.texts[i].get_text()
    # a label away from its point has a leader; one beside it none
    away = [t for t in ax.texts if t.arrow_patch is not None and t.arrow_patch.get_visible()]
    assert away and all(abs(x) + abs(y) > 4 for x, y in (t.get_position() for t in away))


def test_claims_figure_plots_ratios() -> None:
    data = {"claims": ["a", "b", "c"], "verdicts": ["wrong", "wrong", "correct"],
            "evaluated": [False, False, False], "claimed": [589_824.0, 1.0, 7.0],
            "measured": [590_592.0, 100.0, 7.0]}
    wide, close = drawn(figures.FigureData("claims", "t", data)).axes
    assert wide.get_yscale() == "log" and "/ vitprof's" in wide.get_ylabel()
    # 589,824 / 590,592 - 1 = -0.13%: off the zero line in the close-up, labelled there
    close_y = [float(y) for c in close.collections for _, y in c.get_offsets()]
    assert pytest.approx(sorted(close_y)) == [100 * (589_824 / 590_592 - 1), 0.0]
    assert [t.get_text() for t in close.texts] == ["a"]


def test_depth_sweeps_have_no_size_marks() -> None:
    data = figures.sweep_macs(sweep("vit_b_16", "depth", [1, 2], progress=False)).data
    assert data["marks"] == [] and data["total"][1] - data["total"][0] == \
        attention_layer(197) + mlp(197)  # one more block


# ------------------------------------------------------------------------------- new figures


def zoo_row(name: str, family: str, params: int, macs: int) -> SimpleNamespace:
    totals = SimpleNamespace(params=params, macs=macs)
    return SimpleNamespace(entry=SimpleNamespace(name=name, family=family),
                           profile=SimpleNamespace(totals=totals))


def test_zoo_scatter_has_one_point_per_model() -> None:
    rows = [zoo_row("a", "torchvision", 86_567_656, 17_563_828_224), zoo_row("b", "notes", 5, 7)]
    data = zoo_table.zoo_scatter(rows).data  # type: ignore[arg-type]
    assert data == {"models": ["a", "b"], "families": ["torchvision", "notes"],
                    "params": [86_567_656, 5], "macs": [17_563_828_224, 7]}


def test_label_groups_join_points_within_the_ratio() -> None:
    # 1.02 / 1 and 1.01 / 1 are within 1.03 of the first point; 2 / 1 is not
    assert figures.label_groups([1, 1.02, 2], [1, 1.01, 2], 1.03) == [[0, 1], [2]]
    assert figures.label_groups([1, 1.02], [1, 1.5], 1.03) == [[0], [1]]  # apart on y


def correction(claim: str, value: float | None, measured: float, verdict: str,
               evaluated: bool = False) -> SimpleNamespace:
    return SimpleNamespace(claim=SimpleNamespace(id=claim, value=value, evaluated=evaluated),
                           measured=measured, verdict=verdict)


def test_claimed_vs_measured_keeps_the_rows_a_log_scale_shows() -> None:
    found = [correction("1", 56_550_000, 17_563_828_224, "wrong"),
             correction("2", None, 4_326_400, "misleading"),  # no value: an O-notation claim
             correction("3", 0, 3072, "declared approximation"),  # zero: not on a log scale
             correction("4", 589_824, 590_592, "correct only for", evaluated=True)]
    data = correction_figures.claimed_vs_measured(found).data  # type: ignore[arg-type]
    assert data == {"claims": ["1", "4"], "verdicts": ["wrong", "correct only for"],
                    "evaluated": [False, True], "claimed": [56_550_000.0, 589_824.0],
                    "measured": [17_563_828_224.0, 590_592.0]}


NOTE002 = ViTSpec(image_size=32, patch_size=4, width=512, depth=6, heads=8, mlp_width=2048,
                  num_classes=10)


def test_note002_attention_closed_forms() -> None:
    data = correction_figures.attention_against_tokens(NOTE002).data
    assert data["tokens"] == (32 // 4) ** 2 + 1 == 65
    at = data["grid"].index(65)
    assert data["softmax"][at] == 2 * 65**2 * 512 == 4_326_400
    assert data["linear"][at] == 2 * 65 * 512**2 == 34_078_720  # as the note writes it
    assert data["per_head"][at] == 2 * 65 * 64**2 * 8 == 4_259_840  # 8 heads of 64
    crossing = data["grid"].index(512)  # 2 N^2 D = 2 N D^2 at N = D
    assert data["softmax"][crossing] == data["linear"][crossing]
    assert data["grid"][0] == 8 and data["grid"][-1] == 4096  # 8 to 8 x D


# ------------------------------------------------------------------------------- every figure

EVERY_KIND = [
    pytest.param(figures.FigureData("shares", "t", {"components": ["mlp", "tokens"],
                                                    "params": [0.9, 0.0001], "macs": [0.5, 0]}),
                 id="shares"),
    pytest.param(figures.FigureData("blocks", "t", {"blocks": [0, 1],
                                                    "series": {"mlp": [3, 4], "conv": [1, 0]}}),
                 id="blocks"),
    pytest.param(figures.FigureData("sweep", "t", {
        "axis": "image_size", "values": [224, 448], "total": [10, 40], "attention": [4, 20],
        "attn_core": [1, 10], "mlp": [5, 15], "rest": [1, 5], "marks": [224, 384],
        "crossover": 400.0, "crossover_tokens": "12544/5"}), id="sweep"),
    pytest.param(figures.FigureData("zoo", "t", {"models": ["a", "b"],
                                                 "families": ["notes", "huggingface"],
                                                 "params": [10, 1000], "macs": [5, 50]}),
                 id="zoo"),
    pytest.param(figures.FigureData("claims", "t", {"claims": ["1", "2"],
                                                    "verdicts": ["wrong", "correct"],
                                                    "evaluated": [False, True],
                                                    "claimed": [1.0, 5.0],
                                                    "measured": [100.0, 5.0]}), id="claims"),
    pytest.param(correction_figures.attention_against_tokens(NOTE002), id="note002_attention"),
    pytest.param(figures.FigureData("timm_published", "t", {
        "models": ["a", "b"], "published": [0.04, 17.58], "vitprof": [0.041, 17.56],
        "reconciled": [True, False]}), id="timm_published"),
    pytest.param(figures.FigureData(memory_report.KIND, "t", {
        "index": [0, 1, 2], "series": {"parameters": [4, 4, 4], "mlp": [0, 6, 2]},
        "phases": [["forward", 0, 1], ["backward", 2, 2]],
        "peak": {"index": 1, "bytes": 10, "phase": "forward", "component": "mlp"},
        "settings": {"optimizer": "adamw"}, "batch_size": 2}), id="memory_timeline"),
    pytest.param(figures.FigureData("token_reduction_blocks", "t", {
        "labels": ["dense", "pruned"], "macs": [[10, 10, 10], [10, 6, 4]],
        "reduction": [[0, 0, 0], [0, 1, 0]]}), id="token_reduction_blocks"),
    pytest.param(figures.FigureData(world_size_figure.KIND, "t", {
        "series": {"ddp": [[8, 9 * 10**9], [64, 9 * 10**9]],
                   "fsdp": [[8, 2 * 10**9], [64, 10**9]]},
        "limit": 8 * 10**9}), id="world_size_peaks"),
]


@pytest.mark.parametrize("figure", EVERY_KIND)
def test_every_kind_renders_byte_stably_with_its_digest(figure: figures.FigureData,
                                                        tmp_path: Path) -> None:
    figures.save(figure, tmp_path / "a.png")
    figures.save(figure, tmp_path / "b.png")
    assert (tmp_path / "a.png").read_bytes() == (tmp_path / "b.png").read_bytes()
    assert figures.read_digest(tmp_path / "a.png") == figure.digest


def test_every_kind_is_tested_above() -> None:
    assert {p.values[0].kind for p in EVERY_KIND} == set(figures._DRAW)


@pytest.mark.parametrize(("page", "linked"), [
    pytest.param("zoo.md", ["zoo.png"], id="zoo"),
    pytest.param("corrections.md", [correction_figures.CLAIMS_FILE,
                                    correction_figures.ATTENTION_FILE], id="corrections"),
    pytest.param("timm_published.md", [timm_published.FILES[1]], id="timm"),
    pytest.param("vit_b_16.md", ["vit_b_16_components.png", "vit_b_16_scaling.png"],
                 id="vit_b_16"),
    *(pytest.param(f"{name}.md", [f"{name}_components.png", f"{name}_blocks.png",
                                  f"{name}_scaling.png"], id=name) for name in NOTE_MODELS),
])
def test_each_figure_is_linked_from_its_page(page: str, linked: list[str]) -> None:
    text = (REPORTS / page).read_text()
    assert re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text) == linked
    for name in linked:
        assert figures.read_digest(REPORTS / name) is not None


def test_note002_attention_figure_is_titled_by_what_it_plots() -> None:
    # it plots the core alone (2 N^2 D against 2 N D^2), not the attention layer
    assert "attention core MACs" in correction_figures.attention_against_tokens(NOTE002).title


def test_note002_attention_figure_sits_in_note_002s_section() -> None:
    text = (REPORTS / "corrections.md").read_text()
    section = text[text.index("## Note 002"):text.index("## Note 003")]
    assert f"]({correction_figures.ATTENTION_FILE})" in section
    assert "past N = D = 512 tokens; the note's model has N = 65" in section


@pytest.mark.parametrize(("tokens", "shown"), [
    pytest.param("3072", "(3072 tokens)", id="whole"),
    pytest.param("12544/5", "(2,508.8 tokens)", id="fraction"),  # 12544 / 5 = 2508.8
])
def test_sweep_crossover_tokens_read_as_a_number(tokens: str, shown: str) -> None:
    data = figures.FigureData("sweep", "t", {
        "axis": "image_size", "values": [224, 448], "total": [10, 40], "attention": [4, 20],
        "attn_core": [1, 10], "mlp": [5, 15], "rest": [1, 5], "marks": [224, 384],
        "crossover": 400.0, "crossover_tokens": tokens})
    (ax,) = [a for a in drawn(data).axes if a.get_legend() is not None]
    texts = [t.get_text() for t in ax.texts]
    assert any(t.endswith(shown) for t in texts)
    assert [t for t in texts if t in ("224", "384", "518")] == ["224", "384"]  # the marks
