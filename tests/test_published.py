"""timm's published table: the shipped data, the ``timm-published`` peer and its page."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from vitprof import analyze
from vitprof.checks.crosscheck import run_crosscheck
from vitprof.checks.crosscheck.peers.timm_published import (
    PEER,
    TimmRow,
    TimmTable,
    built_model,
    explain,
    fvcore_rule_causes,
    load_table,
    rounded,
    rounding_causes,
    table_form_causes,
    timm_name,
)
from vitprof.cli.main import main
from vitprof.models import libraries as registry
from vitprof.models.libraries.base import ModelLibrary
from vitprof.study.generate import MARKER
from vitprof.study.page_check import compare
from vitprof.study.pages.timm_published import _why_not, timm_published_page
from vitprof.study.published_rows import explain_row, published_rows

ROOT = Path(__file__).resolve().parents[1]
TIMM_COMMIT = "90cae8c5ab83d2d7e23b1fb2bab1559bfdcbc7e9"


def test_shipped_table_names_its_source_and_has_the_issue_rows() -> None:
    table = load_table()
    assert table.commit == TIMM_COMMIT and table.date == "2026-01-06"
    assert table.source.endswith("results/benchmark-infer-amp-nchw-pt291-cu130-pro6000maxq.csv")
    deit = table.find("deit_base_patch16_224", 224)
    assert (deit.param_count, deit.gmacs) == ("86.57", "17.58")
    # "86.57" M = 86_570_000 params, "17.58" G = 17_580_000_000 MACs, exactly
    assert (deit.params, deit.macs) == (86_570_000, 17_580_000_000)
    assert table.find("levit_128.fb_in1k", 224).param_count == "9.19"  # tag ignored
    assert table.find("levit_128", 256) is None
    assert table.sizes("resnet18") == [160, 224, 288]  # one row per size


def test_refresh_script_keeps_the_needed_columns(tmp_path: Path) -> None:
    source = tmp_path / "src.csv"
    source.write_text("model,infer_img_size,infer_samples_per_sec,param_count,infer_gmacs\n"
                      "zeta,224,10.0,1.5,0.25\nalpha,384,20.0,2.0,1.0\nalpha,224,30.0,2.0,0.33\n")
    out = tmp_path / "table.csv"
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import refresh_timm_table
    finally:
        sys.path.pop(0)
    assert refresh_timm_table.main([str(source), "--commit", "abc123", "--date", "2026-01-06",
                                    "--out", str(out)]) == 0
    table = load_table(out)
    assert (table.commit, table.date) == ("abc123", "2026-01-06")
    assert [(r.model, r.image_size, r.param_count, r.gmacs) for r in table.rows] == [
        ("alpha", 224, "2.0", "0.33"), ("alpha", 384, "2.0", "1.0"), ("zeta", 224, "1.5", "0.25"),
    ]
    assert "infer_samples_per_sec" not in out.read_text()


@pytest.mark.parametrize(
    ("value", "scale", "expected"),
    [
        pytest.param(17_582_740_224, 10**9, 17_580_000_000, id="down"),  # 17.5827 -> 17.58
        pytest.param(405_321_728, 10**9, 410_000_000, id="up"),  # 0.40532 -> 0.41
        pytest.param(9_188_864, 10**6, 9_190_000, id="params"),  # 9.188864 -> 9.19
    ],
)
def test_rounded_as_timm_prints(value: int, scale: int, expected: int) -> None:
    assert rounded(value, scale) == expected


def test_rounding_causes_take_the_count_to_the_printed_figure() -> None:
    causes = rounding_causes(17_582_740_224, 86_567_656)
    # 17_580_000_000 - 17_582_740_224 = -2_740_224; 86_570_000 - 86_567_656 = +2_344
    assert [(c.macs, c.params) for c in causes] == [(-2_740_224, 0), (0, 2_344)]


def conv_bn_pool() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.LayerNorm(8), nn.Linear(8, 2),
    )


def test_fvcore_rules_on_a_conv_bn_model() -> None:
    model = conv_bn_pool()
    profile = analyze(model, image_size=8)
    causes = fvcore_rule_causes(profile, model)
    # LayerNorm over 8 elements at 5 (with a weight); BatchNorm over 8 x 8 x 8 = 512 elements
    # at 2 (affine); the 1x1 adaptive pool reads the same 512 elements at 1
    assert [c.macs for c in causes] == [8 * 5, 512 * 2, 512]
    assert ["layer_norm" in causes[0].text, "eval BatchNorm" in causes[1].text,
            "adaptive_avg_pool2d" in causes[2].text] == [True, True, True]


def test_fvcore_rule_for_weight_standardisation() -> None:
    """timm's StdConv2d standardises its weight with a functional batch norm over batch
    statistics, no affine: fvcore's training-mode rule, 4 per element of the weight."""
    std_conv = pytest.importorskip("timm.layers").StdConv2d
    model = nn.Sequential(std_conv(3, 8, 3, padding=1))
    profile = analyze(model, image_size=8)
    (cause,) = fvcore_rule_causes(profile, model)
    # the weight has 8 * 3 * 3 * 3 = 216 elements, at 4 each: 864
    assert cause.macs == 216 * 4 and "weight standardisation" in cause.text


