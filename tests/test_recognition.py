"""Every recognition rule (docs/recognition.md) on its fixture (tests/recognition_fixtures.py):
the fixture's breakdown is its closed form and names the rule in ``placed_by``; with the rule
switched off (``RuleSet(off=...)``, given to the recognizer) the breakdown differs; the rules
run in the order of their registry, which the page lists.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

import pytest
import torch
from recognition_fixtures import (
    CACHED_BIAS,
    CLASS_ATTENTION,
    FIXTURES,
    IMAGE,
    Breakdown,
    CachedBiasBlk,
    Fixture,
    L,
    Net,
    TokenNormNet,
    analyze_under,
    net,
)

from vitprof import analyze
from vitprof.count.result import Profile
from vitprof.recognize.rules.base import ALL, RuleSet
from vitprof.recognize.rules.page import recognition_page
from vitprof.recognize.rules.registry import PARAM_ORDER, RECORD_ORDER, RULES

DOCS = Path(__file__).parents[1] / "docs" / "recognition.md"
# rules whose removal leaves their fixture's breakdown as it is, and why
UNREMOVABLE = {
    "no-blocks": "the last resort: with it off nothing else places a model without blocks",
}
# rules that decide what the placing rules read, and place nothing themselves
STRUCTURAL = {
    "residual-span": "the span of a convolutional network, read by pointwise-on-map and "
                     "after-last-block-head",
    "residual-attention-block": "which cores after the lists of blocks are blocks, read by the "
                                "attention and in-block rules",
    "pooled-skip-join": "which adds are residual joins, read by residual-branch-conv",
    "input-skip-join": "which adds are residual joins (the model's input as skip), read by the "
                       "block spans",
    "concatenated-one-arm": "which adds are residual joins, read by residual-branch-conv",
    "post-norm-stream": "which residual adds a block's stream holds, read by the block spans",
    "joined-parameter-operand": "which products are products of two activations, read by "
                                "core-product",
    "added-term-beside-product": "which products are products of two activations, read by "
                                 "core-product",
    "core-within-residual": "where a core's path to its second product stops, read by "
                            "core-product",
    "scores-by-value": "which records a core's path to its second product runs through, read "
                       "by core-product",
    "reused-map-product": "which softmax-weighted products are no cores, read by "
                          "softmax-weighted-product",
    "output-by-value": "which records the walk from a core to its output projections runs "
                       "through, read by proj-after-core",
    "joined-span-block": "which module is a block, read by the rules inside and outside blocks",
    "block-per-call": "which call of a block's module a record runs in, read by the rules "
                      "inside and outside blocks",
    "residual-segment-block": "which records a block's stream holds after its module, read by "
                              "weighted-in-block",
    "next-core-qkv": "which records proj-after-core keeps, the rest placed by qkv-feeds-core",
}


def _profile(fixture: Fixture, rules: RuleSet = ALL) -> Profile:
    with torch.no_grad() if fixture.no_grad else contextlib.nullcontext():
        return analyze_under(rules, fixture.build(), **fixture.inputs,
                             overrides=list(fixture.overrides))


def _breakdown(profile: Profile) -> Breakdown:
    return {c: (v.params, v.macs) for c, v in profile.components.items()
            if (v.params, v.macs) != (0, 0)}


def _whole(profile: Profile) -> dict:
    """Every component's params, MACs and vector FLOPs, and every record's place."""
    return {"components": profile.components,
            "ops": [(op.module, op.component, op.block) for op in profile.ops],
            "params": [(p.name, p.component, p.block) for p in profile.params]}


@pytest.mark.parametrize("name", list(RULES))
def test_the_fixture_of_each_rule_is_its_closed_form_and_names_it(name: str) -> None:
    fixture = FIXTURES[RULES[name].fixture]
    profile = _profile(fixture)
    assert _breakdown(profile) == fixture.expected
    placed = {r.placed_by for r in (*profile.ops, *profile.params)}
    assert name in placed or name in STRUCTURAL
    assert placed <= set(RULES)


@pytest.mark.parametrize("name", [n for n in RULES if n not in UNREMOVABLE])
def test_removing_a_rule_changes_its_fixture(name: str) -> None:
    fixture = FIXTURES[RULES[name].fixture]
    kept = _whole(_profile(fixture))
    removed = _whole(_profile(fixture, RuleSet(off={name})))
    assert removed != kept
    assert _whole(_profile(fixture)) == kept  # a rule set is an argument: no state left behind


def test_a_rule_set_refuses_an_unknown_rule() -> None:
    with pytest.raises(KeyError, match="no recognition rule no-such-rule"):
        analyze_under(RuleSet(off={"no-such-rule"}), FIXTURES["plain_block"].build(),
                      image_size=IMAGE)


def test_every_fixture_serves_a_rule() -> None:
    assert {rule.fixture for rule in RULES.values()} == set(FIXTURES)


def test_the_rules_decide_in_the_order_of_the_page() -> None:
    # the page lists the registry; records and parameters are placed by their rules in its
    # order, the first that places one deciding
    listed = re.findall(r"^\| `([a-z-]+)` \|", DOCS.read_text(), re.M)
    assert listed == list(RULES)
    for order in (RECORD_ORDER, PARAM_ORDER):
        ranks = [listed.index(rule.name) for rule in order]
        assert ranks == sorted(ranks)
    assert {"token-parameter", "producer"} <= {rule.name for rule in RECORD_ORDER}
    assert {"token-parameter", "projection-bias"} <= {rule.name for rule in PARAM_ORDER}


def test_docs_recognition_is_the_generated_page() -> None:
    assert DOCS.read_text() == recognition_page(), (
        "docs/recognition.md is stale: python -m vitprof.recognize.rules.page "
        "docs/recognition.md")


def test_a_norm_of_the_class_token_alone_keeps_its_affine() -> None:
    """CaiT's class attention norms the class token alone: at batch 1 its D values are as many
    as the norm's weight, which is still the norm's affine (own-module-record), not q/k/v."""
    profile = analyze(TokenNormNet(), image_size=IMAGE, recognizer="graph")
    assert _breakdown(profile) == net(CLASS_ATTENTION)
    placed = {p.name: p.placed_by for p in profile.params}
    assert placed["z.c.weight"] == placed["z.c.bias"] == "own-module-record"


def test_a_bias_cached_when_switched_to_eval_is_the_cores() -> None:
    """A score bias indexed from its table when the block is switched to eval mode, not in
    the forward: the table's values reach the scores through the cached tensor, so it is
    ``attn_core`` (main placed it "without data-flow evidence" in ``norm``)."""
    profile = analyze(Net(CachedBiasBlk), image_size=IMAGE, recognizer="graph")
    assert _breakdown(profile) == net(*[CACHED_BIAS] * L)
    assert {p.placed_by for p in profile.params if p.name.endswith(".r")} == {"core-product"}
    assert not profile.warnings
