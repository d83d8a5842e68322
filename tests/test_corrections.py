"""The corrections to the source notes: the data file, the verdict rules, and the figures of the
committed ``reports/corrections.md`` re-derived by arithmetic.

Each verdict rule of :mod:`vitprof.study.corrections.verdicts` has a test with a constructed
claim; ``test_rules_hold_on_every_row`` checks every row of the committed report against them.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from vitprof import analyze
from vitprof.models.zoo import ZOO
from vitprof.study.corrections import Claim, Lab, Verdict, claims, correct, notes
from vitprof.study.corrections.affine import affine
from vitprof.study.corrections.claims import (
    ClaimRule,
    Judge,
    OwnCode,
    expression,
    measurement,
    parse,
)

REPORT = Path(__file__).resolve().parents[1] / "reports" / "corrections.md"


def constructed(value: float | None, measured: float, *, tolerance: float = 0.0,
                own: float | None = None, declared: bool = False,
                judge: tuple[ClaimRule, float, dict[str, float]] | None = None,
                quote: str = "q") -> Claim:
    """A claim measuring the constant ``measured``; ``judge`` is (rule, parameter, {role: x})."""
    reads = {} if judge is None else judge[2]
    return Claim(
        "000-99", notes()["000"], "line 1", (quote,), value, "params", expression(str(measured)),
        "because", values={role: expression(str(x)) for role, x in reads.items()},
        tolerance=tolerance,
        own_code=None if own is None else OwnCode("its own code", expression(str(own))),
        judge=None if judge is None else Judge(judge[0], judge[1], {r: r for r in reads}),
        declared=declared,
    )


def label(claim: Claim) -> str:
    return correct(claim, Lab()).label


# ------------------------------------------------------------------------------- rule 1: correct


@pytest.mark.parametrize(
    ("value", "measured", "tolerance", "verdict"),
    [
        pytest.param(100, 100, 0, "correct", id="exact"),
        pytest.param(100, 101, 0, "wrong", id="exact-off-by-one"),
        # "86M" rounded allows 86M +- 0.5M: 86,396,938 is in, 86,567,656 is out
        pytest.param(86_000_000, 86_396_938, 500_000, "correct", id="rounds-to-86M"),
        pytest.param(86_000_000, 86_567_656, 500_000, "wrong", id="rounds-to-87M"),
        pytest.param(8_000_000, 8_500_000, 500_000, "correct", id="at-the-edge"),
    ],
)
def test_rule_1_within_the_stated_rounding(value: float, measured: float, tolerance: float,
                                           verdict: str) -> None:
    assert label(constructed(value, measured, tolerance=tolerance)) == verdict


@pytest.mark.parametrize(
    ("quote", "measured", "verdict"),
    [
        # "~86M" is rounded (86M +- 0.5M) or cut (86M to 87M, 87M excluded): 85.5M to 87M
        pytest.param("~86M", 86_567_656, "correct", id="cut-to-86M"),
        pytest.param("约 86M", 86_567_656, "correct", id="cut-to-86M-yue"),
        pytest.param("≈ 86M", 85_500_000, "correct", id="rounded-edge"),
        pytest.param("~86M", 85_499_999, "wrong", id="below-the-rounding"),
        pytest.param("~86M", 87_000_000, "wrong", id="cut-is-87M"),
        pytest.param("86M", 86_567_656, "wrong", id="not-marked-approximate"),
    ],
)
def test_rule_1_an_approximate_figure_is_rounded_or_cut(quote: str, measured: int,
                                                        verdict: str) -> None:
    claim = constructed(86_000_000, measured, tolerance=500_000, quote=quote)
    assert label(claim) == verdict


def test_rule_1_an_approximate_mark_beside_an_exact_figure_changes_nothing() -> None:
    # "除以 √768 ≈ 27.7" claims d = 768 exactly (no tolerance): 769 is not it
    claim = constructed(768, 769, quote="除以 √768 ≈ 27.7")
    assert not claim.approximate and label(claim) == "wrong"


def test_the_approximate_rule_changes_two_rows() -> None:
    # the rows a cut figure makes correct that a rounded one does not: vitprof's value in
    # (value + tolerance, value + 2 tolerance), the value marked approximate
    rows = report_rows()
    cut = {c.id for c in claims() if c.value is not None and c.approximate
           and c.value + c.tolerance < number(rows[c.id]["vitprof"]) < c.value + 2 * c.tolerance}
    assert cut == {"000-27", "004-15"}  # 86,567,656 against "约 86M" and "~86M"
    assert all(rows[c]["verdict"] == "correct" for c in cut)


# ------------------------------------------------------------------------------- rule 2: variant


def test_rule_2_correct_only_for_the_variant_that_gives_the_value() -> None:
    # a bias-free W_O: 768 x 768 = 589,824 against 768 x 768 + 768 = 590,592
    claim = constructed(768 * 768, 768 * 768 + 768, own=768 * 768)
    assert label(claim) == "correct only for its own code"
    assert correct(claim, Lab()).verdict is Verdict.CORRECT_ONLY_FOR


def test_rule_2_needs_the_variant_to_match_too() -> None:
    assert label(constructed(100, 102, own=101)) == "wrong"


def test_rule_1_wins_over_rule_2() -> None:
    assert label(constructed(100, 100, own=100)) == "correct"


# ------------------------------------------------------------------------------- rule 3: declared


def test_rule_3_a_declared_approximation_is_not_wrong() -> None:
    # "LayerNorm x 2: 忽略": 0 stated, 2 x 2 x 768 = 3,072 per block
    assert label(constructed(0, 2 * 2 * 768, declared=True)) == "declared approximation"


def test_rule_3_comes_after_rule_2() -> None:
    claim = constructed(0, 3_072, own=0, declared=True)
    assert label(claim) == "correct only for its own code"


# ------------------------------------------------------------------------------- rule 4: wrong


def test_rule_4_wrong_otherwise() -> None:
    assert label(constructed(56_550_000, 17_563_828_224, tolerance=5_000)) == "wrong"


# ------------------------------------------------------------------------------- rule 5: O-notation


@pytest.mark.parametrize(
    ("power", "exponent", "share", "verdict"),
    [
        pytest.param(1, 1.0, 100.0, "correct", id="ffn-is-the-layer"),
        pytest.param(2, 1.0, 100.0, "wrong", id="wrong-power"),
        # at N = 65, D = 512 the core 2 N^2 D = 4,326,400 is 5.97% of the layer (+ 4 N D^2)
        pytest.param(2, 2.0, 100 * 4_326_400 / (4_326_400 + 68_157_440), "misleading",
                     id="dominated"),
        pytest.param(2, 2.0, 50.0, "correct", id="half-is-enough"),
    ],
)
def test_rule_5_scales_as(power: int, exponent: float, share: float, verdict: str) -> None:
    claim = constructed(None, 0, judge=(ClaimRule.SCALES_AS, power,
                                        {"exponent": exponent, "share": share}))
    assert label(claim) == verdict


@pytest.mark.parametrize(
    ("saving", "verdict"),
    [
        pytest.param(10.0, "correct", id="saves-enough"),
        pytest.param(1.5, "misleading", id="saves-little"),
        # as written: 34,078,720 against 4,326,400 MACs, a saving of -687.7%
        pytest.param(100 * (4_326_400 - 34_078_720) / 4_326_400, "misleading", id="costs-more"),
    ],
)
def test_rule_5_saves(saving: float, verdict: str) -> None:
    claim = constructed(None, 0, judge=(ClaimRule.SAVES, 10, {"saving": saving}))
    assert label(claim) == verdict


@pytest.mark.parametrize(
    ("residual", "verdict"),
    [
        pytest.param(0, "correct", id="exact-fit"),
        pytest.param(512, "wrong", id="off-the-form"),
    ],
)
def test_rule_5_fits(residual: int, verdict: str) -> None:
    claim = constructed(None, residual, judge=(ClaimRule.FITS, 0, {"residual": residual}))
    assert label(claim) == verdict


# ------------------------------------------------------------------------------- rule 6: order


@pytest.mark.parametrize(
    ("larger", "smaller", "named", "verdict"),
    [
        pytest.param(21_342_346, 18_979_338, 21_342_346, "correct", id="larger"),
        pytest.param(18_979_338, 21_342_346, 86_567_656, "wrong", id="smaller"),
        pytest.param(85_054_464, 85_054_464, 85_054_464, "wrong", id="equal"),
        # note 002's "Large" (ViT-B's blocks) above its Base, below ViT-L/16's blocks
        pytest.param(85_054_464, 18_914_304, 302_309_376, "misleading", id="misnamed"),
    ],
)
def test_rule_6_exceeds(larger: int, smaller: int, named: int, verdict: str) -> None:
    claim = constructed(None, 0, judge=(ClaimRule.EXCEEDS, 0, {"larger": larger, "smaller": smaller,
                                                          "named": named}))
    assert label(claim) == verdict


# ------------------------------------------------------------------------------- rule 7: level


@pytest.mark.parametrize(
    ("typical", "largest", "level", "verdict"),
    [
        pytest.param(200.0, 768.0, 200, "correct", id="typical-reaches"),
        # "点积可能达到几百" at d = 768: std sqrt(768) = 27.71, aligned q.k = d = 768
        pytest.param(768**0.5, 768.0, 200, "misleading", id="only-the-largest"),
        # at d = 64 aligned unit-variance q, k give 64 < 200
        pytest.param(64**0.5, 64.0, 200, "wrong", id="not-even-the-largest"),
        # "Attention 是线性操作（加权平均）": not affine in x (0), affine with fixed weights (1)
        pytest.param(0, 1, 1, "misleading", id="structural-under-the-premise"),
        pytest.param(0, 0, 1, "wrong", id="structural-never"),
        pytest.param(1, 1, 1, "correct", id="structural-always"),
    ],
)
def test_rule_7_reaches(typical: float, largest: float, level: float, verdict: str) -> None:
    claim = constructed(None, 0, judge=(ClaimRule.REACHES, level,
                                        {"typical": typical, "largest": largest}))
    assert label(claim) == verdict


# ------------------------------------------------------------------------------- every row


def report_rows() -> dict[str, dict[str, str]]:
    """The rows of the committed report's tables, by claim id."""
    rows: dict[str, dict[str, str]] = {}
    header: list[str] = []
    for line in REPORT.read_text().splitlines():
        if not line.startswith("|") or line.startswith("| :"):
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if cells[0] == "#":
            header = cells
        else:
            rows[cells[0]] = dict(zip(header, cells, strict=True))
    return rows