class Baddbmm(nn.Module):
    """One ``baddbmm``: (1, 4, 6) @ (1, 6, 4) added to a (1, 4, 4) input."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Conv2d(3, 6, 1)

    def forward(self, x):
        a = self.proj(x).flatten(2).transpose(1, 2)[:, :4]  # (1, 4, 6)
        return torch.baddbmm(a[:, :, :4], a, a.transpose(1, 2))


def test_fvcore_rule_for_bilinear_upsampling() -> None:
    model = nn.Sequential(nn.Upsample(scale_factor=2, mode="bilinear"))
    profile = analyze(model, image_size=4)
    (cause,) = fvcore_rule_causes(profile, model)
    # output 3 x 8 x 8 = 192 elements at fvcore's 4 each: 768
    assert cause.macs == 192 * 4 and "upsample_bilinear2d" in cause.text


def test_timm_counts_differential_attention_on_its_non_fused_path() -> None:
    """timm's fused DiffAttention runs two SDPAs, each with its own A @ V; the non-fused path
    that timm's table counts applies the combined attention to V once."""
    pytest.importorskip("timm")
    row = load_table().find("vit_dwee_patch16_reg1_gap_256", 256)
    profile = analyze(built_model("timm:" + row.model, 256), image_size=256)
    explained = explain(profile, "timm:" + row.model, row, load_table())
    (cause,) = explained.groups["deploy form"]
    # 14 layers, 4 heads, head width 256 / 4 / 2 = 32, 16 x 16 + 1 register = 257 tokens: the
    # second A @ V over 2 x 32 values costs 257 * 257 * 64 per head: 14 * 4 * 257**2 * 64
    assert cause.macs == -(14 * 4 * 257**2 * 64) and cause.params == 0
    assert explained.reconciled


def test_fvcore_has_no_handle_for_baddbmm() -> None:
    model = Baddbmm()
    profile = analyze(model, image_size=4)
    (cause,) = fvcore_rule_causes(profile, model)
    # the product (1, 4, 6) @ (1, 6, 4) costs 4 * 6 * 4 = 96 MACs, which fvcore leaves out
    assert cause.macs == -96 and "baddbmm" in cause.text


def test_deploy_form_cause_is_what_folding_changes() -> None:
    model = conv_bn_pool()
    built = analyze(model, image_size=8)
    deployed = analyze(model, image_size=8, deploy=True)
    (cause,) = table_form_causes(built, deployed)
    # BN's 2 * 8 affine params go, the conv's 8 bias params come: -8; MACs unchanged
    assert (cause.params, cause.macs) == (-8, 0)


def test_the_timm_name_is_the_registrys_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    # the table's name is what timm's library claims, less its prefix; a name another
    # library claims first is not timm's, whatever it starts with (no "timm:" typed here)
    assert timm_name("timm:vit_tiny_patch16_224") == "vit_tiny_patch16_224"
    assert timm_name("vit_b_16") is None and timm_name("hf:config.json") is None
    other = ModelLibrary(name="other", tables=(), inferrers=(), known="", prefix="timm:")
    monkeypatch.setattr(registry, "LIBRARIES", (other, *registry.LIBRARIES))
    assert timm_name("timm:vit_tiny_patch16_224") is None


def test_crosscheck_test_vit_reconciles() -> None:
    pytest.importorskip("timm")
    check = run_crosscheck("timm:test_vit", peers=[PEER])
    (row,) = check.rows
    assert row.peer == PEER and row.macs == 40_000_000 and row.params == 370_000  # 0.04 G, 0.37 M
    assert sum(c.macs for c in row.causes) == row.delta_macs
    assert sum(c.params for c in row.causes) == row.delta_params
    assert row.residual_macs == 0 and row.residual_params == 0


