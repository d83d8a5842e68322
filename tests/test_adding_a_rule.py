"""A core rule is one object holding its code: adding one is that object in
``vitprof/recognize/rules/cores.py`` (a :class:`~vitprof.recognize.rules.cores.CoreFinder`, put
in ``CORE_RULES`` at its place in the precedence), its fixture in
``tests/recognition_fixtures.py`` and the regenerated ``docs/recognition.md``; nothing in the
graph machinery changes. Here the object is written in this file and given to the recognizer
by ``RuleSet(added=...)``, as a rule being written is, before it joins its file's list: it
finds the cores of a model that no registered rule finds.
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass, replace
from math import prod

import pytest
import torch
from recognition_fixtures import (
    IMAGE,
    OUTSIDE,
    Blk,
    Breakdown,
    L,
    Net,
    _sum,
    _times,
    analyze_under,
    block,
)

from vitprof.core.records import Component as C
from vitprof.count.result import Profile
from vitprof.recognize.graph.flow import Flow
from vitprof.recognize.rules.base import RuleSet
from vitprof.recognize.rules.cores import CoreFinder, Found


@dataclass(frozen=True)
class _GatedScores(CoreFinder):
    def find(self, flow: Flow, i: int, taken: Set[int]) -> Found | None:
        """Record ``i`` multiplies two activations element-wise (q * k), a sum reduces it
        (the scores), a sigmoid maps them and they multiply a third activation, larger."""
        step = flow.steps[i]
        if step.op != "aten.mul" or step.macs or step.params or any(
                flow.weights[j] for j in step.sources):
            return None
        for s in flow.consumers[i]:
            scores = flow.steps[s]
            if s in taken or scores.op != "aten.sum" or prod(scores.shape) >= prod(step.shape):
                continue
            for g in flow.consumers[s]:
                if flow.steps[g].op != "aten.sigmoid":
                    continue
                for m in flow.consumers[g]:
                    if flow.steps[m].op == "aten.mul" and prod(flow.steps[m].shape) > prod(
                            scores.shape):
                        return [i, s, g, m], self
        return None


GATED_SCORES = _GatedScores(
    "gated-scores", (C.ATTN_CORE,),
    """An element-wise product of two activations summed into scores, a sigmoid of them
    multiplying a third activation, is an attention core.""",
    "element-wise multiplies of activations, the sums and sigmoids after them",
    "gated_scores_block")


class GatedScoresBlk(Blk):
    """The standard block whose core gates v by sigmoid(sum(q * k)) per token: no product."""

    def core(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return (q * k).sum(-1, keepdim=True).sigmoid() * v


# the standard net, its cores element-wise: attn_core has no MACs (and no params)
GATED_SCORES_NET: Breakdown = _sum(OUTSIDE, _times(L, {**block(), C.ATTN_CORE: (0, 0)}))


def _components(profile: Profile) -> Breakdown:
    return {c: (v.params, v.macs) for c, v in profile.components.items()
            if (v.params, v.macs) != (0, 0)}


def test_a_core_rule_added_to_a_rule_set_finds_its_cores() -> None:
    model = Net(GatedScoresBlk)
    without = analyze_under(RuleSet(), model, image_size=IMAGE)
    assert set(_components(without)) == {C.OTHER}  # no registered rule finds a core

    added = analyze_under(RuleSet(added=[GATED_SCORES]), model, image_size=IMAGE)
    assert _components(added) == GATED_SCORES_NET
    found = {op.module: op.placed_by for op in added.ops if op.component is C.ATTN_CORE}
    assert set(found.values()) == {"gated-scores"} and len(found) == L

    off = analyze_under(RuleSet(off={"gated-scores"}, added=[GATED_SCORES]), model,
                        image_size=IMAGE)
    assert _components(off) == _components(without)


def test_an_added_rule_is_a_new_one() -> None:
    listed = replace(GATED_SCORES, name="core-product")
    with pytest.raises(KeyError, match="recognition rule core-product is listed already"):
        analyze_under(RuleSet(added=[listed]), Net(GatedScoresBlk), image_size=IMAGE)
