"""Core rules: what an attention core is, and which records around it are its q/k/v and
output projections. Each rule is one object holding its code. The rules that find cores
(:class:`CoreFinder`) are asked, in the registry's order, at every record not yet in a core;
the first that finds one decides (:func:`find_cores`). The others hold the code that the
finders or :func:`find_cores` call when they are on (the parts of a core: its score bias,
the records feeding its projections, its gates...), and :func:`place_cores` places a core's
records in their order. The data flow (:mod:`vitprof.recognize.graph.flow`) and the walks from
a core to its projections (:mod:`vitprof.recognize.graph.attention`) are the machinery they
read. The rules the data flow asks itself are in :mod:`.flow_checks`.
"""

from __future__ import annotations

from collections.abc import Iterable, Set
from dataclasses import dataclass, replace
from math import prod

from vitprof.core.records import Component as C
from vitprof.recognize.graph.attention import DEPTH, Core, inputs, walk
from vitprof.recognize.graph.blocks import Blocks, path_parts, shared_parts, within
from vitprof.recognize.graph.flow import WINDOW, Flow
from vitprof.recognize.graph.fused import Fused
from vitprof.recognize.graph.ops import SOFTMAX
from vitprof.recognize.rules.base import Placement, Rule, RuleSet
from vitprof.recognize.rules.flow_checks import ADDED_TERM, JOINED_OPERAND, OUTPUT_BY_VALUE

Found = tuple[list[int], Rule]  # the records of a core, and the rule that found it


@dataclass(frozen=True)
class CoreFinder(Rule):
    """A rule that finds attention cores: asked at every record not yet in a core, in the
    registry's order (then the rules a :class:`~.base.RuleSet` adds), the first that finds one
    deciding."""

    def find(self, flow: Flow, i: int, taken: Set[int]) -> Found | None:
        """The core that record ``i`` starts (records not in ``taken``, those of the cores
        found before) and the rule that found it, or None."""
        raise NotImplementedError


PRICED_IN_PARTS = Rule(
    "priced-in-parts", (C.ATTN_QKV, C.ATTN_CORE, C.ATTN_PROJ),
    """A fused op priced in parts (``_native_multi_head_attention``) names each part's
    component itself: its in-projection ``attn_qkv``, its products ``attn_core``, its
    out-projection ``attn_proj``.""",
    "the op's own formula", "mha_block")


@dataclass(frozen=True)
class _FusedCore(CoreFinder):
    def find(self, flow: Flow, i: int, taken: Set[int]) -> Found | None:
        return ([i], self) if flow.fused_core(i) else None


FUSED_CORE = _FusedCore(
    "fused-attention-op", (C.ATTN_CORE,),
    """A fused attention op (scaled-dot-product or flex attention) is an attention core on its
    own.""",
    "the op of a record", "sdpa_block")


@dataclass(frozen=True)
class _CoreProduct(CoreFinder):
    def find(self, flow: Flow, i: int, taken: Set[int]) -> Found | None:
        """The records from the free product ``i`` to a second product, found by this rule or,
        the second a spreading multiply, by :data:`SINGLE_KEY`; a product that weights a
        softmax (:data:`SOFTMAX_WEIGHTED`) searches through records without MACs only."""
        if not flow.free_product(i):
            return None
        alone = SOFTMAX_WEIGHTED.weights(flow, i) if SOFTMAX_WEIGHTED in flow.rules else None
        second = self.second_product(flow, i, taken, weighted=not alone)
        if not second:
            return None
        spread = not flow.free_product(second[-1])
        return second, SINGLE_KEY if spread else self

    def second_product(
        self, flow: Flow, start: int, taken: Set[int], weighted: bool = True
    ) -> list[int] | None:
        """The records from the free product ``start`` to a second free product it feeds, through
        at most :data:`DEPTH` records that map the scores (:meth:`Flow.on_map`; without MACs
        unless ``weighted``); None if none. A fused attention op is a core of its own, never the
        second product of another: rotary frequencies (a product of the positions and the
        inverse frequencies) reach the fused op through cos and the rotation of q, and would
        make the q projection a bias of that core."""
        seen: set[int] = set()
        frontier = [start]
        for _ in range(DEPTH + 1):
            following = []
            for i in frontier:
                for j in flow.consumers[i]:
                    if j in seen or j in taken or flow.fused_core(j) or (
                            SCORES_BY_VALUE in flow.rules and SCORES_BY_VALUE.as_index(flow, i, j)):
                        continue
                    seen.add(j)
                    if STREAM_BOUND in flow.rules and STREAM_BOUND.crossed(flow, j):
                        continue
                    if flow.free_product(j) or (
                            SINGLE_KEY in flow.rules and SINGLE_KEY.spreads(flow, j, start)):
                        return self.between(flow, start, j, taken)
                    if flow.on_map(j, start) and (weighted or not flow.steps[j].macs):
                        following.append(j)
            frontier = following
        return None

    def between(self, flow: Flow, start: int, end: int, taken: Set[int]) -> list[int]:
        """Every record on a path of score maps from ``start`` to ``end``, not only the shortest
        (relative-position adds that rewrite the scores in place: the softmax reads both the
        scores and the adds), but those of other cores (``taken``)."""
        reached = {start}
        for i in sorted(flow.ancestors(end, start)):
            if i not in taken and (i == end or flow.on_map(i, start)) and any(
                    j in reached for j in flow.steps[i].sources):
                reached.add(i)
        return sorted(reached)