def test_crosscheck_names_the_sizes_the_table_has(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("timm")
    assert main(["crosscheck", "timm:test_vit", "--image-size", "192", "--peers", PEER]) == 0
    assert "no row for timm:test_vit at 192px" in capsys.readouterr().out
    check = run_crosscheck("vit_b_32", peers=[PEER])
    assert check.rows[0].macs is None and "only for timm:NAME" in check.rows[0].note


def test_page_machinery_on_small_rows(tmp_path: Path) -> None:
    pytest.importorskip("timm")
    page = timm_published_page(*published_rows(["test_vit", "test_vit2"]))
    assert page.name == "timm_published.md"
    assert "- rows: 2; counted by vitprof: 2; reconciled (params and GMACs): 2" in page.text
    assert "- none: every row reconciles" in page.text
    (name, figure), = page.figures
    assert f"]({name})" in page.text and figure.data["models"] == ["test_vit", "test_vit2"]
    assert figure.data["published"] == [0.04, 0.05]  # the table's infer_gmacs


# The issue's acceptance: 20 timm models whose causes sum to the difference, one of them
# re-parameterised and cross-checked in deploy form.
TWENTY = [
    "deit_base_patch16_224", "deit_tiny_patch16_224", "vit_small_patch16_224", "levit_128",
    "levit_128s", "fastvit_t8", "efficientvit_m0", "tiny_vit_5m_224",
    "swin_tiny_patch4_window7_224", "cait_xxs24_224", "xcit_nano_12_p16_224", "pvt_v2_b0",
    "twins_svt_small", "coat_lite_tiny", "crossvit_tiny_240", "mvitv2_tiny", "hiera_tiny_224",
    "volo_d1_224", "beit_base_patch16_224", "eva02_tiny_patch14_224",
]


@pytest.mark.slow
@pytest.mark.parametrize("name", TWENTY)
def test_twenty_timm_models_reconcile(name: str) -> None:
    pytest.importorskip("timm")
    (row,) = run_crosscheck(f"timm:{name}", peers=[PEER]).rows
    assert row.macs is not None, row.note
    assert sum(c.macs for c in row.causes) + row.residual_macs == row.delta_macs
    assert row.residual_macs == 0 and row.residual_params == 0


@pytest.mark.slow
def test_deploy_crosscheck_of_a_reparameterised_model(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("timm")
    assert main(["crosscheck", "timm:levit_128", "--deploy", "--peers", PEER,
                 "--format", "json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["rows"]
    # in deploy form vitprof counts what timm counts: no deploy-form cause, only rounding
    assert all("reparameterize_model" not in c["text"] for c in row["causes"])
    assert sum(c["macs"] for c in row["causes"]) == row["delta_macs"]
    assert sum(c["params"] for c in row["causes"]) == row["delta_params"]
    assert row["residual_macs"] == 0 and row["residual_params"] == 0


@pytest.mark.slow
@pytest.mark.exhaustive  # builds ~600 timm models: about 13 minutes on 2 cores
def test_committed_page_is_up_to_date(capsys: pytest.CaptureFixture[str]) -> None:
    """The whole page: every transformer row of the table built and counted (long)."""
    pytest.importorskip("timm")
    if not (ROOT / "reports" / "timm_published.md").is_file():
        pytest.skip("reports/timm_published.md not generated yet")
    assert main(["report", "timm-published", "--check", "--out", str(ROOT / "reports")]) == 0


def test_a_row_that_does_not_reconcile_says_by_how_much() -> None:
    pytest.importorskip("timm")
    real = load_table().find("test_vit", 160)
    wrong = TimmRow("test_vit", 160, real.param_count, "0.06")  # published 0.04 really
    table = TimmTable("file.csv", "0" * 40, "2026-01-06", (wrong,))
    result = explain_row(wrong, "vision_transformer", table)
    peer = result.explained.peer
    assert not result.explained.reconciled and peer.residual_params == 0
    # 0.06 G published, the causes reach 0.04 G: 60_000_000 - 40_000_000 = 20_000_000 left
    assert peer.residual_macs == 60_000_000 - 40_000_000
    assert "`test_vit` at 160px: residual +20,000,000 MACs, 0 params" in "\n".join(
        _why_not([result]))
    broken = explain_row(TimmRow("no_such_model", 224, "1.0", "1.0"), "deit", table)
    assert broken.explained is None and "unknown timm model 'no_such_model'" in broken.error


def test_check_of_everything_keeps_the_named_page(tmp_path: Path) -> None:
    """``report --check`` of --all does not call timm_published.md stale: it is written only
    when named, and checked with ``report timm-published --check``."""
    fresh, kept = tmp_path / "fresh", tmp_path / "kept"
    fresh.mkdir()
    kept.mkdir()
    for folder in (fresh, kept):
        (folder / "a.md").write_text(MARKER + "a\n")
    (kept / "timm_published.md").write_text(MARKER + "the page\n")
    (kept / "old.md").write_text(MARKER + "an old page\n")
    assert compare(fresh, kept) == ["old.md is not generated any more (stale)"]


def test_check_of_everything_keeps_the_figures_of_pages_others_write(tmp_path: Path) -> None:
    """A figure drawn by vitprof's figures but linked by a page a benchmark writes
    (memory.md's timeline) is that page's, not a stale one of ``vitprof report``."""
    fresh, kept = tmp_path / "fresh", tmp_path / "kept"
    fresh.mkdir()
    kept.mkdir()
    drawn = Path(__file__).resolve().parents[1] / "reports" / "memory_timeline.png"  # digested
    (kept / "memory.md").write_text("![timeline](memory_timeline.png)\n")
    (kept / "memory_timeline.png").write_bytes(drawn.read_bytes())
    (kept / "orphan.png").write_bytes(drawn.read_bytes())
    assert compare(fresh, kept) == ["orphan.png is not generated any more (stale)"]


def test_timms_published_rules_live_in_their_peers_file() -> None:
    # as every peer's rules do (open_clip-published's included): one file, the peer's
    from vitprof.checks.crosscheck.peers import timm_published

    crosscheck = Path(timm_published.__file__).parents[1]
    assert not (crosscheck / "published.py").exists()
    assert [peer.name for peer in timm_published.PEERS] == ["timm-published"]
    assert timm_published.DATA_FILE.is_file() and timm_published.explain is explain
