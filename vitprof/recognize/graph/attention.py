"""Attention cores and the walks that find their projections in the data flow.

A **core** (:class:`Core`) is what the core rules (:mod:`vitprof.recognize.rules.cores`) found:
its records, its q/k/v projections and output projections, and the records around it that they
place. This module holds the machinery they share: the walk from a core's operands up to the
first weighted records (its q/k/v projections) and from its output down to them (its output
projections, :func:`walk`), and the producers of a core's operands and of what it reads beside
them (:func:`inputs`).
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass

from vitprof.recognize.graph.flow import Flow
from vitprof.recognize.rules.base import Rule

DEPTH = 8  # records without MACs allowed between the two products of a core


@dataclass(frozen=True)
class Core:
    """One attention core: its records, its q/k/v projections and its output projections."""

    steps: frozenset[int]
    qkv: frozenset[int]
    proj: frozenset[int]
    found_by: Rule  # the rule that found the core (its steps)
    # records of the core beside the products: those making a bias or mask of the scores, and
    # the element-wise ones between the projections and the products (scaling, rotary)
    bias: frozenset[int] = frozenset()
    passed: frozenset[int] = frozenset()  # those of ``bias`` walked through to a projection
    feeding: frozenset[int] = frozenset()  # records feeding only the q/k/v projections
    gates: frozenset[int] = frozenset()  # input projections beside q/k/v, meeting the output
    terms: frozenset[int] = frozenset()  # records from the projections to a score term

    @property
    def first(self) -> int:
        return min(self.steps)


def walk(flow: Flow, starts: list[int], core: frozenset[int] | set[int],
         upstream: bool, inner: Set[int] = frozenset()) -> tuple[set[int], set[int]]:
    """The first weighted records reached from ``starts`` through :meth:`Flow.passes` records,
    upstream (through sources) or downstream (through the consumers reading their values:
    :meth:`Flow.output_readers`), and the records passed that
    are not norms (q scaling, rotary, feature maps, head merging). Downstream, a join whose
    arms fork from ``inner`` (the core's q/k/v projections and the records from them to the
    core) is no residual add but the core's: it is passed, and the records of its arm beside
    the core (not norms) are passed with it (:func:`_beside_core`)."""
    found: set[int] = set()
    passed: set[int] = set()
    seen: set[int] = set(core)
    stack = list(starts)
    while stack:
        i = stack.pop()
        if i in seen:
            continue
        seen.add(i)
        if flow.weighted(i):
            found.add(i)
            continue
        beside = None if upstream else _beside_core(flow, i, max(core), inner)
        if flow.passes(i) or beside is not None:
            if not flow.norm(i) and not flow.own_bias(i) and not flow.projection_bias(i):
                # a linear's bias stays its linear's
                passed.add(i)
            passed.update(j for j in beside or () if not flow.norm(j))
            stack.extend(flow.steps[i].sources if upstream else flow.output_readers(i))
    return found, passed


def _beside_core(flow: Flow, i: int, last: int, inner: Set[int]) -> set[int] | None:
    """If step ``i`` is a join forking from ``inner`` (the q/k/v side of the core whose last
    record is ``last``), the records of its arms that do not depend on the core: a map of v
    added to the attention's output before its projection (a depthwise conv of v); None
    otherwise."""
    split = flow.forks.get(i)
    if split is None or split[0] not in inner:
        return None
    return {j for arm, source in zip(split[1], flow.steps[i].sources, strict=True)
            if last not in flow.ancestors(source, last) for j in arm}


def inputs(
    flow: Flow, steps: frozenset[int], products: bool = True
) -> tuple[list[int], list[int]]:
    """Producers of the core's operands (q, k, v: what the products and a fused op multiply)
    and of what it reads beside them (a mask or a position bias added to the scores); the
    core's last record is its second product, whose inputs are operands even without MACs
    (over one key: :data:`~vitprof.recognize.rules.cores.SINGLE_KEY`). A core without
    ``products`` (an element-wise one: :data:`~vitprof.recognize.rules.cores.AGGREGATION`)
    has operands only."""
    operands: list[int] = []
    beside: list[int] = []
    last = max(steps)  # the second product (one over a single key has no MACs)
    for i in steps:
        step = flow.steps[i]
        outside = [j for j in step.sources if j not in steps]
        (operands if step.macs or i == last or not products else beside).extend(outside)
        beside.extend(step.beside)
    return operands, beside