def number(text: str) -> float:
    return float(re.sub(r"[,%]| MB|\*\(evaluated\)\*", "", text).strip())


def test_rules_hold_on_every_row() -> None:
    rows = report_rows()
    assert set(rows) == {c.id for c in claims()}
    for claim in claims():
        row = rows[claim.id]
        verdict = row["verdict"]
        if claim.value is None:  # rules 5-7
            assert verdict in ("correct", "misleading", "wrong"), claim.id
            continue
        shown = row["vitprof"]
        decimals = len(re.search(r"(?:\.(\d+))?\D*$", shown).group(1) or "")
        half_unit = 0.5 * 10**-decimals  # the value as shown is rounded to this
        # rule 1: rounded, value +- tolerance; approximate, also cut: up to value + 2 tolerance
        low = claim.value - claim.tolerance
        high = claim.value + (2 if claim.approximate else 1) * claim.tolerance
        found = number(shown)
        if min(abs(found - low), abs(found - high)) > half_unit:  # not on an edge as shown
            assert (verdict == "correct") == (low <= found <= high), claim.id
        if verdict.startswith("correct only for "):  # rule 2
            assert claim.own_code and verdict == f"correct only for {claim.own_code.label}"
        if verdict == "declared approximation":  # rule 3
            assert claim.declared, claim.id
        if verdict == "wrong":  # rule 4: no variant matched, nothing declared
            assert not claim.declared, claim.id