CORE_PRODUCT = _CoreProduct(
    "core-product", (C.ATTN_CORE,),
    """A product of two activations (no parameter read) that feeds, through records mapping
    its scores (scaling, mask, softmax, talking-heads), a second product of two activations is
    an attention core: every record on that path is ``attn_core`` (softmax(QK^T)V and
    Q(K^TV) alike).""",
    "MACs without a parameter read, the consumers between two such products", "plain_block")


@dataclass(frozen=True)
class _StreamBound(Rule):
    def crossed(self, flow: Flow, i: int) -> bool:
        """Record ``i`` is a residual add of the stream, ``x + f(x)``, that no scores map crosses
        (read by :data:`CORE_PRODUCT`'s search): a join with a free skip whose products compute
        from its fork. A mask added to the scores twice (``s + m``, then ``+ m`` again: a
        shifted window's) forks from the mask, but the scores' products never read it."""
        if i not in flow.joins or not flow.free_skip(i):
            return False
        fork, arms = flow.forks[i]
        computed = flow.computed_from(fork, i)
        return any(flow.steps[j].macs for arm in arms for j in arm & computed)


STREAM_BOUND = _StreamBound(
    "core-within-residual", (C.ATTN_CORE,),
    """The path from a core's first product to its second never crosses a residual add of the
    stream (a join one of whose arms is its fork itself, the other's products computed from
    it, ``x + f(x)``): kernelised attention's last product (phi(Q) (phi(K)^T V), a
    random-feature buffer making its features) maps no scores into the next block's q/k/v
    linears through the output projection and the residual; a bias made from q added to the
    scores (both arms computed) is crossed, and so is a mask added to the scores twice (it
    forks from the mask, which the scores' products never read).""",
    "the joins between two free products, whether one arm is the fork itself and the other's "
    "products depend on it",
    "random_feature_block")


@dataclass(frozen=True)
class _ScoresByValue(Rule):
    def as_index(self, flow: Flow, i: int, j: int) -> bool:
        """Record ``j`` reads record ``i`` only as indices (an argmax's or a top-k's, choosing
        the tokens to gather or scatter), none of its values: no map of the scores (read by
        :data:`CORE_PRODUCT`'s search)."""
        return i in flow.steps[j].indexed


SCORES_BY_VALUE = _ScoresByValue(
    "scores-by-value", (C.ATTN_CORE,),
    """The path from a core's first product to its second runs through the values of the
    scores, never through indices: a record reading another only as indices (an argmax or a
    top-k choosing tokens to gather or scatter) maps no scores. A token merge scoring pairs of
    tokens by a product of their keys, then adding each token into its best match, starts no
    core running on, through the merged tokens' sizes, into the next block's scores.""",
    "the sources each record reads only as indices (integer tensors)", "index_merge_block")


