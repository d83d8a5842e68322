"""Issue 35's attention classes, each on its neutral-name fixture (tests/recognition_fixtures.py):
the breakdown is the closed form written beside the fixture, where main placed part of the
core, or the records around it, elsewhere."""

from __future__ import annotations

import pytest
from recognition_fixtures import (
    CLASS_FIXTURES,
    FIXTURES,
    IMAGE,
    SEQUENCE_POOL,
    Breakdown,
    analyze_under,
)

from vitprof import analyze
from vitprof.core.records import Component as C
from vitprof.recognize.rules.base import RuleSet

ALL = {**FIXTURES, **CLASS_FIXTURES}
# issue 35's defect class -> the fixture that reproduces it
CLASSES = {
    "3: a windowed core whose scores baddbmm adds a bias table to": "window_bias_block",
    "4: decomposed relative positions from q, beside a core in a module of its own":
        "query_term_block",
    "6: memory key/values per head, the keys' normalised, joined to k and v":
        "memory_layout_block",
    "9: landmark attention, a product of two cores' outputs, a conv of the values added":
        "landmark_block",
    "10: kernelised attention through a random-feature buffer, separate q/k/v linears":
        "random_feature_block",
    "11: a lambda layer, no output projection, its output added to the stream as it is":
        "lambda_block",
    "10, regression: a window mask added to cosine scores twice, a position-bias MLP":
        "masked_window_block",
}


def _breakdown(name: str) -> Breakdown:
    fixture = ALL[name]
    profile = analyze(fixture.build(), **fixture.inputs, recognizer="graph",
                      overrides=list(fixture.overrides))
    return {c: (v.params, v.macs) for c, v in profile.components.items()
            if (v.params, v.macs) != (0, 0)}


@pytest.mark.parametrize("name", CLASSES.values(), ids=list(CLASSES))
def test_each_attention_class_is_its_closed_form(name: str) -> None:
    assert _breakdown(name) == ALL[name].expected


def test_the_memory_layout_needs_joined_parameter_operand() -> None:
    fixture = ALL["memory_layout_block"]
    profile = analyze_under(RuleSet(off={"joined-parameter-operand"}), fixture.build(),
                            image_size=IMAGE)
    assert {c: (v.params, v.macs) for c, v in profile.components.items()
            if (v.params, v.macs) != (0, 0)} != fixture.expected


def test_sequence_pooling_is_an_attention_pool() -> None:
    """Class 15, decided as every attention pool after the blocks is placed (README): the score
    linear ``head``, the weighted sum ``attn_core`` in no block (as on main: this pins it)."""
    fixture = ALL["sequence_pool"]
    profile = analyze(fixture.build(), image_size=IMAGE, recognizer="graph")
    assert {c: (v.params, v.macs) for c, v in profile.components.items()
            if (v.params, v.macs) != (0, 0)} == fixture.expected
    pooled = [op for op in profile.ops if op.component is C.ATTN_CORE and op.block is None]
    assert sum(op.macs for op in pooled) == SEQUENCE_POOL[C.ATTN_CORE][1]
    assert {p.placed_by for p in profile.params if p.name.startswith("z.")} == {
        "pooling-head-attention"}


def test_a_mask_added_twice_to_the_scores_is_no_residual_add() -> None:
    """The regression of core-within-residual (5232da6): the second add of the window mask
    forks from the mask, with the scores' products on its other arm, and was taken for the
    stream's ``x + f(x)``; the core stopped there, its first product went to ``attn_qkv``
    (by ``producer``) and the bias MLP to ``mlp``. Main 1e59fc4 fails it, f40b197 passes."""
    profile = analyze(ALL["masked_window_block"].build(), image_size=IMAGE, recognizer="graph")
    assert not [w for w in profile.warnings if "self-check failed" in w]
    assert {p.placed_by for p in profile.params if ".w.u." in p.name} == {"score-bias"}


def test_a_token_merge_keeps_the_blocks_apart() -> None:
    """A merge between attention and MLP scores pairs of tokens by a product of their keys and
    scatters tokens and their sizes by the best match's indices; the sizes reach the next
    block's scores. Main ran a core from the merge's product through those indices into the
    next block's scores: one block found for two, the first MLP ``attn_proj``/``attn_core``."""
    profile = analyze(ALL["index_merge_block"].build(), image_size=IMAGE, recognizer="graph")
    assert {(op.module.split(".")[1], op.block) for op in profile.ops
            if op.module.startswith("m.")} == {("0", 0), ("1", 1)}
    assert {c: (v.params, v.macs) for c, v in profile.components.items()
            if (v.params, v.macs) != (0, 0)} == ALL["index_merge_block"].expected
    assert not profile.warnings


def test_a_fused_token_is_no_core_and_its_block_keeps_its_mlp() -> None:
    """A block keeping the tokens the first token's attention weights most (an argsort's
    indices) and fusing the rest into one token by a product with that attention row: main
    took the fused product for a core of its own and the MLP's first linear ``g`` (D * HID +
    HID = 144 params, 3 * D * HID = 384 MACs) for its output projection, ``attn_proj``, with
    no check firing."""
    profile = analyze(ALL["fused_token_block"].build(), image_size=IMAGE, recognizer="graph")
    assert {c: (v.params, v.macs) for c, v in profile.components.items()
            if (v.params, v.macs) != (0, 0)} == ALL["fused_token_block"].expected
    assert {p.component for p in profile.params if p.name.startswith("m.0.g.")} == {C.MLP}
    assert not profile.warnings
