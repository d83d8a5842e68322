"""``vitprof diff``: every delta from arithmetic, self-diffs, saved profiles, bad inputs."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from conftest import MARKING_FACTORY_PY

from vitprof.checks.diff import Change, parse_fail_above
from vitprof.cli.main import main
from vitprof.core.records import Counts
from vitprof.core.schema import SCHEMA_VERSION

D, MLP, LAYERS = 768, 3072, 12  # ViT-B: width, MLP width, blocks
T16, T32 = 197, 50  # tokens: 14^2 + 1 and 7^2 + 1


def _block_macs(t: int) -> int:
    """qkv + QK^T and AV + proj + two MLP linears, for ``t`` tokens."""
    return t * D * 3 * D + 2 * t * t * D + t * D * D + 2 * t * D * MLP


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def saved_b16(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("profiles") / "vit_b_16.json"
    assert main(["analyze", "vit_b_16", "--format", "json", "--output", str(path)]) == 0
    return path


@pytest.fixture(scope="module")
def b16_vs_b32(tmp_path_factory) -> dict[str, Any]:
    path = tmp_path_factory.mktemp("diff") / "diff.json"
    assert main(["diff", "vit_b_16", "vit_b_32", "--format", "json", "--output", str(path)]) == 0
    return json.loads(path.read_text())


def _row(data: dict[str, Any], scope: str, name: str) -> dict[str, Any]:
    (row,) = [r for r in data["changes"] if r["scope"] == scope and r["name"] == name]
    return row


@pytest.mark.parametrize(
    ("scope", "name", "metric", "a", "b"),
    [
        # 2 * 12 * 197^2 * 768 = 715_327_488 vs 2 * 12 * 50^2 * 768 = 46_080_000
        pytest.param("component", "attn_core", "macs", 715_327_488, 46_080_000, id="attn-core"),
        # 196 patches * 768 * (3*16*16) = 115_605_504; 49 * 768 * (3*32*32): the same
        pytest.param("component", "patch_embed", "macs", 196 * 768 * 768, 49 * 768 * 3072,
                     id="patch-macs"),
        # conv weight + bias: 768*768 + 768 = 590_592 vs 3072*768 + 768 = 2_360_064
        pytest.param("component", "patch_embed", "params", 768 * 768 + 768, 3072 * 768 + 768,
                     id="patch-params"),
        # class token + position embedding: 768 + 197*768 vs 768 + 50*768
        pytest.param("component", "tokens", "params", 768 + T16 * D, 768 + T32 * D,
                     id="tokens-params"),
        pytest.param("component", "mlp", "macs", LAYERS * 2 * T16 * D * MLP,
                     LAYERS * 2 * T32 * D * MLP, id="mlp-macs"),
        pytest.param("component", "attn_qkv", "macs", LAYERS * T16 * D * 3 * D,
                     LAYERS * T32 * D * 3 * D, id="qkv-macs"),
        pytest.param("component", "attn_proj", "macs", LAYERS * T16 * D * D,
                     LAYERS * T32 * D * D, id="proj-macs"),
        # the head: 768 * 1000 on the class token, unchanged
        pytest.param("component", "head", "macs", 768_000, 768_000, id="head-macs"),
        pytest.param("block", "5", "macs", _block_macs(T16), _block_macs(T32), id="block-macs"),
        pytest.param("block_component", "11.attn_core", "macs", 2 * T16**2 * D, 2 * T32**2 * D,
                     id="block-core-macs"),
        # blocks: 12 * 768^2 + 13 * 768 params each, whatever the tokens
        pytest.param("block", "0", "params", 12 * D**2 + 13 * D, 12 * D**2 + 13 * D,
                     id="block-params"),
        # totals: 12 blocks + patch embedding + head (+ tokens for params, 2 * 768 final norm)
        pytest.param("total", "total", "macs",
                     LAYERS * _block_macs(T16) + 196 * 768 * 768 + 768_000,
                     LAYERS * _block_macs(T32) + 49 * 768 * 3072 + 768_000, id="total-macs"),
        pytest.param("total", "total", "params",
                     LAYERS * (12 * D**2 + 13 * D) + 590_592 + 768 + T16 * D + 2 * D + 769_000,
                     LAYERS * (12 * D**2 + 13 * D) + 2_360_064 + 768 + T32 * D + 2 * D + 769_000,
                     id="total-params"),
    ],
)
def test_b16_against_b32_every_delta_from_arithmetic(
    b16_vs_b32: dict[str, Any], scope: str, name: str, metric: str, a: int, b: int
) -> None:
    row = _row(b16_vs_b32, scope, name)
    assert (row["a"][metric], row["b"][metric]) == (a, b)
    assert row["change"][metric] == b - a
    assert row["relative"][metric] == pytest.approx((b - a) / a)
    if metric == "macs":  # FLOPs = 2 x MACs, so their change is twice the MACs'
        assert row["change"]["flops"] == 2 * (b - a)


def test_b16_against_b32_states_both_sides(b16_vs_b32: dict[str, Any]) -> None:
    assert b16_vs_b32["a"]["model"] == "vit_b_16" and b16_vs_b32["b"]["model"] == "vit_b_32"
    assert b16_vs_b32["notes"] == [] and b16_vs_b32["exceeded"] == []
    # the largest MACs changes, each over blocks 0-11: 12 * 2 * (50 - 197) * 768 * 3072 for the
    # MLP, 12 * 2 * (50^2 - 197^2) * 768 for the attention core
    assert b16_vs_b32["highlights"][0] == "mlp MACs -74.62% in blocks 0-11 (-8,323,596,288)"
    assert 12 * 2 * (T32 - T16) * D * MLP == -8_323_596_288
    assert "attn_core MACs -93.56% in blocks 0-11 (-669,247,488)" in b16_vs_b32["highlights"]
    assert 12 * 2 * (T32**2 - T16**2) * D == -669_247_488
    # -669_247_488 = 46_080_000 - 715_327_488
    assert _row(b16_vs_b32, "component", "attn_core")["change"]["macs"] == -669_247_488


def test_table_shows_totals_components_and_merged_blocks(capsys) -> None:
    code, out, err = run(["diff", "vit_b_16", "vit_b_32"], capsys)
    assert code == 0 and err == ""
    assert out.startswith("A: vit_b_16 (model vit_b_16, input 1x3x224x224, inference)\n")
    # params +1_656_576 = 1_769_472 (patch embedding) - 112_896 (147 fewer position rows)
    assert "+1,656,576" in out and "+1.91%" in out
    core = next(line for line in out.splitlines() if line.startswith("attn_core"))
    assert core.split() == ["attn_core", "715,327,488", "46,080,000", "-669,247,488", "-93.56%"]
    assert "blocks 0-11 (each)" in out


def test_markdown_summary_first_details_folded(capsys) -> None:
    code, out, _ = run(["diff", "vit_b_16", "vit_b_32", "--format", "markdown"], capsys)
    first = out.splitlines()[0]
    assert code == 0 and first.startswith("**vitprof diff** vit_b_16 -> vit_b_32: params +1.91%")
    assert out.index("<details>") < out.index("| attn_core | 715,327,488 | 46,080,000 |")
    assert out.rstrip().endswith("</details>")


def _zero_changes(data: dict[str, Any]) -> None:
    for row in data["changes"]:
        assert set(row["change"].values()) == {0}, row["name"]
    assert data["notes"] == [] and data["summary"].endswith(": no change")


def test_model_against_itself_is_all_zeros(capsys) -> None:
    code, out, err = run(["diff", "vit_b_32", "vit_b_32", "--format", "json",
                          "--fail-above", "0"], capsys)
    assert code == 0 and err == ""
    _zero_changes(json.loads(out))


def test_model_against_its_saved_profile_is_all_zeros(saved_b16: Path, capsys) -> None:
    code, out, _ = run(["diff", str(saved_b16), "vit_b_16", "--format", "json"], capsys)
    assert code == 0
    _zero_changes(json.loads(out))


def test_two_saved_profiles_warn_about_ignored_options(saved_b16: Path, capsys) -> None:
    code, out, err = run(["diff", str(saved_b16), str(saved_b16), "--image-size", "384"], capsys)
    assert code == 0 and "no change" in out
    assert err == "vitprof: warning: --image-size ignored: both sides are saved profiles\n"


def _edited(saved: Path, tmp_path: Path, edit) -> Path:
    data = json.loads(saved.read_text())
    edit(data)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(data))
    return path


def _without_blocks(data: dict[str, Any], kept: int) -> None:
    """``data`` as a profile of its first ``kept`` blocks: the others' counts leave the
    components and the totals too (a saved profile must add up)."""
    for block in data["blocks"][kept:]:
        for name, counts in block["components"].items():
            for key, count in counts.items():
                data["components"][name][key] -= count
                data["totals"][key] -= count
    data["blocks"] = data["blocks"][:kept]


def test_blocks_removed_and_unsupported_ops_are_stated(
    saved_b16: Path, tmp_path: Path, capsys
) -> None:
    def edit(data: dict[str, Any]) -> None:
        _without_blocks(data, 10)
        data["unsupported_ops"] = {"aten.mystery": 2}
        data["input_shape"] = [1, 3, 384, 384]

    path = _edited(saved_b16, tmp_path, edit)
    code, out, _ = run(["diff", str(saved_b16), str(path), "--format", "json"], capsys)
    data = json.loads(out)
    assert code == 0
    assert data["notes"] == [
        "input shape changed: 1x3x224x224 in A, 1x3x384x384 in B",
        "blocks removed in B: 10-11",
        "unsupported ops appeared in B: aten.mystery x2",
    ]
    # a removed block counts as zeros in B: -1_453_954_560, -100%
    row = _row(data, "block", "11")
    assert row["b"]["macs"] == 0 and row["change"]["macs"] == -_block_macs(T16)
    assert row["relative"]["macs"] == -1.0
    # the two removed blocks' MLPs: 2 * 2 * 197 * 768 * 3072 = 1_859_125_248 MACs gone
    assert data["highlights"][0] == "mlp MACs -100.00% in blocks 10-11 (-1,859,125,248)"


@pytest.mark.parametrize(
    ("argv", "code", "failed"),
    [
        # MACs only fall or stay (patch embedding and head are equal): nothing is above 0%
        pytest.param(["--fail-above", "macs=0"], 0, [], id="macs-fall"),
        # params: total +1.91%, patch embedding +299.61% (590_592 -> 2_360_064)
        pytest.param(["--fail-above", "params=1.5%"], 1,
                     ["params of total: +1.91% is above 1.5%",
                      "params of patch_embed: +299.61% is above 1.5%"], id="params-rise"),
        # a metric's own threshold wins over the one for all metrics
        pytest.param(["--fail-above", "0", "--fail-above", "params=300"], 0, [],
                     id="per-metric-wins"),
    ],
)
def test_fail_above(argv: list[str], code: int, failed: list[str], capsys) -> None:
    got, _, err = run(["diff", "vit_b_16", "vit_b_32", *argv], capsys)
    assert got == code
    assert err.splitlines() == [f"vitprof: FAIL: {line}" for line in failed]


@pytest.mark.parametrize(
    ("a", "b", "percent", "above"),
    [
        pytest.param(1000, 1010, "1", False, id="at-the-limit"),  # +10 = 1% of 1000
        pytest.param(1000, 1011, "1", True, id="past-the-limit"),  # +11 > 10
        pytest.param(1000, 1011, "1.1%", False, id="decimal-exact"),  # 11 = 1.1% of 1000
        pytest.param(0, 1, "1000", True, id="from-zero"),  # appeared: above any threshold
        pytest.param(0, 0, "0", False, id="zero-both"),
        pytest.param(1000, 900, "0", False, id="decrease"),
    ],
)
def test_increase_above_is_exact(a: int, b: int, percent: str, above: bool) -> None:
    change = Change("total", "total", Counts(macs=a), Counts(macs=b))
    assert change.above("macs", parse_fail_above([percent])["macs"]) is above


def test_parse_fail_above() -> None:
    limits = parse_fail_above(["5", "macs=0.5%"])
    assert limits == {"params": 5, "macs": Fraction(1, 2), "flops": 5, "vector_flops": 5}
    for bad in ("lots", "-1", "speed=5"):
        with pytest.raises(ValueError):
            parse_fail_above([bad])


def test_bad_fail_above_is_a_usage_error(capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["diff", "vit_b_16", "vit_b_32", "--fail-above", "speed=5"])
    assert exit_info.value.code == 2
    assert "unknown metric 'speed'" in capsys.readouterr().err


VALID_START = '{"schema_version": 2, "model": "vit_b_16", "input_shape": [1, 3'


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("{not json", "not valid JSON (truncated?)", id="not-json"),
        pytest.param(VALID_START, "not valid JSON (truncated?)", id="truncated"),
        pytest.param("[1, 2]", "not a vitprof profile (no 'schema_version')", id="an-array"),
        pytest.param('{"model": "vit_b_16"}', "not a vitprof profile (no 'schema_version')",
                     id="no-version"),
        pytest.param('{"schema_version": 99}', "profile of schema version 99; this vitprof "
                     f"reads version {SCHEMA_VERSION}", id="other-version"),
        pytest.param('{"schema_version": 2, "model": "x"}', "not a vitprof profile: at the top: "
                     "'input_shape' is a required property", id="fields-missing"),
        pytest.param(None, "no such profile file", id="missing-file"),
    ],
)
def test_bad_profile_files_are_one_line(
    tmp_path: Path, text: str | None, message: str, capsys
) -> None:
    path = tmp_path / "bad.json"
    if text is not None:
        path.write_text(text)
    code, out, err = run(["diff", str(path), "vit_b_32"], capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"vitprof: error: {path}: ")
    assert message in err


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        pytest.param(lambda d: d["totals"].update(flops=1), "at totals: flops 1 is not 2 x macs",
                     id="flops-not-twice-macs"),
        pytest.param(lambda d: d["components"]["mlp"].update(params=0),
                     "at totals.params: 86567656 is not the sum of the components",
                     id="components-do-not-sum"),
        pytest.param(lambda d: d["totals"].update(macs="many"), "at totals.macs: 'many' is not "
                     "of type 'integer'", id="wrong-type"),
    ],
)
def test_inconsistent_profiles_are_refused(
    saved_b16: Path, tmp_path: Path, edit, message: str, capsys
) -> None:
    path = _edited(saved_b16, tmp_path, edit)
    code, _, err = run(["diff", str(path), str(saved_b16)], capsys)
    assert code == 2 and err.count("\n") == 1 and message in err


def test_other_units_are_refused(saved_b16: Path, tmp_path: Path, capsys) -> None:
    path = _edited(saved_b16, tmp_path, lambda d: d["units"].update(macs="fused multiply-adds"))
    code, _, err = run(["diff", str(saved_b16), str(path)], capsys)
    assert code == 2 and err.count("\n") == 1
    assert "count in other units (macs differ); comparing them would mislead" in err


@pytest.mark.parametrize(
    ("edit", "note"),
    [
        pytest.param(lambda d: d.update(mode="train"), "mode changed: train in A, inference in B",
                     id="mode"),
        # an older taxonomy, without conv (vit_b_16 has none)
        pytest.param(lambda d: [part.pop("conv") for part in (
            d["components"], d["outside"], *(b["components"] for b in d["blocks"]))],
            "taxonomy: components only in B (zeros on the other side): conv", id="taxonomy"),
        pytest.param(lambda d: d.update(unsupported_ops={"aten.mystery": 1}),
                     "unsupported ops gone in B: aten.mystery x1", id="ops-gone"),
    ],
)
def test_other_differences_are_stated_first(
    saved_b16: Path, tmp_path: Path, edit, note: str, capsys
) -> None:
    path = _edited(saved_b16, tmp_path, edit)
    code, out, _ = run(["diff", str(path), str(saved_b16)], capsys)
    assert code == 0
    assert out.splitlines()[3] == f"note: {note}"  # after A, B and the convention


def test_a_profile_saved_with_a_byte_order_mark_is_read(saved_b16: Path, tmp_path: Path,
                                                        capsys) -> None:
    """Issue 38: UTF-8 with a byte-order mark (an editor's save) is still the profile."""
    marked = tmp_path / "marked.json"
    marked.write_bytes(b"\xef\xbb\xbf" + saved_b16.read_bytes())
    code, out, err = run(["diff", str(marked), str(saved_b16), "--format", "json"], capsys)
    assert code == 0, err
    _zero_changes(json.loads(out))


def test_both_sides_are_resolved_before_either_is_counted(tmp_path: Path, capsys) -> None:
    """Issue 38: 'diff A B' built and counted A before finding that B is unknown; the factory
    of A is not even called now, and a missing profile B is found as soon."""
    (tmp_path / "marking.py").write_text(MARKING_FACTORY_PY)
    for b, message in (("vit_b_17", "unknown model 'vit_b_17'"),
                       (str(tmp_path / "gone.json"), "no such profile file")):
        code, out, err = run(["diff", f"{tmp_path}/marking.py:make", b, "--image-size", "8"],
                             capsys)
        assert code == 2 and out == "" and err.count("\n") == 1
        assert err.startswith("vitprof: error: ") and message in err
        assert not (tmp_path / "factory_was_called").exists()