def test_report_states_the_rules() -> None:
    text = REPORT.read_text()
    for rule in ("1. *correct*", "2. *correct only for X*", "3. *declared approximation*",
                 "4. *wrong*", "5. O-notation", "6. a size name",
                 "7. a statement without a figure"):
        assert rule in text


@pytest.mark.parametrize(
    ("claim", "verdict"),
    [
        # bias-free formulas copied from the ViT paper, judged alike
        pytest.param("003-2", "correct only for a bias-free projection, as the formula writes it"),
        pytest.param("003-5", "correct only for a bias-free projection, as the formula writes it"),
        pytest.param("003-6", "correct only for a bias-free projection, as the formula writes it"),
        # declared approximations
        pytest.param("004-10", "declared approximation"),
        pytest.param("004-17", "correct only for a single head (d = D), as its example takes it"),
        # "~86M": vit_b_16 has 86,567,656 (86M cut), note 001's model 86,396,938 (86M rounded)
        pytest.param("000-27", "correct"),
        pytest.param("004-15", "correct"),
        pytest.param("001-12", "correct"),
        # "~84M" for 85,054,464: neither rounded (85M) nor cut (85M) to 84M
        pytest.param("004-12", "wrong"),
        # a name that implies an order: Base below Small (wrong), Large = ViT-B (misleading)
        pytest.param("002-14", "wrong"),
        pytest.param("002-15", "misleading"),
        # O(N^2 D) for a layer whose projections are 94% of it at N = 65
        pytest.param("002-3", "misleading"),
        pytest.param("002-4", "correct"),
        # statements without a figure (rule 7)
        pytest.param("004-22", "misleading"),
        pytest.param("004-23", "misleading"),
        # the input size of note 001's figures
        pytest.param("001-21", "correct"),
        pytest.param("001-22", "correct"),
    ],
)
def test_consistent_verdicts(claim: str, verdict: str) -> None:
    assert report_rows()[claim]["verdict"] == verdict


