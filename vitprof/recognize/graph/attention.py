"""Attention cores and their projections, found in the data flow.

A **core** is a fused attention op (scaled-dot-product or flex attention, or the attn_core part
of ``_native_multi_head_attention``), or a free product followed, through records that map
the scores (scaling, a mask or bias add, softmax or another normalisation, the head-mixing
linears of talking-heads attention), by a second free product:
``softmax(Q K^T) V`` and linear attention ``Q (K^T V)`` alike. The core is every record on that
path. **attn_qkv** are the first weighted records upstream of the core's inputs, walking through
records without MACs that read no parameter but a norm's (views are not records; QK-norm,
rotary, scaling are), never through a join; **attn_proj** the first weighted records downstream
of the core's output, before a join. The records passed on the way (not norms: QK-norm stays
``norm``) belong to the core, as do those making a bias or mask of the scores. Attention with one
product or none is found by what it multiplies: a product whose operand a softmax normalised
(:func:`_weighted_by_softmax`: outlook attention), or an element-wise product with normalised
weights reduced over the tokens and multiplied back (:func:`_aggregation`: additive and
separable attention).
A fused op priced in parts names its projections itself: no walk.
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass, replace
from math import prod

from vitprof.recognize.graph.flow import SOFTMAX, WINDOW, Flow
from vitprof.recognize.rules import cores as core_rules

DEPTH = 8  # records without MACs allowed between the two products of a core
SAMPLERS = ("aten.grid_sampler_2d", "aten.grid_sampler_3d")  # resamplings at computed points


@dataclass(frozen=True)
class Core:
    """One attention core: its records, its q/k/v projections and its output projections."""

    steps: frozenset[int]
    qkv: frozenset[int]
    proj: frozenset[int]
    # records of the core beside the products: those making a bias or mask of the scores, and
    # the element-wise ones between the projections and the products (scaling, rotary)
    bias: frozenset[int] = frozenset()
    found_by: str = core_rules.CORE_PRODUCT.name  # the rule that found the core (its steps)
    passed: frozenset[int] = frozenset()  # those of ``bias`` walked through to a projection
    feeding: frozenset[int] = frozenset()  # records feeding only the q/k/v projections
    gates: frozenset[int] = frozenset()  # input projections beside q/k/v, meeting the output
    terms: frozenset[int] = frozenset()  # records from the projections to a score term

    @property
    def first(self) -> int:
        return min(self.steps)


def _second_product(
    flow: Flow, start: int, taken: set[int], weighted: bool = True
) -> list[int] | None:
    """The records from the free product ``start`` to a second free product it feeds, through
    at most :data:`DEPTH` records that map the scores (:meth:`Flow.on_map`; without MACs
    unless ``weighted``); None if none. A fused attention op is a core of its own, never the
    second product of another: gemma4_vit's rotary frequencies (a product of the positions and
    the inverse frequencies) reach its SDPA through cos and the rotation of q, and would make
    its q projection a bias of that core."""
    seen: set[int] = set()
    frontier = [start]
    for _ in range(DEPTH + 1):
        following = []
        for i in frontier:
            for j in flow.consumers[i]:
                if j in seen or j in taken or flow.fused_core(j):
                    continue
                seen.add(j)
                if _stream_join(flow, j):
                    continue
                if flow.free_product(j) or _spreads(flow, j, start):
                    return _between(flow, start, j, taken)
                if flow.on_map(j, start) and (weighted or not flow.steps[j].macs):
                    following.append(j)
        frontier = following
    return None


def _stream_join(flow: Flow, i: int) -> bool:
    """Record ``i`` is a residual add of the stream, ``x + f(x)``, that no scores map crosses
    (:data:`~vitprof.recognize.rules.cores.STREAM_BOUND`)."""
    return core_rules.STREAM_BOUND in flow.rules and i in flow.joins and flow.free_skip(i)


def _spreads(flow: Flow, i: int, scores: int) -> bool:
    """Record ``i`` multiplies, element-wise, two activations into more elements than the
    ``scores`` it maps (:data:`~vitprof.recognize.rules.cores.SINGLE_KEY`): the scores spread over
    the values' features, as a product over one key runs (``einsum`` with a contraction of one
    is a broadcast ``mul``)."""
    step = flow.steps[i]
    return (core_rules.SINGLE_KEY in flow.rules and step.op == "aten.mul" and not step.params
            and not step.carried and len(set(step.sources)) == 2
            and not any(flow.weights[j] for j in step.sources)
            and prod(step.shape) > prod(flow.steps[scores].shape))


def _between(flow: Flow, start: int, end: int, taken: Set[int]) -> list[int]:
    """Every record on a path of score maps from ``start`` to ``end``, not only the shortest
    (MViTv2's relative-position adds rewrite the scores in place: its softmax reads both the
    scores and the adds), but those of other cores (``taken``)."""
    reached = {start}
    for i in sorted(flow.ancestors(end, start)):
        if i not in taken and (i == end or flow.on_map(i, start)) and any(
                j in reached for j in flow.steps[i].sources):
            reached.add(i)
    return sorted(reached)


def _core_steps(flow: Flow) -> list[tuple[frozenset[int], str]]:
    """The records of each core, with the rule that found it."""
    taken: set[int] = set()
    cores = []
    for i in range(len(flow.steps)):
        if i in taken:
            continue
        if flow.fused_core(i) and core_rules.FUSED_CORE in flow.rules:
            found: list[int] | None = [i]
            rule = core_rules.FUSED_CORE.name
        elif flow.free_product(i):
            found, rule = _product_core(flow, i, taken)
        elif flow.steps[i].op in SAMPLERS:
            found, rule = _sampled_points(flow, i, taken), core_rules.SAMPLED_POINTS.name
        elif core_rules.AGGREGATION in flow.rules:
            found, rule = _aggregation(flow, i, taken), core_rules.AGGREGATION.name
        else:
            continue
        if found:
            taken.update(found)
            cores.append((frozenset(found), rule))
    return sorted(cores, key=lambda found: min(found[0]))


def _product_core(flow: Flow, i: int, taken: set[int]) -> tuple[list[int] | None, str]:
    """The core a free product ``i`` starts and the rule that found it: the records to a second
    product (:data:`~vitprof.recognize.rules.cores.CORE_PRODUCT`), else the product alone when a
    softmax normalised one of its operands
    (:data:`~vitprof.recognize.rules.cores.SOFTMAX_WEIGHTED`)."""
    alone = _weighted_by_softmax(flow, i) if core_rules.SOFTMAX_WEIGHTED in flow.rules else None
    second = _second_product(flow, i, taken, weighted=not alone) if (
        core_rules.CORE_PRODUCT in flow.rules) else None
    if second:
        spread = not flow.free_product(second[-1])
        return second, (core_rules.SINGLE_KEY if spread else core_rules.CORE_PRODUCT).name
    return alone, core_rules.SOFTMAX_WEIGHTED.name


def _weighted_by_softmax(flow: Flow, i: int) -> list[int] | None:
    """The free product ``i`` alone when it multiplies weights normalised by a softmax: one of
    its operands is a softmax reached through at most :data:`DEPTH` records without MACs nor
    parameters (VOLO's outlook attention: a linear makes the weights, a softmax normalises
    them, one product with the unfolded values). A product of two projections (the first
    product of a dot-product attention) reaches none. A second product is still searched from
    one that does (CoaT's factorized attention: ``q (softmax(k)^T v)``), but through records
    without MACs only: a weighted map keeping its size (talking heads' between the scores and
    the values) could run on into the next block's product."""
    stack, seen = [(j, 0) for j in flow.steps[i].sources], set()
    while stack:
        j, depth = stack.pop()
        step = flow.steps[j]
        if j in seen or depth > DEPTH or step.macs or step.params:
            continue
        seen.add(j)
        if step.op in SOFTMAX:
            return [i]
        stack.extend((k, depth + 1) for k in step.sources)
    return None


def _aggregation(flow: Flow, i: int, taken: Set[int]) -> list[int] | None:
    """An attention without products: record ``i`` multiplies, element-wise, two different
    activations, one of them normalised (a softmax or a division) weights; a sum reduces the
    product (over the tokens), and the reduced context multiplies a third activation,
    broadcast back over what was reduced. The records from ``i`` to that last multiply, or
    None. SwiftFormer's additive attention (``q w_g`` normalised over the tokens, a sum of q
    weighted by it, a product with k) and MobileViTv2's separable self-attention (a softmax of
    a one-channel query over the patches, a sum of k weighted by it, a product with relu(v)).
    A variance (``d * d``) multiplies one activation by itself; a squeeze-excitation reduces
    before it multiplies."""
    step = flow.steps[i]
    sources = set(step.sources)
    if (step.op != "aten.mul" or step.macs or step.params or step.carried or len(sources) != 2
            or any(flow.weights[j] for j in sources)
            or not any(flow.steps[j].op in (*SOFTMAX, "aten.div") for j in sources)):
        return None
    for s in flow.consumers[i]:
        reduced = flow.steps[s]
        if s in taken or reduced.op != "aten.sum" or prod(reduced.shape) >= prod(step.shape):
            continue
        for m in flow.descendants(s, min(s + DEPTH, len(flow.steps) - 1)):
            back = flow.steps[m]
            if back.op == "aten.mul" and not back.params and prod(back.shape) > prod(
                    reduced.shape) and m not in taken:
                return sorted(flow.ancestors(m, i) & flow.descendants(i, m))
    return None


def _sampled_points(flow: Flow, i: int, taken: Set[int]) -> list[int] | None:
    """Attention over sampled points (:data:`~vitprof.recognize.rules.cores.SAMPLED_POINTS`):
    record ``i`` resamples an activation at points computed from activations; through at most
    :data:`DEPTH` records without MACs nor parameters it reaches an element-wise multiply by
    weights a softmax normalised (:func:`_weighted_by_softmax`), reduced by a sum into fewer
    elements. The resamplings feeding that multiply (one per level of a multi-scale
    deformable attention), the records from them to the sum, and the sum; else None."""
    step = flow.steps[i]
    if core_rules.SAMPLED_POINTS not in flow.rules or len(set(step.sources)) != 2 or any(
            flow.weights[j] for j in step.sources):
        return None
    frontier, seen = [i], {i}
    for _ in range(DEPTH + 1):
        following = []
        for j in frontier:
            for m in flow.consumers[j]:
                record = flow.steps[m]
                if m in seen or m in taken or record.macs or record.params or m in flow.joins:
                    continue
                seen.add(m)
                following.append(m)
                if record.op != "aten.mul" or not _weighted_by_softmax(flow, m):
                    continue
                for s in flow.consumers[m]:
                    if flow.steps[s].op == "aten.sum" and prod(flow.steps[s].shape) < prod(
                            record.shape) and s not in taken:
                        return _sampled_to(flow, m, s)
        frontier = following
    return None


def _sampled_to(flow: Flow, mul: int, end: int) -> list[int]:
    """The resamplings reaching the multiply ``mul`` through records without MACs nor
    parameters, the records from them to ``end``, and ``end``."""
    samplers, stack, seen = set(), [mul], set()
    while stack:
        j = stack.pop()
        step = flow.steps[j]
        if j in seen or step.macs or step.params:
            continue
        seen.add(j)
        if step.op in SAMPLERS:
            samplers.add(j)
        else:
            stack.extend(step.sources)
    return sorted(set().union(*(flow.ancestors(end, k) & flow.descendants(k, end)
                                for k in samplers)))


def _walk(flow: Flow, starts: list[int], core: frozenset[int] | set[int],
          upstream: bool, inner: Set[int] = frozenset()) -> tuple[set[int], set[int]]:
    """The first weighted records reached from ``starts`` through :meth:`Flow.passes` records,
    upstream (through sources) or downstream (through consumers), and the records passed that
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
            stack.extend(flow.steps[i].sources if upstream else flow.consumers[i])
    return found, passed


def _beside_core(flow: Flow, i: int, last: int, inner: Set[int]) -> set[int] | None:
    """If step ``i`` is a join forking from ``inner`` (the q/k/v side of the core whose last
    record is ``last``), the records of its arms that do not depend on the core: a map of v
    added to the attention's output before its projection (EfficientFormerV2's and CSWin's
    depthwise conv of v); None otherwise."""
    split = flow.forks.get(i)
    if split is None or split[0] not in inner:
        return None
    return {j for arm, source in zip(split[1], flow.steps[i].sources, strict=True)
            if last not in flow.ancestors(source, last) for j in arm}


def _inputs(
    flow: Flow, steps: frozenset[int], products: bool = True
) -> tuple[list[int], list[int]]:
    """Producers of the core's operands (q, k, v: what the products and a fused op multiply)
    and of what it reads beside them (a mask or a position bias added to the scores); the
    core's last record is its second product, whose inputs are operands even without MACs
    (over one key: :func:`_spreads`). A core without ``products`` (an element-wise one:
    :func:`_aggregation`) has operands only."""
    operands: list[int] = []
    beside: list[int] = []
    last = max(steps)  # the second product (one over a single key has no MACs)
    for i in steps:
        step = flow.steps[i]
        outside = [j for j in step.sources if j not in steps]
        (operands if step.macs or i == last or not products else beside).extend(outside)
        beside.extend(step.beside)
    return operands, beside


def _bias(flow: Flow, starts: list[int], known: frozenset[int], module: str) -> frozenset[int]:
    """The records upstream of ``starts`` run inside ``module`` (the core's); in the root module
    (a flat forward) only up to a join, the residual stream."""
    found: set[int] = set()
    stack = list(starts)
    while stack:
        i = stack.pop()
        if i in found or i in known or (not module and i in flow.joins):
            continue
        if not flow.steps[i].module.startswith(module):
            continue
        found.add(i)
        stack.extend(flow.steps[i].sources)
    return frozenset(found)


def _feeding_only(flow: Flow, qkv: set[int]) -> set[int]:
    """Weighted records upstream of the projections ``qkv`` whose output reaches nothing else
    (:data:`~vitprof.recognize.rules.cores.FEEDS_QKV`), chains of them included."""
    found: set[int] = set()
    frontier = set(qkv)
    while frontier:
        candidates, _ = _walk(flow, [j for i in frontier for j in flow.steps[i].sources], set(),
                              upstream=True)
        frontier = {i for i in candidates - found - qkv if _only_into(flow, i, qkv | found)}
        found |= frontier
    return found


def _only_into(flow: Flow, i: int, ends: Set[int]) -> bool:
    """Every path from record ``i``, through records without weights that are no join, ends
    in ``ends``."""
    stack, seen = list(flow.consumers[i]), set()
    if not stack:
        return False
    while stack:
        j = stack.pop()
        if j in seen or j in ends:
            continue
        seen.add(j)
        if flow.weighted(j) or j in flow.joins or not flow.consumers[j]:
            return False
        stack.extend(flow.consumers[j])
    return True


def _gates(flow: Flow, passed: set[int], core: frozenset[int]) -> set[int]:
    """The weighted records, feeding no record of ``core``, upstream of the other inputs of
    the records ``passed`` from the core to its output projections
    (:data:`~vitprof.recognize.rules.cores.GATE`)."""
    last = max(core)
    feeding = flow.ancestors(last, max(0, min(core) - WINDOW))
    others = [j for i in passed for j in flow.steps[i].sources
              if j not in passed and j not in core and j not in feeding
              and last not in flow.ancestors(j, last)]
    found, _ = _walk(flow, others, set(), upstream=True)
    return found - feeding


def _query_terms(flow: Flow, beside: list[int], qkv: set[int], steps: frozenset[int]
                  ) -> set[int]:
    """The records on a path from the projections ``qkv`` to the producers ``beside`` the
    core's operands (:data:`~vitprof.recognize.rules.cores.QUERY_TERM`): a term of the scores
    computed from q (q . R_h and q . R_w, decomposed relative positions), each feeding
    nothing but that term and the core's ``steps``; norms aside."""
    found: set[int] = set()
    for end in beside:
        upstream = flow.ancestors(end, min(qkv)) if qkv else set()
        for start in qkv & upstream:
            found |= flow.descendants(start, end) & upstream
    found = {i for i in found - qkv if not flow.norm(i)}  # a QK-norm stays norm
    while leaking := {i for i in found
                      if any(j not in found and j not in steps for j in flow.consumers[i])}:
        found -= leaking
    return found


def find_cores(flow: Flow) -> list[Core]:
    """Every attention core of the trace, in execution order. Weighted records that make a bias
    of the scores (Swin v2's position MLP, SAM's decomposed relative positions) in the core's
    module belong to the core."""
    cores = []
    for steps, found_by in _core_steps(flow):
        if any(flow.steps[i].fixed is not None for i in steps):
            cores.append(Core(steps, frozenset(), frozenset(), found_by=found_by))
            continue
        products = any(flow.steps[i].macs for i in steps)
        operands, beside = _inputs(flow, steps, products)
        outputs = [j for i in steps for j in flow.consumers[i] if j not in steps]
        qkv, before = _walk(flow, operands, steps, upstream=True)
        inner = set().union(*(flow.ancestors(i, min(qkv)) for i in operands)) if qkv else set()
        proj, after = _walk(flow, outputs, steps, upstream=False, inner=inner)
        bias = _bias(flow, beside, steps | qkv, flow.steps[min(steps)].module) if (
            core_rules.SCORE_BIAS in flow.rules) else frozenset()
        passed = frozenset(before | after) if core_rules.PASSED in flow.rules else frozenset()
        feeding = _feeding_only(flow, qkv) if core_rules.FEEDS_QKV in flow.rules and qkv else set()
        gates = _gates(flow, after, steps) if core_rules.GATE in flow.rules else set()
        terms = _query_terms(flow, beside, qkv, steps) if (
            core_rules.QUERY_TERM in flow.rules) else set()
        cores.append(Core(steps, frozenset(qkv), frozenset(proj), bias | passed, found_by,
                          passed - bias, frozenset(feeding), frozenset(gates),
                          frozenset(terms - bias - passed)))
    return _inputs_first(cores) if core_rules.NEXT_QKV in flow.rules else cores


def _inputs_first(cores: list[Core]) -> list[Core]:
    """``cores`` with no output projection that is another core's q/k/v projection
    (:data:`~vitprof.recognize.rules.cores.NEXT_QKV`): a core whose output goes straight into the
    next attention's q/k/v linear (a patch merger's) has no output projection."""
    inputs = frozenset().union(*(core.qkv for core in cores))
    return [replace(core, proj=core.proj - (inputs - core.qkv)) for core in cores]