@dataclass(frozen=True)
class _SingleKey(Rule):
    def spreads(self, flow: Flow, i: int, scores: int) -> bool:
        """Record ``i`` multiplies, element-wise, two activations into more elements than the
        ``scores`` it maps (read by :data:`CORE_PRODUCT`'s search): the scores spread over the
        values' features, as a product over one key runs (``einsum`` with a contraction of one
        is a broadcast ``mul``)."""
        step = flow.steps[i]
        return (step.op == "aten.mul" and not step.params and not step.carried
                and len(set(step.sources)) == 2 and not any(flow.weights[j] for j in step.sources)
                and prod(step.shape) > prod(flow.steps[scores].shape))


SINGLE_KEY = _SingleKey(
    "single-key-product", (C.ATTN_CORE,),
    """A product of two activations whose scores, through records mapping them, reach an
    element-wise multiply of two activations with more elements than the scores (the scores
    spread over the values' features: a product over one key, as ``einsum`` runs a
    contraction of one) is an attention core, that multiply its second product: q k^T over a
    single key is ``attn_core`` (a regional attention over one region token).""",
    "element-wise multiplies reached from a free product's scores, their output size",
    "single_key_block")


def _softmax_operand(flow: Flow, i: int) -> int | None:
    """The softmax that one of record ``i``'s operands is, reached through at most
    :data:`DEPTH` records without MACs nor parameters; None if none."""
    stack, seen = [(j, 0) for j in flow.steps[i].sources], set()
    while stack:
        j, depth = stack.pop()
        step = flow.steps[j]
        if j in seen or depth > DEPTH or step.macs or step.params:
            continue
        seen.add(j)
        if step.op in SOFTMAX:
            return j
        stack.extend((k, depth + 1) for k in step.sources)
    return None


@dataclass(frozen=True)
class _ReusedMap(Rule):
    def reuses(self, flow: Flow, i: int, taken: Set[int]) -> bool:
        """The free product ``i`` weights by the softmax of a core found before (in ``taken``)
        and no projection feeds it: the walk from its operands up to the first weighted
        records finds none (read by :data:`SOFTMAX_WEIGHTED`)."""
        softmax = _softmax_operand(flow, i)
        if softmax is None or softmax not in taken:
            return False
        projections, _ = walk(flow, list(flow.steps[i].sources), {i}, upstream=True)
        return not projections


REUSED_MAP = _ReusedMap(
    "reused-map-product", (C.ATTN_CORE,),
    """A product weighted by a softmax is no core of its own when that softmax is a record of
    a core found before and no projection feeds the product (the walk from its operands up to
    the first weighted records finds none): it reads a map the core already made, with no new
    scores of its own, and multiplies the stream's tokens (a block fusing the tokens it drops
    into one, their sum weighted by the first token's row of the attention map). Its records
    are placed as those of no core (``free-product-in-block``); as a core, the walk from its
    output would take the next weighted record (the MLP's first linear) for an output
    projection. A product of a reused map with values a projection makes is still a core.""",
    "the softmax a free product's operand is, the cores found before, the weighted records "
    "upstream of its operands",
    "fused_token_block")


@dataclass(frozen=True)
class _SoftmaxWeighted(CoreFinder):
    def find(self, flow: Flow, i: int, taken: Set[int]) -> Found | None:
        alone = self.weights(flow, i) if flow.free_product(i) else None
        if alone and REUSED_MAP in flow.rules and REUSED_MAP.reuses(flow, i, taken):
            return None
        return (alone, self) if alone else None

    def weights(self, flow: Flow, i: int) -> list[int] | None:
        """The free product ``i`` alone when it multiplies weights normalised by a softmax: one of
        its operands is a softmax reached through at most :data:`DEPTH` records without MACs nor
        parameters (:func:`_softmax_operand`; outlook attention: a linear makes the weights, a
        softmax normalises them, one product with the unfolded values). A product of two
        projections (the first product of a dot-product attention) reaches none. A second
        product is still searched from one that does (factorized attention:
        ``q (softmax(k)^T v)``), but through records without MACs only: a weighted map keeping
        its size (talking heads' between the scores and the values) could run on into the next
        block's product."""
        return [i] if _softmax_operand(flow, i) is not None else None


