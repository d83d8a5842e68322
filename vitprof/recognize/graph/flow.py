"""Questions about the data flow of a :class:`~vitprof.count.trace.Trace`.

Conventions: a step is *weighted* when it has MACs and reads a parameter (directly or through
free ops): a linear, a convolution, an einsum with a weight. A *free product* has MACs and reads
no parameter: a product of two activations. A *join* is a parameter-free ``add`` of two
activations that fork from one record, with MACs on every arm between the fork and the join
but the skip (the fork itself, or the fork scaled by a parameter or pooled): a residual add
``x + f(x)``, ``res_scale(x) + f(x)`` or ``pool(x) + f(x)``, a downsampling shortcut
``conv(x) + f(x)``, the sum of the branches of a parallel block; not an attention mask built
from the input beside the scores. The searches are bounded (:data:`WINDOW` records back), so
the cost stays linear in the number of records.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence, Set
from functools import cached_property
from math import prod

from vitprof.core.records import Component, OpKind
from vitprof.count.trace import Trace
from vitprof.recognize.graph.ops import ADDS, DIVIDES, MOMENTS, ROOTS
from vitprof.recognize.rules.base import ALL, RuleSet
from vitprof.recognize.rules.flow_checks import (
    ADDED_TERM,
    CONCATENATED_ARM,
    INPUT_SKIP,
    JOINED_OPERAND,
    OUTPUT_BY_VALUE,
    POOLED_SKIP,
    POST_NORM_STREAM,
    PROJECTION_BIAS,
)

WINDOW = 256  # how many records back a fork is searched for


def norm_modules(trace: Trace) -> frozenset[str]:
    """The modules that normalise by what their own records compute: no MACs, a mean (or
    variance) reduction and a square root of it (a LayerNorm or RMSNorm written as ``pow``,
    ``mean``, ``rsqrt`` and ``mul``), whatever they are called.
    A fused normalisation op (``native_layer_norm``, ``rms_norm``...) is a norm record wherever
    it runs (:meth:`Flow.norm`)."""
    ops: dict[str, set[str]] = {}
    macs: set[str] = set()
    for step in trace.steps:
        ops.setdefault(step.module, set()).add(step.op)
        if step.macs:
            macs.add(step.module)
    return frozenset(module for module, names in ops.items() if module and module not in macs
                     and names & set(MOMENTS) and names & set(ROOTS))


def vector_norm_modules(trace: Trace) -> frozenset[str]:
    """The modules that normalise by a vector norm (:data:`~vitprof.recognize.rules.records.
    VECTOR_NORM`): no MACs, the vector norm (``linalg_vector_norm``) of a tensor a record
    computed or of the model's input (the first block's norm of a model fed tokens), and a
    division (``F.normalize(x) * scale * g``, ``x / x.norm(...) * g``),
    whatever they are called. A parametrization
    normalising a weight reads a parameter, which no record computed: it is no norm."""
    normed: set[str] = set()
    divides: set[str] = set()
    macs: set[str] = set()
    for step in trace.steps:
        if step.kind is OpKind.VECTOR_NORM and (step.sources or (
                step.unsourced and not step.params and not step.carried)):
            normed.add(step.module)
        if step.op in DIVIDES:
            divides.add(step.module)
        if step.macs:
            macs.add(step.module)
    return frozenset(module for module in normed & divides if module and module not in macs)



def gain_modules(trace: Trace, norm_modules: Set[str]) -> frozenset[str]:
    """The modules that apply a gain to a norm they run (:data:`~vitprof.recognize.rules.records.
    NORM_GAIN`): every record under them is a norm (a fused normalisation op, or a record of
    one of ``norm_modules``) or one of their own, without MACs, that reads only records run
    under them, a norm's output among them, and a parameter (a ``nn.LayerNorm`` without
    affine, then ``* (gamma + offset)`` in the module holding it)."""
    under: dict[str, list[int]] = {}
    for i, step in enumerate(trace.steps):
        parts = step.module.split(".") if step.module else []
        for k in range(1, len(parts) + 1):
            under.setdefault(".".join(parts[:k]), []).append(i)
    steps = trace.steps
    normed = {i for i, step in enumerate(steps) if step.module in norm_modules
              or step.kind is OpKind.NORM}
    found = set()
    for module, records in under.items():
        own = [i for i in records if steps[i].module == module]
        if not own or not all(i in normed or steps[i].module == module for i in records):
            continue
        inside = set(records)
        if all(not steps[i].macs and inside.issuperset(steps[i].sources) for i in own) and any(
                steps[i].params for i in own) and any(
                normed.intersection(steps[i].sources) for i in own):
            found.add(module)
    return frozenset(found)


class Flow:
    """The steps of a trace with their consumers, and predicates on them. ``window``: how many
    records back a fork is searched for (:data:`WINDOW`). ``norm_modules``:
    the paths of the modules that normalise (:func:`norm_modules`, :func:`vector_norm_modules`),
    whose records are norms whatever their ops (an ``nn.RMSNorm`` runs as pow, mean, rsqrt and
    muls), each with the name of the rule that found it. ``kernels``: the
    parameters that are convolution weights with a spatial kernel of more than one tap (a 3x3,
    not a 1x1). ``param_sizes``: the elements of each parameter, by name."""

    window = WINDOW

    def __init__(self, trace: Trace, norm_modules: Mapping[str, str] | None = None,
                 kernels: Set[str] = frozenset(),
                 param_sizes: Mapping[str, int] | None = None, rules: RuleSet = ALL) -> None:
        self.steps = trace.steps
        self.rules = rules  # the recognition rules on
        self.norm_modules = norm_modules or {}
        self.kernels = kernels
        self.param_sizes = param_sizes or {}
        self.sources = [step.sources for step in self.steps]
        self.consumers: list[list[int]] = [[] for _ in self.steps]
        for i, step in enumerate(self.steps):
            for j in step.sources:
                self.consumers[j].append(i)

    @cached_property
    def weights(self) -> list[bool]:
        """Per step: it computes a weight, not an activation: it has no MACs, reads parameters
        or records, and every record it reads computes a weight too (a weight standardisation:
        mean, variance, subtract, divide; ``exp(sum(lambda_q1 * lambda_k1)) - exp(...) +
        init``, whose sums and exps read no parameter themselves)."""
        found: list[bool] = []
        for step in self.steps:
            found.append(bool(step.params or step.carried or step.sources) and not step.macs
                         and all(found[j] for j in step.sources))
        return found

    @cached_property
    def from_input(self) -> list[bool]:
        """Per step: it computes from the model's input data: it reads it
        (:attr:`~vitprof.count.trace.Step.fed`) or a record that does."""
        found: list[bool] = []
        for step in self.steps:
            found.append(step.fed or any(found[j] for j in step.sources))
        return found

    @cached_property
    def constants(self) -> list[bool]:
        """Per step: it computes from constants alone: no input data, no parameter, and every
        record it reads computes so (the positions made by ``arange`` times frequencies)."""
        found: list[bool] = []
        for step in self.steps:
            found.append(not step.fed and not step.params and not step.carried
                         and all(found[j] for j in step.sources))
        return found

    def _reads_weight(self, i: int) -> bool:
        step = self.steps[i]
        joined = self.joined_weights(i)
        return bool(step.params or self._carried_weights(i)) or any(
            self.weights[j] for j in step.sources if j not in joined)

    def joined_weights(self, i: int) -> set[int]:
        """The records computing a weight that step ``i`` reads only joined to activations in
        one operand (:data:`~vitprof.recognize.rules.flow_checks.JOINED_OPERAND`)."""
        return JOINED_OPERAND.joined_weights(self, i) if JOINED_OPERAND in self.rules else set()

    def _carried_weights(self, i: int) -> set[str]:
        """The parameters reaching step ``i`` through free ops that weight it: all of them but
        those the rules on say weight nothing (memory key/values joined to the keys:
        :data:`~vitprof.recognize.rules.flow_checks.JOINED_OPERAND`; a bias table added to the
        scores by ``baddbmm``: :data:`~vitprof.recognize.rules.flow_checks.ADDED_TERM`)."""
        step = self.steps[i]
        carried = set(step.carried)
        for rule in (ADDED_TERM, JOINED_OPERAND):
            if rule in self.rules:
                carried -= rule.unweighting(step)
        return carried

    def weighted(self, i: int) -> bool:
        return self.steps[i].macs > 0 and self._reads_weight(i)

    def mixes_tokens(self, i: int) -> bool:
        """A convolution with a spatial kernel: each output position reads its neighbours."""
        return self.steps[i].kind is OpKind.CONV and bool(self._weight_params(i) & self.kernels)

    def _weight_params(self, i: int) -> set[str]:
        """The parameters step ``i`` reads, directly or through the records computing its weight
        (a standardised convolution weight)."""
        names: set[str] = set()
        stack = [i]
        while stack:
            step = self.steps[stack.pop()]
            names.update(step.params, step.carried)
            stack.extend(j for j in step.sources if self.weights[j])
        return names

    def weight_params(self, i: int) -> set[str]:
        """The parameters step ``i`` reads as weights: read directly, carried through free ops
        but not joined to activations (memory key/values), or through the records computing
        its weight (a parametrized or standardised weight)."""
        return self._weight_params(i) - set(self.steps[i].carried_joined)

    def free_product(self, i: int) -> bool:
        step = self.steps[i]
        return step.macs > 0 and not self._reads_weight(i) and step.fixed is None

    def norm(self, i: int) -> bool:
        step = self.steps[i]
        return step.module in self.norm_modules or step.kind is OpKind.NORM

    def fused_core(self, i: int) -> bool:
        """A fused attention op, or the attn_core part of one priced in parts."""
        step = self.steps[i]
        if step.fixed is not None:
            return step.fixed is Component.ATTN_CORE
        return step.kind is OpKind.ATTENTION

    def passes(self, i: int) -> bool:
        """A projection search walks through step ``i``: no MACs, not a join, and no parameter
        read unless it is a norm's or a linear's own bias (a position-embedding add or a layer
        scale stops it)."""
        step = self.steps[i]
        return step.macs == 0 and i not in self.joins and (
            not step.params or self.norm(i) or self.own_bias(i) or self.projection_bias(i))

    def output_readers(self, i: int) -> list[int]:
        """The consumers of step ``i`` that a walk from a core's output follows: all of them but
        those reading it only as indices
        (:data:`~vitprof.recognize.rules.flow_checks.OUTPUT_BY_VALUE`)."""
        if OUTPUT_BY_VALUE not in self.rules:
            return self.consumers[i]
        return [j for j in self.consumers[i] if OUTPUT_BY_VALUE.takes_values(self.steps[j], i)]

    def own_bias(self, i: int) -> bool:
        """Step ``i`` adds a linear's bias apart from its product, in the linear's own module
        (``F.linear`` on a non-contiguous 3-D input runs ``mm`` then ``add``)."""
        step = self.steps[i]
        if step.macs or not step.params or len(step.sources) != 1 or not self.weighted(
                step.sources[0]):
            return False
        return self.steps[step.sources[0]].module == step.module

    def projection_bias(self, i: int) -> bool:
        """Step ``i`` adds a bias to a product's output wherever it runs
        (:data:`~vitprof.recognize.rules.flow_checks.PROJECTION_BIAS`)."""
        return PROJECTION_BIAS in self.rules and PROJECTION_BIAS.adds_bias(self, i)

    @cached_property
    def first_readers(self) -> dict[str, int]:
        """Per parameter, the first record reading it, directly or through free ops."""
        found: dict[str, int] = {}
        for i, step in enumerate(self.steps):
            for name in (*step.params, *step.carried):
                found.setdefault(name, i)
        return found

    def on_map(self, i: int, scores: int) -> bool:
        """Step ``i`` maps the attention scores made by step ``scores``: not a join, and either
        without MACs or a weighted map that keeps their number of elements (talking heads)."""
        same = prod(self.steps[i].shape) == prod(self.steps[scores].shape)
        if i in self.joins:
            return same  # a bias made from q added to the scores (relative positions) forks
            # from q like a residual add, but keeps the scores' shape
        if self.steps[i].macs == 0:
            return True
        return self.weighted(i) and same

    def ancestors(self, i: int, low: int) -> set[int]:
        """Records with index >= ``low`` that ``i`` depends on, ``i`` included."""
        return _reach(i, self.sources, low, i)

    def descendants(self, i: int, high: int) -> set[int]:
        """Records with index <= ``high`` that depend on ``i``, ``i`` included."""
        return _reach(i, self.consumers, i, high)

    def fork(self, i: int) -> tuple[int | None, list[set[int]]] | None:
        """If step ``i`` is a join, the record its arms fork from (None: the model's input
        data, :data:`~vitprof.recognize.rules.flow_checks.INPUT_SKIP`) and the records of each
        arm (one per source, after the fork). Records concatenated into one operand are one
        arm (:data:`~vitprof.recognize.rules.flow_checks.CONCATENATED_ARM`)."""
        step = self.steps[i]
        if step.op not in ADDS or step.params:
            return None
        one_arm = CONCATENATED_ARM in self.rules and CONCATENATED_ARM.one_operand(step)
        if len(step.sources) < 2 or one_arm:
            arms = INPUT_SKIP.arms(self, i) if INPUT_SKIP in self.rules else None
            return None if arms is None else (None, arms)
        found = _latest_common(step.sources, self.sources, max(0, step.sources[0] - WINDOW))
        if found is None:
            return None
        fork, arms = found
        with_macs = [any(self.steps[j].macs for j in arm) for arm in arms]
        skip = any(j == fork for j in step.sources) or any(
            self._scaled_skip(arm, fork) for arm in arms)
        if not (all(with_macs) or (skip and any(with_macs))):
            return None  # a mask or a bias made beside the scores, rotary halves: no residual
        return fork, arms

    def _scaled_skip(self, arm: set[int], fork: int) -> bool:
        """The arm is the fork scaled by a parameter or pooled, one record without MACs
        (``res_scale(x) + f(x)``; a downsampling block's pooled shortcut,
        ``pool(x) + f(x)``)."""
        if len(arm) != 1:
            return False
        step = self.steps[next(iter(arm))]
        return not step.macs and step.sources == (fork,) and (
            bool(step.params) or (POOLED_SKIP in self.rules and POOLED_SKIP.skips(step)))

    @cached_property
    def forks(self) -> dict[int, tuple[int | None, list[set[int]]]]:
        """Every join, with the record its arms fork from and the records of each arm
        (:meth:`fork`), found once."""
        return {i: found for i in range(len(self.steps)) if (found := self.fork(i)) is not None}

    @cached_property
    def joins(self) -> dict[int, set[int]]:
        """Every join, with its branch records: those between its fork and it, itself
        included."""
        return {i: set().union(*arms) | {i} for i, (_, arms) in self.forks.items()}

    def free_skip(self, join: int) -> bool:
        """One arm of the join does no products: the skip of a residual ``x + f(x)`` (or
        ``res_scale(x) + f(x)``; the model's input itself), not a projection shortcut nor a sum
        of computed branches."""
        fork, arms = self.forks[join]
        return fork is None or not all(any(self.steps[j].macs for j in arm) for arm in arms)

    def computed_from(self, fork: int | None, i: int) -> set[int]:
        """The records up to ``i`` computed from record ``fork`` (None: from the model's input
        data), ``fork`` included."""
        if fork is None:
            return {j for j in range(i + 1) if self.from_input[j]}
        return self.descendants(fork, i)

    def on_stream(self, j: int, stream: int) -> bool:
        """Record ``j`` is the residual stream at record ``stream`` or before it, or a norm of
        it (:data:`~vitprof.recognize.rules.flow_checks.POST_NORM_STREAM`)."""
        return j <= stream or (POST_NORM_STREAM in self.rules
                               and POST_NORM_STREAM.through_norm(self, j, stream))


def _reach(i: int, edges: Sequence[Sequence[int]], low: int, high: int) -> set[int]:
    """``i`` and the records reached from it along ``edges`` (per record, the records it leads
    to), through records with an index from ``low`` to ``high``."""
    seen = {i}
    stack = [i]
    while stack:
        for j in edges[stack.pop()]:
            if low <= j <= high and j not in seen:
                seen.add(j)
                stack.append(j)
    return seen


def _latest_common(starts: Sequence[int], edges: Sequence[Sequence[int]], low: int
                   ) -> tuple[int, list[set[int]]] | None:
    """The latest record (the highest index) that every one of ``starts`` reaches along
    ``edges`` (per record, its sources: lower indices) through records from index ``low`` on,
    and per start the records it reaches above that one; None when they share none.

    Records are visited from the highest index down, so each is seen once with every start
    that reaches it: the first reached by all is the latest common one, and only the records
    above it are visited (a residual add's two arms, not the :data:`WINDOW` records below)."""
    reached: dict[int, set[int]] = {}
    heap: list[int] = []
    for side, start in enumerate(starts):
        if start not in reached:
            reached[start] = set()
            heapq.heappush(heap, -start)
        reached[start].add(side)
    arms: list[set[int]] = [set() for _ in starts]
    while heap:
        j = -heapq.heappop(heap)
        sides = reached.pop(j)
        if len(sides) == len(starts):
            return j, arms
        for side in sides:
            arms[side].add(j)
        for k in edges[j]:
            if k >= low:
                if k not in reached:
                    reached[k] = set()
                    heapq.heappush(heap, -k)
                reached[k] |= sides
    return None