# ------------------------------------------------------------------------------- the data file


def test_data_file_rejects_what_it_cannot_measure() -> None:
    with pytest.raises(ValueError, match="only arithmetic"):
        expression("__import__('os')")
    with pytest.raises(ValueError, match="unknown measurement keys"):
        measurement({"model": "vit_b_16", "figure": "params", "size": 3})
    with pytest.raises(ValueError, match="'flop'"):
        measurement({"model": "vit_b_16", "figure": "flop"})
    table = {"notes": {"000": {"file": "f", "title": "t", "compared_with": "c"}},
             "claim": [{"id": "000-1", "where": "line 1", "quote": ["q"], "value": 1,
                        "unit": "params", "measure": "x", "reason": "r"}]}
    with pytest.raises(ValueError, match=r"claim 000-1: undefined names \['x'\]"):
        parse(table)


# ------------------------------------------------------------------------------- note 002, §3.2

# note 002's CIFAR-ViT: N = 64 patches + CLS = 65 tokens, D = 512, 6 blocks, 8 heads (d = 64)
N, D, DEPTH, HEAD_DIM = 65, 512, 6, 64
SOFTMAX_CORE = 2 * N * N * D  # QK^T and AV: 4,326,400
AS_WRITTEN_CORE = 2 * N * D * D  # K^T V (D, D) and Q @ Context: 34,078,720
PER_HEAD_CORE = 2 * N * D * HEAD_DIM  # per-head contexts (d, d): 4,259,840
SOFTMAX_MODEL = (
    64 * 3 * 4 * 4 * D  # patch embedding: 1,572,864
    + DEPTH * (4 * N * D * D + SOFTMAX_CORE + 2 * N * D * 4 * D)  # q, k, v, proj; core; MLP
    + D * 10  # head on the class token
)  # = 1,254,370,304
AS_WRITTEN_MODEL = SOFTMAX_MODEL + DEPTH * (AS_WRITTEN_CORE - SOFTMAX_CORE)  # 1,432,884,224


def test_linear_attention_is_evaluated_as_written() -> None:
    row = report_rows()["002-5"]
    assert (row["vitprof"], row["verdict"]) == (f"{AS_WRITTEN_CORE:,}", "misleading")
    reason = next(line for line in REPORT.read_text().splitlines()
                  if line.startswith("- **002-5**"))
    assert f"2 N D^2 = {AS_WRITTEN_CORE:,} MACs per block" in reason
    assert f"2 N^2 D = {SOFTMAX_CORE:,} (x{AS_WRITTEN_CORE / SOFTMAX_CORE:.1f})" in reason  # x7.9
    more = 100 * (AS_WRITTEN_MODEL - SOFTMAX_MODEL) / SOFTMAX_MODEL  # +14.2%
    assert f"{AS_WRITTEN_MODEL:,} MACs, {more:+.1f}% against {SOFTMAX_MODEL:,}" in reason
    # the per-head reading is offered as vitprof's, not the note's
    saving = 100 * (SOFTMAX_CORE - PER_HEAD_CORE) / SOFTMAX_CORE  # 1.5%
    assert "vitprof's and not the note's" in reason
    assert f"2 N D d = {PER_HEAD_CORE:,} MACs per block, {saving:.1f}% less" in reason