SOFTMAX_WEIGHTED = _SoftmaxWeighted(
    "softmax-weighted-product", (C.ATTN_CORE,),
    """A product of two activations that feeds no second product is an attention core on its
    own when one of its operands is a softmax, reached through at most 8 records without MACs
    nor parameters (outlook attention: weights made by a linear, normalised, one product with
    the values). A product of two projections (q k^T) reaches no softmax.""",
    "the sources of a free product back to a softmax, through records without MACs",
    "softmax_mix_block")


@dataclass(frozen=True)
class _Aggregation(CoreFinder):
    def find(self, flow: Flow, i: int, taken: Set[int]) -> Found | None:
        found = self.records(flow, i, taken)
        return (found, self) if found else None

    def records(self, flow: Flow, i: int, taken: Set[int]) -> list[int] | None:
        """An attention without products: record ``i`` multiplies, element-wise, two different
        activations, one of them normalised (a softmax or a division) weights; a sum reduces the
        product (over the tokens), and the reduced context multiplies a third activation,
        broadcast back over what was reduced. The records from ``i`` to that last multiply, or
        None. Additive attention (``q w_g`` normalised over the tokens, a sum of q weighted by
        it, a product with k) and separable self-attention (a softmax of a one-channel query over
        the patches, a sum of k weighted by it, a product with relu(v)).
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


AGGREGATION = _Aggregation(
    "aggregation-core", (C.ATTN_CORE,),
    """Attention without a product of two activations: an element-wise multiply of two
    activations, one of them normalised weights (a softmax or a division), reduced by a sum
    over the tokens, the reduced context multiplying a third activation broadcast back over
    what was reduced (additive and separable attention). The records from the multiply to
    that last multiply are the core.""",
    "element-wise multiplies without parameters, a softmax or division among their sources, "
    "a smaller sum consuming them, a larger multiply after it", "additive_block")


SAMPLERS = ("aten.grid_sampler_2d", "aten.grid_sampler_3d")  # resamplings at computed points


@dataclass(frozen=True)
class _SampledPoints(CoreFinder):
    def find(self, flow: Flow, i: int, taken: Set[int]) -> Found | None:
        found = self.records(flow, i, taken) if flow.steps[i].op in SAMPLERS else None
        return (found, self) if found else None

    def records(self, flow: Flow, i: int, taken: Set[int]) -> list[int] | None:
        """Attention over sampled points: record ``i`` resamples an activation at points
        computed from activations; through at most :data:`DEPTH` records without MACs nor
        parameters it reaches an element-wise multiply by weights a softmax normalised
        (:meth:`_SoftmaxWeighted.weights`), reduced by a sum into fewer elements. The
        resamplings feeding that multiply (one per level of a multi-scale deformable
        attention), the records from them to the sum, and the sum; else None."""
        step = flow.steps[i]
        if len(set(step.sources)) != 2 or any(flow.weights[j] for j in step.sources):
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
                    if record.op != "aten.mul" or not SOFTMAX_WEIGHTED.weights(flow, m):
                        continue
                    for s in flow.consumers[m]:
                        if flow.steps[s].op == "aten.sum" and prod(flow.steps[s].shape) < prod(
                                record.shape) and s not in taken:
                            return self.sampled_to(flow, m, s)
            frontier = following
        return None

    @staticmethod
    def sampled_to(flow: Flow, mul: int, end: int) -> list[int]:
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


SAMPLED_POINTS = _SampledPoints(
    "sampled-points-core", (C.ATTN_CORE,),
    """Attention over sampled points, without a product of two activations: a resampling
    (``grid_sample``) of an activation at points computed from activations, multiplied,
    through records without MACs, element-wise by weights a softmax normalised, the product
    reduced by a sum (deformable attention: each query's offsets move its reference points,
    the values sampled there are weighted and summed). The resamplings feeding that multiply,
    the multiply and the sum are the core; the value, offset and weight linears upstream are
    its q/k/v projections, the linear after the sum its output projection.""",
    "resamplings of activations, the multiplies they reach, a softmax among their sources, "
    "a smaller sum consuming them", "deformable_block")


@dataclass(frozen=True)
class _ProductOfCores(Rule):
    def joined(self, flow: Flow, cores: list[tuple[frozenset[int], Rule]]
               ) -> list[tuple[frozenset[int], Rule]]:
        """``cores`` (records, rule), each free product of the outputs of two or more of them
        (every operand the last record of a core) joined with them into one core found by this
        rule: a landmark attention's (s1 s2) (s3 v)."""
        found = dict(enumerate(cores))
        last = {max(steps): k for k, (steps, _) in found.items()}
        taken = set().union(*(steps for steps, _ in cores))
        for i in range(len(flow.steps)):
            sources = set(flow.steps[i].sources)
            if (i in taken or len(sources) < 2 or not sources <= last.keys()
                    or not flow.free_product(i)):
                continue
            joined = {last.pop(j) for j in sources}
            steps = frozenset({i}).union(*(found.pop(k)[0] for k in joined))
            found[min(joined)] = (steps, self)
            last[i] = min(joined)
        return sorted(found.values(), key=lambda core: min(core[0]))


PRODUCT_OF_CORES = _ProductOfCores(
    "product-of-cores", (C.ATTN_CORE,),
    """A product of two activations that multiplies the outputs of two cores joins them into
    one core, of which it is the last product (a landmark attention, which approximates the
    scores through landmarks: (softmax(Q K_l^T) softmax(Q_l K_l^T)) (softmax(Q_l K^T) V)): the
    walk to the output projection starts after it, and a map of the values added to its output
    (a depthwise conv of v) is beside the core, as beside any other.""",
    "free products whose every operand is the last record of a core", "landmark_block")


POOLING_HEAD = Rule(
    "pooling-head-attention", (C.HEAD,),
    """A core outside the list of blocks, after the last of them (an attention-pooling head),
    is in no block: its projections are ``head``. Every attention pool is one: a learned query
    over the tokens as a linear scoring each token, a softmax over the tokens and their sum so
    weighted (the ``softmax-weighted-product`` core); its products stay ``attn_core``, in no
    block, the records that make and mix its weights ``head``.""",
    "the module tree: the core's module is in no list of blocks, and runs after them",
    "pooling_head")


@dataclass(frozen=True)
class _ScoreBias(Rule):
    def records(
        self, flow: Flow, starts: list[int], known: frozenset[int], module: str
    ) -> frozenset[int]:
        """The records upstream of ``starts`` run inside ``module`` (the core's); in the root
        module (a flat forward) only up to a join, the residual stream."""
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


SCORE_BIAS = _ScoreBias(
    "score-bias", (C.ATTN_CORE,),
    """The records in the core's module that make what is added beside its operands (a bias or
    a mask of the scores), weighted or not, are the core's.""",
    "the records upstream of a core's non-operand inputs, inside its module", "bias_block")

PASSED = Rule(
    "between-projection-and-core", (C.ATTN_CORE,),
    """The records without MACs passed on the way from the q/k/v projections to the core's
    products, or from them to the output projection (q scaling, rotary, head merging; norms
    aside), are the core's.""",
    "the records walked through by qkv-feeds-core and proj-after-core", "plain_block")


@dataclass(frozen=True)
class _QueryTerm(Rule):
    def records(self, flow: Flow, beside: list[int], qkv: set[int], steps: frozenset[int]
                ) -> set[int]:
        """The records on a path from the projections ``qkv`` to the producers ``beside`` the
        core's operands: a term of the scores computed from q (q . R_h and q . R_w, decomposed
        relative positions), each feeding nothing but that term and the core's ``steps``; norms
        aside."""
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


QUERY_TERM = _QueryTerm(
    "score-term-from-query", (C.ATTN_CORE,),
    """The records on a path from a core's q/k/v projections to what it reads beside its
    operands (a term added to the scores computed from q: decomposed relative positions, q
    times a table of offsets along each axis) are the core's,
    whatever module runs them: the core may run in a module of its own, the term beside it.""",
    "the records between the core's q/k/v projections and its non-operand inputs",
    "query_term_block")

QKV = Rule(
    "qkv-feeds-core", (C.ATTN_QKV,),
    """The first weighted records upstream of a core's operands, walking through records
    without MACs that read no parameter but a norm's or a linear's own bias, never through a
    join, are its q/k/v projections.""",
    "the sources of the core's products, back to the first weighted records", "plain_block")