# ------------------------------------------------------------------------------- evaluations


def test_evaluations_are_marked_apart_from_quoted_figures() -> None:
    rows = report_rows()
    evaluated = {c.id for c in claims() if c.evaluated}
    # note 003 states formulas, no numbers; 001-2 is its code evaluated at batch 2
    assert evaluated == ({f"003-{i}" for i in range(1, 12)} | {"001-2", "002-13"})
    for claim in claims():
        marked = rows[claim.id]["note's value"].endswith("*(evaluated)*")
        assert marked == (claim.id in evaluated), claim.id
    # 001-2: (B, 1, D) + (B, N + 1, D) at B = 2 is 2 x (768 + 197 x 768) = 304,128, no figure
    # of the note; its code at its own BATCH_SIZE = 1 holds 768 + 197 x 768 = 152,064 (row 001-4)
    assert rows["001-2"]["note's value"] == f"{2 * (768 + 197 * 768):,} *(evaluated)*"
    assert rows["001-4"]["note's value"] == f"{768 + 197 * 768:,}"


# ------------------------------------------------------------------------------- honest labels


@pytest.mark.parametrize(
    ("model", "label"),
    [
        pytest.param("note002_dynamic_vit", "keep ratios are vitprof's assumptions", id="dynamic"),
        pytest.param("note002_linear_attention", "per head: vitprof's reading", id="linear"),
        pytest.param("vit_22b", "not ViT-22B itself", id="vit_22b"),
    ],
)
def test_zoo_labels_say_what_is_ours(model: str, label: str) -> None:
    from vitprof.models.zoo import ZOO

    assert label in ZOO[model].description


def test_report_labels_the_dynamic_vit_assumptions() -> None:
    assert ("`note002_dynamic_vit` assumes them (vitprof's assumption, not the note's)"
            in REPORT.read_text())


# ------------------------------------------------------------------------------- claims added


def cifar_params(width: int, depth: int) -> int:
    """Note 002's CIFAR-ViT: 32 px, patch 4 (64 patches + CLS), MLP 4D, 10 classes."""
    block = 4 * (width**2 + width) + 2 * 4 * width**2 + 4 * width + width + 2 * 2 * width
    return (3 * 4 * 4 * width + width  # patch embedding
            + width + 65 * width  # CLS token, position embedding
            + depth * block + 2 * width + width * 10 + 10)  # blocks, final norm, head


def test_size_ladder_claims() -> None:
    rows = report_rows()
    base, small = cifar_params(512, 6), cifar_params(384, 12)  # 18,979,338 and 21,342,346
    assert (base, small) == (18_979_338, 21_342_346)
    assert (rows["002-14"]["vitprof"], rows["002-14"]["verdict"]) == (f"{base:,}", "wrong")
    # "Large" = ViT-B's blocks: 12 x (4 (768^2 + 768) + 2 x 768 x 3072 + 3072 + 768 + 4 x 768)
    vit_b_blocks = 12 * (4 * (768**2 + 768) + 2 * 768 * 3072 + 3072 + 768 + 4 * 768)
    assert rows["002-15"]["vitprof"] == f"{vit_b_blocks:,}"  # 85,054,464
    assert rows["002-15"]["verdict"] == "misleading"  # above its Base: the name misleads
    assert f"its Base's {cifar_params(512, 6) - cifar_params(512, 0):,}" in reason_of("002-15")


def test_context_and_head_width_claims() -> None:
    rows = report_rows()
    # as written the context is (D, D): 2 N D^2 / (2 N) = 512 x 512
    assert (rows["002-13"]["vitprof"], rows["002-13"]["verdict"]) == (f"{512 * 512:,}", "correct")
    for claim in ("003-10", "003-11"):  # d = D / H = 768 / 12, the d of 1/sqrt(d)
        assert (rows[claim]["vitprof"], rows[claim]["verdict"]) == (f"{768 // 12}", "correct")


def test_complexity_totals_fit_exactly() -> None:
    rows = report_rows()
    # softmax block: 2 N^2 D + 12 N D^2 (q, k, v, proj 4 D^2; MLP 8 D^2), D = 512: the terms,
    # not the fit's residual, are what the row shows
    shown = f"a = {2 * 512:,} = 2D, b = {12 * 512**2:,} = 12 D^2"  # 1,024 and 3,145,728
    assert (rows["002-16"]["vitprof"], rows["002-16"]["verdict"]) == (shown, "correct")
    # as-written linear block at 32 and 64 px (N = 65, 257): 14 N D^2 at both sizes
    shown = f"b = {14 * 512**2:,} = 14 D^2"  # 3,670,016
    assert (rows["002-17"]["vitprof"], rows["002-17"]["verdict"]) == (shown, "correct")
    assert rows["002-16"]["note's value"] == rows["002-17"]["note's value"] == "-"


def test_torchinfo_activation_size_is_reproduced_and_its_gap_named() -> None:
    row = report_rows()["001-20"]
    text = REPORT.read_text()
    # torchinfo: 2 x outputs of the leaf layers with parameters, float32: the conv 196 x 768,
    # per block 2 LayerNorms + fc1 + fc2 (3 x 197 x 768 + 197 x 3072), head LN + 2 Linears
    elements = 196 * 768 + 12 * (3 * 197 * 768 + 197 * 3072) + 768 + 768 + 10  # 12,860,938
    assert f"{elements:,} elements x 4 bytes x 2 = {elements * 8 / 1e6:.2f} MB" in text
    assert f"{elements * 8 / 1e6:.2f}" == "102.89"
    maps = 12 * 197**2 * 4 * 12  # attention maps of one forward: 22,353,984 bytes
    assert f"= {maps / 1e6:.2f} MB per forward" in text
    measured = float(row["vitprof"].removesuffix(" MB"))
    assert measured > 102.89 + 2 * maps / 1e6 and row["verdict"] == "wrong"
    # vitprof's figure is labelled an estimate, and the reason names every op kind it counts
    assert row["unit"].startswith("MB, estimated")
    assert "not a measured memory" in reason_of("001-20")
    counted = {op.op for op in analyze("note001_vit_b16").ops}
    assert counted and all(op in reason_of("001-20") for op in counted)


# ------------------------------------------------------------------------- note 004, §3.2, §4.1


def reason_of(claim: str) -> str:
    return next(line for line in REPORT.read_text().splitlines()
                if line.startswith(f"- **{claim}**"))


def test_attention_is_linear_only_for_fixed_weights() -> None:
    row = report_rows()["004-22"]
    # no share of MACs: the layer is affine in x or not (0: not), with its weights fixed it is
    assert (row["vitprof"], row["verdict"]) == ("0", "misleading")
    reason = reason_of("004-22")
    core = 2 * 197 * 197 * 768  # Q K^T and A V, products of two activations: 59,610,624
    assert f"{core:,} MACs per block of products of two activations" in reason
    assert "0 as it runs, 1 with its softmax held fixed" in reason
    assert "Attention 是线性操作（加权平均）" in reason  # the lost characters, read
    assert "%" not in row["unit"]


@pytest.mark.parametrize(
    ("pattern", "held", "expected"),
    [
        pytest.param(r"blocks\.0\.attn$", False, 0, id="attention"),
        pytest.param(r"blocks\.0\.attn$", True, 1, id="attention-fixed-weights"),
        pytest.param(r"blocks\.0\.attn\.q$", False, 1, id="a-linear-with-bias"),
        pytest.param(r"blocks\.0\.mlp$", True, 0, id="gelu"),  # no softmax to hold
    ],
)
def test_affine_is_tested_numerically(pattern: str, held: bool, expected: int) -> None:
    # note 002's CIFAR-ViT: 32 px, batch 1, D = 512 (a small CPU build)
    assert affine("note002_cifar_vit", pattern, (1, 3, 32, 32), hold_weights=held) == expected