@dataclass(frozen=True)
class _FeedsQkv(Rule):
    def records(self, flow: Flow, qkv: set[int]) -> set[int]:
        """Weighted records upstream of the projections ``qkv`` whose output reaches nothing else,
        chains of them included."""
        found: set[int] = set()
        frontier = set(qkv)
        while frontier:
            candidates, _ = walk(flow, [j for i in frontier for j in flow.steps[i].sources],
                                 set(), upstream=True)
            frontier = {i for i in candidates - found - qkv
                        if self.only_into(flow, i, qkv | found)}
            found |= frontier
        return found

    def only_into(self, flow: Flow, i: int, ends: Set[int]) -> bool:
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


FEEDS_QKV = _FeedsQkv(
    "feeds-only-qkv", (C.ATTN_QKV,),
    """A weighted record whose output reaches nothing but a core's q/k/v projections (through
    records without MACs, no join: a convolution of the token map before the q, k and v
    linears, a spatial reduction before k and v) is one of those projections' input, a
    q/k/v projection too.""",
    "the consumers of the records upstream of the q/k/v projections", "conv_qkv_block")


@dataclass(frozen=True)
class _Gate(Rule):
    def records(self, flow: Flow, passed: set[int], core: frozenset[int]) -> set[int]:
        """The weighted records, feeding no record of ``core``, upstream of the other inputs of
        the records ``passed`` from the core to its output projections."""
        last = max(core)
        feeding = flow.ancestors(last, max(0, min(core) - WINDOW))
        others = [j for i in passed for j in flow.steps[i].sources
                  if j not in passed and j not in core and j not in feeding
                  and last not in flow.ancestors(j, last)]
        found, _ = walk(flow, others, set(), upstream=True)
        return found - feeding


GATE = _Gate(
    "gate-beside-core", (C.ATTN_QKV,),
    """A weighted record that does not feed the core but whose output meets the core's on
    the way to its output projection (through records without MACs: a sigmoid gate times the
    attention's output, additive attention's keys times the pooled query) is an input
    projection of the attention beside q/k/v.""",
    "the other sources of the records passed by proj-after-core, back to weighted records",
    "gated_block")

PROJ = Rule(
    "proj-after-core", (C.ATTN_PROJ,),
    """The first weighted records downstream of a core's output, before a residual join, are
    its output projections.""",
    "the consumers of the core's output, up to the first weighted records", "plain_block")


@dataclass(frozen=True)
class _NextQkv(Rule):
    def inputs_first(self, cores: list[Core]) -> list[Core]:
        """``cores`` with no output projection that is another core's q/k/v projection: a core
        whose output goes straight into the next attention's q/k/v linear (a patch merger's)
        has no output projection."""
        inputs = frozenset().union(*(core.qkv for core in cores))
        return [replace(core, proj=core.proj - (inputs - core.qkv)) for core in cores]


NEXT_QKV = _NextQkv(
    "next-core-qkv", (C.ATTN_QKV,),
    """A weighted record that is a core's q/k/v projection (``qkv-feeds-core``) is no output
    projection of an earlier core whose output reaches it first: a core without an output
    projection, its output read (through a norm) by the next attention's q/k/v linear (a
    patch merger: learned queries over the tokens, the merged tokens straight into the next
    block), keeps none.""",
    "the q/k/v projections of every core, the output projections of the others",
    "merger_net")


@dataclass(frozen=True)
class _AttentionModule(Rule):
    def place(
        self, flow: Flow, cores: list[Core], blocks: Blocks, placed: list[Placement | None]
    ) -> None:
        """Weighted records not yet placed that run inside a core's attention module, the
        innermost module holding the core and its projections (:meth:`module`), when it lies
        below the core's block, are its projections too: ``attn_qkv`` where the core depends
        on them, ``attn_proj`` where they depend on it (the records the data-flow walks stop
        short of). An MLP beside the attention lies outside that module."""
        block_paths = blocks.modules()
        in_block: dict[int, list[int]] = {}
        for i, index in enumerate(blocks.of_step):
            if index is not None:
                in_block.setdefault(index, []).append(i)
        for core in cores:
            index = blocks.of_step[core.first]
            block = block_paths.get(index) if index is not None else None
            attention = self.module(flow, core)
            if index is None or block is None or not attention.startswith(f"{block}."):
                continue
            feeding = flow.ancestors(max(core.steps), in_block[index][0])
            fed = flow.descendants(core.first, in_block[index][-1])
            for i in in_block[index]:
                if placed[i] is None and flow.weighted(i) and within(flow.steps[i].module,
                                                                     attention):
                    component = C.ATTN_QKV if i in feeding else C.ATTN_PROJ if i in fed else None
                    if component is not None:
                        placed[i] = Placement(component, self.name)

    def module(self, flow: Flow, core: Core) -> str:
        """The innermost module holding the records of ``core`` and its projections."""
        paths = [path_parts(flow.steps[i].module) for i in core.steps | core.qkv | core.proj]
        shared = min(shared_parts(paths[0], path) for path in paths)
        return ".".join(paths[0][:shared])