def test_dot_products_of_several_hundred() -> None:
    row = report_rows()["004-23"]
    assert (row["vitprof"], row["verdict"]) == (f"{768**0.5:.2f}", "misleading")  # 27.71
    reason = reason_of("004-23")
    # unit-variance q, k: std sqrt(d), 27.7 at the example's d = 768 and 8 at d = 64;
    # 200 / 27.71 = 7.2 standard deviations; aligned, q.k reaches d = 768
    assert f"sqrt(d) = {768**0.5:.1f} at the example's d = 768" in reason
    assert "8 at ViT-B/16's head width d = 64" in reason
    assert f"200 is {200 / 768**0.5:.1f} standard deviations" in reason
    assert "at most d = 768, aligned" in reason
    # the paper's QK-norm is a LayerNorm; vit_22b_parallel's RMSNorm is said to be a choice
    assert "the paper's LayerNorm on q and k" in reason and "RMSNorm, its choice" in reason
    assert len(reason.split()) < 110  # cut to what a reader of the note needs (was 180 words)


# ------------------------------------------------------------------------------- note 001, input


def test_input_size_of_note_001s_figures() -> None:
    rows = report_rows()
    elements = 1 * 3 * 224 * 224  # (1, 3, 224, 224): 150,528 values
    assert f"{elements * 4 / 1e6:.2f} MB" == rows["001-21"]["vitprof"] == "0.60 MB"
    assert f"{elements:,} float32 values" in reason_of("001-21")
    assert rows["001-22"]["vitprof"] == "224"
    # at 384 px, N = 577: 12 blocks x (577 x (4 x 768^2 + 2 x 768 x 3072) + 2 x 577^2 x 768),
    # the patch conv 576 x 768 x 768, the head's hidden layer and classifier 768^2 + 768 x 10
    at_384 = (12 * (577 * (4 * 768**2 + 2 * 768 * 3072) + 2 * 577**2 * 768)
              + 576 * 768 * 768 + 768 * 768 + 768 * 10)
    assert f"at 384 px the model performs {at_384:,} MACs" in reason_of("001-22")



# ------------------------------------------------------------------------------- reasons


def test_the_85_8m_total_is_the_model_without_its_head() -> None:
    headless = 86_567_656 - (768 * 1000 + 1000)  # vit_b_16 less Linear(768, 1000): 85,798,656
    for claim in ("000-1", "000-2"):
        assert f"without its head: 86,567,656 - 769,000 (Linear(768, 1000)) = {headless:,}" \
            in reason_of(claim)
        assert report_rows()[claim]["verdict"] == "wrong"  # the model has its head


def test_the_tokens_share_shows_neither_error() -> None:
    exact = 100 * (768 + 197 * 768) / 86_567_656  # 152,064 / 86,567,656 = 0.1757%
    noted = 100 * 151_776 / 85_800_000  # the note's own figures: 0.1769%
    assert f"{exact:.2f}" == f"{noted:.2f}" == "0.18"
    reason = reason_of("000-15")
    assert f"= {exact:.4f}%" in reason and f"= {noted:.4f}%" in reason
    assert "cancel" not in reason


def test_the_embedding_dimension_row_is_about_d() -> None:
    assert "embedding dimension D" in reason_of("000-5")
    assert "class token" not in reason_of("000-5")


def test_differences_in_points_have_one_format() -> None:
    # two significant digits: -0.012 (0.90 - 0.8883) beside -0.0078 (0.69 - 0.6822), -0.75
    shown = {claim: row["difference"] for claim, row in report_rows().items()
             if row["difference"].endswith(" pt")}
    assert shown["000-11"] == "-0.012 pt" and shown["000-13"] == "-0.0078 pt"
    for claim, text in shown.items():
        digits = re.sub(r"^[+-]0?\.?0*", "", text.removesuffix(" pt")).replace(".", "")
        assert len(digits) == 2, (claim, text)


def test_the_study_builds_the_note_models_through_the_zoo() -> None:
    # the study's measurements build note models with their builders' further options (note
    # 002's one (D, D) context: num_heads=1) through the zoo's entry, not by importing the note
    source = (Path(__file__).resolve().parents[1] / "vitprof" / "study" / "corrections"
              / "measure.py").read_text()
    assert "importlib" not in source
    with torch.device("meta"):
        one_head = ZOO["note002_linear_attention"].build(32, 10, num_heads=1)
    assert {m.num_heads for m in one_head.modules() if hasattr(m, "num_heads")} == {1}