ATTENTION_MODULE = _AttentionModule(
    "inside-attention-module", (C.ATTN_QKV, C.ATTN_PROJ),
    """The attention module is the innermost module holding a core's records and its q/k/v
    and output projections. Weighted records left unplaced that run inside it, below the
    core's block, are projections too: ``attn_qkv`` when the core depends on them,
    ``attn_proj`` when they depend on the core (a spatial reduction before the k/v
    projection).""",
    "the module tree: the innermost module holding the core and its projections; whether "
    "the core depends on the record", "reduced_kv_block")


@dataclass(frozen=True)
class _FusedShare(Rule):
    def projections(self, flow: Flow, cores: list[Core]) -> dict[int, Fused]:
        """The fused projections among the cores' q/k/v projections, by record."""
        feeding: dict[int, list[Core]] = {}
        for core in cores:
            for i in core.qkv:
                feeding.setdefault(i, []).append(core)
        found = {}
        for i, fed in feeding.items():
            fused = self.split(flow, i, fed)
            if fused is not None:
                found[i] = fused
        return found

    def split(self, flow: Flow, i: int, cores: list[Core]) -> Fused | None:
        """Record ``i`` as a fused projection of ``cores``, or None if it is none."""
        shape = flow.steps[i].shape
        if not shape:
            return None
        reaching: list[tuple[int, int]] = []
        other: list[tuple[int, int]] = []
        for j in flow.consumers[i]:
            parts = [(first, stop) for source, first, stop in flow.steps[j].parts if source == i]
            if not parts:
                return None  # read whole
            (reaching if self.reaches(flow, j, cores) else other).extend(parts)
        qkv, rest = self.columns(reaching), self.columns(other)
        if not qkv or not rest or qkv & rest:
            return None
        return Fused(shape[-1], len(qkv))

    def reaches(self, flow: Flow, j: int, cores: list[Core]) -> bool:
        """Whether record ``j`` is in one of ``cores`` or feeds it."""
        return any(flow.descendants(j, max(core.steps)) & core.steps for core in cores)

    def columns(self, parts: Iterable[tuple[int, int]]) -> set[int]:
        return {column for first, stop in parts for column in range(first, stop)}


FUSED_SHARE = _FusedShare(
    "fused-projection-share", (C.ATTN_QKV,),
    """A q/k/v projection whose output is split into parts some of which never reach the core
    (q, k, v and the MLP's first layer in one linear) is shared out by output columns: the
    columns reaching the core are ``attn_qkv``, the rest is placed as a record that is no
    projection.""",
    "the column slices of the projection's output and which of them reach the core",
    "fused_block")

# the order they decide in
CORE_RULES: tuple[Rule, ...] = (
    PRICED_IN_PARTS, FUSED_CORE, CORE_PRODUCT, STREAM_BOUND, SCORES_BY_VALUE, SINGLE_KEY,
    SOFTMAX_WEIGHTED, REUSED_MAP, AGGREGATION, SAMPLED_POINTS, PRODUCT_OF_CORES, JOINED_OPERAND,
    ADDED_TERM, POOLING_HEAD, SCORE_BIAS, PASSED, QUERY_TERM, QKV, FEEDS_QKV, GATE, PROJ,
    OUTPUT_BY_VALUE, NEXT_QKV, ATTENTION_MODULE, FUSED_SHARE,
)


def finders(rules: RuleSet) -> list[CoreFinder]:
    """The rules on that find cores, in the order they are asked: the registry's, then those
    ``rules`` adds."""
    every: Iterable[Rule] = (*CORE_RULES, *rules.added)
    return [rule for rule in every if isinstance(rule, CoreFinder) and rule in rules]


def _core_steps(flow: Flow) -> list[tuple[frozenset[int], Rule]]:
    """The records of each core, with the rule that found it: at every record not yet in a
    core, the first finder on that finds one decides."""
    taken: set[int] = set()
    cores = []
    asked = finders(flow.rules)
    for i in range(len(flow.steps)):
        if i in taken:
            continue
        found = next((core for rule in asked if (core := rule.find(flow, i, taken))), None)
        if found:
            taken.update(found[0])
            cores.append((frozenset(found[0]), found[1]))
    cores.sort(key=lambda found: min(found[0]))
    return PRODUCT_OF_CORES.joined(flow, cores) if PRODUCT_OF_CORES in flow.rules else cores


def find_cores(flow: Flow) -> list[Core]:
    """Every attention core of the trace, in execution order, with the records around it that
    the rules on give it (:class:`~vitprof.recognize.graph.attention.Core`)."""
    cores = []
    for steps, found_by in _core_steps(flow):
        if any(flow.steps[i].fixed is not None for i in steps):
            cores.append(Core(steps, frozenset(), frozenset(), found_by))
            continue
        products = any(flow.steps[i].macs for i in steps)
        operands, beside = inputs(flow, steps, products)
        outputs = [j for i in steps for j in flow.output_readers(i) if j not in steps]
        qkv, before = walk(flow, operands, steps, upstream=True)
        inner = set().union(*(flow.ancestors(i, min(qkv)) for i in operands)) if qkv else set()
        proj, after = walk(flow, outputs, steps, upstream=False, inner=inner)
        bias = SCORE_BIAS.records(flow, beside, steps | qkv, flow.steps[min(steps)].module) if (
            SCORE_BIAS in flow.rules) else frozenset()
        passed = frozenset(before | after) if PASSED in flow.rules else frozenset()
        feeding = FEEDS_QKV.records(flow, qkv) if FEEDS_QKV in flow.rules and qkv else set()
        gates = GATE.records(flow, after, steps) if GATE in flow.rules else set()
        terms = QUERY_TERM.records(flow, beside, qkv, steps) if (
            QUERY_TERM in flow.rules) else set()
        cores.append(Core(steps, frozenset(qkv), frozenset(proj), found_by, bias | passed,
                          passed - bias, frozenset(feeding), frozenset(gates),
                          frozenset(terms - bias - passed)))
    return NEXT_QKV.inputs_first(cores) if NEXT_QKV in flow.rules else cores


def place_cores(cores: list[Core], blocks: Blocks, flow: Flow) -> list[Placement | None]:
    """The records the core rules place, in the order of :data:`CORE_RULES`: a
    fused op priced in parts first, then per core its records, its score bias, the records
    passed on the way, the query terms, its q/k/v projections, the records feeding only them,
    the gates and the output projections (``head`` ones for an attention-pooling head's)."""
    fixed = PRICED_IN_PARTS in flow.rules
    placed: list[Placement | None] = [
        Placement(step.fixed, PRICED_IN_PARTS.name) if fixed and step.fixed
        else None for step in flow.steps]
    pooling = POOLING_HEAD in flow.rules
    for k, core in enumerate(cores):
        head = POOLING_HEAD if k in blocks.loose and pooling else None
        placing = ((core.steps, C.ATTN_CORE, core.found_by),
                   (core.bias - core.passed, C.ATTN_CORE, SCORE_BIAS),
                   (core.passed, C.ATTN_CORE, PASSED),
                   (core.terms, C.ATTN_CORE, QUERY_TERM),
                   (core.qkv, C.HEAD if head else C.ATTN_QKV, head or QKV),
                   (core.feeding, C.HEAD if head else C.ATTN_QKV, head or FEEDS_QKV),
                   (core.gates, C.HEAD if head else C.ATTN_QKV, head or GATE),
                   (core.proj, C.HEAD if head else C.ATTN_PROJ, head or PROJ))
        for steps, component, rule in placing:
            for i in steps:
                if placed[i] is None and rule in flow.rules:
                    placed[i] = Placement(component, rule.name)
    return placed
