"""Record rules: the component of each record the core rules left unplaced, decided record by
record in the order of :data:`RECORD_RULES`: the first rule that places a record decides (a rule
switched off places nothing). Each rule reads, once before the records, the facts it decides
from (:meth:`RecordRule.prepare`), then decides each record (:meth:`RecordRule.place`).
Records in a block that no rule places are left to the position rules (:mod:`.positions`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from math import prod
from typing import Any

from torch import nn

from vitprof.core.records import Component as C
from vitprof.core.records import OpKind
from vitprof.count.trace import Step
from vitprof.recognize.graph.attention import Core
from vitprof.recognize.graph.blocks import (
    LISTS,
    Blocks,
    Span,
    holders,
    kind,
    path_parts,
    shared_parts,
    within,
)
from vitprof.recognize.graph.flow import ADDS, Flow
from vitprof.recognize.rules.base import Placement, Rule


@dataclass
class Placing:
    """What the record rules read: the ``model``, its data ``flow`` (with the rule set on),
    the attention ``cores``, the ``blocks``, the ``span`` of the blocks (a convolutional
    network's residual span without them), the parameters of two or more dimensions
    (``shaped``: a 1-D one added outside blocks is a bias or a scale, not a token) and, per
    record, its placement so far (None: not placed yet) and the component the data flow passes
    on from it (``carried``: its own, or through a norm or a token, its input's)."""

    model: nn.Module
    flow: Flow
    cores: list[Core]
    blocks: Blocks
    span: Span
    shaped: set[str]
    placed: list[Placement | None]
    carried: list[C | None]

    def in_block(self, i: int) -> bool:
        return self.blocks.of_step[i] is not None

    def component(self, i: int) -> C | None:
        placement = self.placed[i]
        return None if placement is None else placement.component


@dataclass(frozen=True)
class RecordRule(Rule):
    """A rule that places records one by one."""

    def prepare(self, at: Placing) -> Any:
        """What the rule reads once, before any record is decided (by default nothing)."""
        return None

    def place(self, at: Placing, i: int, facts: Any) -> C | None:
        """The component of record ``i``, or None: the rule does not place it."""
        raise NotImplementedError


@dataclass(frozen=True)
class _NormModule(RecordRule):
    """The records a module runs itself are ``norm`` when this rule found that the module
    normalises (:attr:`~vitprof.recognize.graph.flow.Flow.norm_modules`: the first of these
    rules to find a module names it)."""

    def place(self, at: Placing, i: int, facts: Any) -> C | None:
        return C.NORM if at.flow.norm_modules.get(at.flow.steps[i].module) == self.name else None


@dataclass(frozen=True)
class _FusedNorm(RecordRule):
    def place(self, at: Placing, i: int, facts: Any) -> C | None:
        return C.NORM if at.flow.norm(i) else None


@dataclass(frozen=True)
class _FoundRecords(RecordRule):
    """A rule that finds its records once, before the records are decided, and places them as
    its one component."""

    def place(self, at: Placing, i: int, facts: Any) -> C | None:
        return self.components[0] if i in facts else None


@dataclass(frozen=True)
class _TokenMixer(_FoundRecords):
    def prepare(self, at: Placing) -> set[int]:
        roles = [at.component(i) for i in range(len(at.placed))]
        return _token_mixers(at.flow, at.cores, at.blocks, roles)


@dataclass(frozen=True)
class _Selector(RecordRule):
    def place(self, at: Placing, i: int, facts: Any) -> C | None:
        return C.MLP if i in at.blocks.selected and at.flow.weighted(i) else None

    def selectors(self, flow: Flow, of_step: list[int | None], last: int
                  ) -> tuple[list[int | None], frozenset[int]]:
        """``of_step`` with each token selector in the block whose input it selects: a connected
        part (through the data flow) of the records outside blocks, before the last block, whose
        results reach a block only as indices (:attr:`~vitprof.count.trace.Step.indexed`), none
        through their values, holding a weighted record (a predictor: a LayerNorm and linears
        scoring the patches, whose ``topk`` indices gather the patches the next block reads). It
        joins the first block any of its records reaches, but a query selection between two stacks
        (:data:`QUERY_SELECTION`), whose records are returned apart. ``last``: the last block's
        last record."""
        reached: list[int | None] = [None] * len(of_step)  # the first block reached, by any path
        valued = [False] * len(of_step)  # a block is reached through values
        for i in reversed(range(last)):
            if of_step[i] is not None:
                continue
            for j in flow.consumers[i]:
                inside = of_step[j] is not None
                looks_up = HEAD_AGAIN in flow.rules and HEAD_AGAIN.looks_up(flow.steps[j])
                if (i not in flow.steps[j].indexed or looks_up) and (inside or valued[j]):
                    valued[i] = True
                block = of_step[j] if inside else reached[j]
                earlier = reached[i]
                if block is not None:
                    reached[i] = block if earlier is None else min(earlier, block)
        first = {i: block for i in range(last)
                 if (block := reached[i]) is not None and not valued[i]}
        placed = list(of_step)
        between: set[int] = set()
        for part in self.connected(flow, set(first)):
            if any(flow.weighted(i) for i in part):
                block = min(first[i] for i in part)
                if QUERY_SELECTION in flow.rules and QUERY_SELECTION.between_stacks(
                        flow, of_step, part, block):
                    between |= part  # head-like work between an encoder and a decoder
                    continue
                for i in part:
                    placed[i] = block
        return placed, frozenset(between)

    def selected(self, blocks: Blocks, selectors: tuple[list[int | None], frozenset[int]]
                 ) -> Blocks:
        """``blocks`` with the token selectors placed in blocks (``selectors``: ``of_step`` and
        the query selections between stacks, by :meth:`selectors`), marked ``selected`` (and
        ``between``)."""
        of_step, between = selectors
        moved = frozenset(i for i, (old, new) in enumerate(
            zip(blocks.of_step, of_step, strict=True)) if old is None and new is not None)
        return replace(blocks, of_step=of_step, selected=moved, between=between)

    def connected(self, flow: Flow, members: set[int]) -> list[set[int]]:
        """The parts of ``members`` connected through the data flow among them."""
        left = set(members)
        parts = []
        while left:
            stack = [left.pop()]
            part = set(stack)
            while stack:
                i = stack.pop()
                for j in (*flow.steps[i].sources, *flow.consumers[i]):
                    if j in left:
                        left.remove(j)
                        part.add(j)
                        stack.append(j)
            parts.append(part)
        return parts


@dataclass(frozen=True)
class _ConstantProduct(_FoundRecords):
    def prepare(self, at: Placing) -> set[int]:
        constant: list[bool] = []
        for step in at.flow.steps:
            constant.append(not step.params and not step.carried
                            and all(constant[j] for j in step.sources))
        return {i for i, step in enumerate(at.flow.steps)
                if constant[i] and step.macs and at.in_block(i)}


@dataclass(frozen=True)
class _InBlock(RecordRule):
    def place(self, at: Placing, i: int, facts: Any) -> C | None:
        return C.MLP if at.in_block(i) and at.flow.weighted(i) else None


@dataclass(frozen=True)
class _FreeProduct(RecordRule):
    def place(self, at: Placing, i: int, facts: Any) -> C | None:
        return C.ATTN_CORE if at.in_block(i) and at.flow.free_product(i) else None


@dataclass(frozen=True)
class _Skipless(_FoundRecords):
    def prepare(self, at: Placing) -> set[int]:
        embedding = _embedding(at.flow, at.span)
        if embedding is None:
            return set()
        return _skipless_blocks(at.model, at.flow, at.blocks.of_step,
                                _outside(at, embedding))


@dataclass(frozen=True)
class _ResidualBranch(_FoundRecords):
    def prepare(self, at: Placing) -> set[int]:
        return _residual_branches(at.flow, at.blocks.of_step, at.span.last)


@dataclass(frozen=True)
class _MapConv(_FoundRecords):
    def prepare(self, at: Placing) -> set[int]:
        embedding = _embedding(at.flow, at.span)
        if embedding is None:
            return set()
        branches = RESIDUAL_BRANCH.prepare(at) if RESIDUAL_BRANCH in at.flow.rules else set()
        return _map_convs(at.model, at.flow, _outside(at, embedding), branches, at.span.last,
                          embedding)


@dataclass(frozen=True)
class _QuerySelection(RecordRule):
    def place(self, at: Placing, i: int, facts: Any) -> C | None:
        return C.HEAD if i in at.blocks.between and at.flow.weighted(i) else None

    def between_stacks(self, flow: Flow, of_step: list[int | None], part: set[int],
                       block: int) -> bool:
        """The selector ``part`` scores tokens that ``block``, the first it reaches, also reads
        directly by its values: the records
        outside blocks the part reads, and those they read back to the last block's output, feed
        a record of ``block`` that no index of the part selects (a gather is no record: the
        record reading the gathered tokens reads their source, the part's indices beside): a
        decoder that selects its queries
        from the encoder's output and attends over all of it (a detection transformer's query
        selection), not a selector inside one stack whose next block reads only what it kept."""
        scored = {j for i in part for j in flow.steps[i].sources if j not in part}
        stack = list(scored)
        while stack:
            i = stack.pop()
            if of_step[i] is not None:
                continue
            for j in flow.steps[i].sources:
                if j not in scored:
                    scored.add(j)
                    stack.append(j)
        return any(j in scored and j not in step.indexed and not part & set(step.indexed)
                   for i, step in enumerate(flow.steps) if of_step[i] == block
                   for j in step.sources)


@dataclass(frozen=True)
class _ActivationWithConv(RecordRule):
    def place(self, at: Placing, i: int, facts: Any) -> C | None:
        step = at.flow.steps[i]
        if i <= at.span.last or at.flow.weighted(i) or not step.sources:
            return None
        source = step.sources[-1]
        holder = at.flow.steps[source].module.rpartition(".")[0]
        conv = at.component(source) is C.CONV and holder and within(step.module, holder)
        return C.CONV if conv else None


@dataclass(frozen=True)
class _AfterBlocks(RecordRule):
    def place(self, at: Placing, i: int, facts: Any) -> C | None:
        return C.HEAD if i > at.span.last else None


@dataclass(frozen=True)
class _HeadAgain(_FoundRecords):
    def prepare(self, at: Placing) -> set[int]:
        after = {name for step in at.flow.steps[at.span.last + 1:] for name in step.params}
        return {i for i, step in enumerate(at.flow.steps[:at.span.last + 1])
                if _outside_weighted(at, i) and after & set(step.params)}

    def looks_up(self, step: Step) -> bool:
        """``step`` reads indices alone and the parameters they pick rows of (an embedding table
        looked up by the tokens a head chose at the previous step of a loop): the indices select
        no tokens, they are the values the record reads (read by :data:`SELECTOR`)."""
        return bool(step.carried) and set(step.sources) <= set(step.indexed)


@dataclass(frozen=True)
class _Pointwise(RecordRule):
    def place(self, at: Placing, i: int, facts: Any) -> C | None:
        conv_net = not at.cores and i > at.span.start
        return C.CONV if conv_net and _outside_weighted(at, i) and _pointwise_on_map(
            at.flow, i) else None


@dataclass(frozen=True)
class _WeightedOutside(RecordRule):
    def place(self, at: Placing, i: int, facts: Any) -> C | None:
        return C.PATCH_EMBED if _outside_weighted(at, i) else None


@dataclass(frozen=True)
class _PositionTable(_FoundRecords):
    def prepare(self, at: Placing) -> set[int]:
        return _position_tables(at.flow, at.blocks.of_step)


def _outside(at: Placing, embedding: str) -> list[int]:
    """The weighted records outside blocks and outside the patch embedding proper."""
    return [i for i, block in enumerate(at.blocks.of_step) if block is None
            and at.flow.weighted(i) and not within(at.flow.steps[i].module, embedding)]


def _outside_weighted(at: Placing, i: int) -> bool:
    """Record ``i`` is weighted, outside blocks."""
    return not at.in_block(i) and at.flow.weighted(i)


def _token_mixers(
    flow: Flow, cores: list[Core], blocks: Blocks, roles: list[C | None]
) -> set[int]:
    """Weighted records of a block, not yet placed, in a token-mixing unit of the block (its
    child module, not one running a core): upstream of the block's first core (feeding it,
    through the residual stream), a unit with a spatial convolution among them (a convolutional
    position encoding); downstream of that core, a unit whose weighted records all mix tokens
    with a spatial kernel, no pointwise layer among them. A unit of pointwise layers before the
    core stays ``mlp``, and so does, after it, one with pointwise layers around a spatial conv
    (an MLP with a depthwise conv inside). The models showing it:
    ``tests/recognition_fixtures.py``'s ``MixerBlk``."""
    paths = blocks.modules()
    first: dict[int, Core] = {}  # block -> its first core
    for core in cores:
        block = blocks.of_step[core.first]
        if block in paths and (block not in first or core.first < first[block].first):
            first[block] = core
    last = {block: i for i, block in enumerate(blocks.of_step) if block is not None}
    found: set[int] = set()
    for block, core in first.items():
        prefix = f"{paths[block]}."
        running = {_unit(flow.steps[i].module, prefix) for other in cores
                   if blocks.of_step[other.first] == block for i in other.steps}
        feeding = flow.ancestors(core.first, blocks.of_step.index(block))
        before = _units(flow, {i for i in feeding if roles[i] is None}, prefix, running)
        found.update(i for unit in before.values() if any(map(flow.mixes_tokens, unit))
                     for i in unit)
        after = _units(flow, flow.descendants(max(core.steps), last[block]), prefix, running)
        found.update(i for unit in after.values()
                     if all(roles[i] is None and flow.mixes_tokens(i) for i in unit)
                     for i in unit)
    return found


def _units(flow: Flow, records: set[int], prefix: str, running: set[str]
           ) -> dict[str, set[int]]:
    """The weighted ones of ``records`` that run under the block with path ``prefix`` (with
    its dot), by the unit (child of the block) they run in, but units in ``running``."""
    units: dict[str, set[int]] = {}
    for i in records:
        module = flow.steps[i].module
        if flow.weighted(i) and module.startswith(prefix):
            unit = _unit(module, prefix)
            if unit not in running:
                units.setdefault(unit, set()).add(i)
    return units


def _unit(module: str, prefix: str) -> str:
    """The child of the block (path ``prefix`` with its dot) that ``module`` lies in."""
    return module.removeprefix(prefix).partition(".")[0]


def _embedding(flow: Flow, span: Span) -> str | None:
    """The patch embedding proper: the module running the first weighted record, as a child of
    the deepest module holding both it and the first block's first record (a stem of several
    convolutions is one unit); None when it runs in a module holding the blocks (no unit of its
    own)."""
    first = next((i for i in range(span.start) if flow.weighted(i)), None)
    if first is None:
        return None
    stem, block = (path_parts(flow.steps[i].module) for i in (first, span.start))
    shared = shared_parts(stem, block)
    return None if len(stem) == shared else ".".join(stem[: shared + 1])


def _skipless_blocks(model: nn.Module, flow: Flow, of_step: list[int | None],
                     outside: list[int]) -> set[int]:
    """Those of the records ``outside`` that run in a convolutional block run without its
    skip: a module (not a list) that runs no residual add, of the kind (:func:`~.blocks.kind`:
    the forward code it runs, not its class) of one whose forward runs one (a block that
    changes width or stride beside those that keep them). A downsampling layer between stages
    stays patch embedding unless built of such blocks. After the blocks, such a block is
    ``conv`` too, with the weightless records run in it (its activations, a squeeze-excitation's
    pooling and gate). The models showing it: ``tests/recognition_fixtures.py``'s ``Units``."""
    joining = {flow.steps[i].module for i in flow.joins if of_step[i] is None}
    skipping = {module for path in joining for module in holders(path)}
    classes = {kind(module) for m in joining if m
               and not isinstance(module := model.get_submodule(m), LISTS)}
    found = {m for i in outside for m in holders(flow.steps[i].module)
             if m not in skipping and kind(model.get_submodule(m)) in classes}
    return {i for i, block in enumerate(of_step) if block is None
            and any(within(flow.steps[i].module, m) for m in found)}


def _map_convs(model: nn.Module, flow: Flow, outside: list[int], branches: set[int], last: int,
               embedding: str) -> set[int]:
    """Those of the records ``outside``, but the residual ``branches``, that convolve a map
    with a spatial kernel and are no downsampling (:func:`_downsamples`), before or between
    the blocks, or after the last one in a unit holding it (:func:`_one_unit`; not a
    convolution of the model's own after it); and, as far, the pointwise convolutions that keep
    the resolution and run in one unit with one of them, on a map of its size (a local
    representation into the transformer's width and a fusion out of it). A residual branch is
    ``conv`` anyway: its pointwise neighbours are not taken. The models showing it:
    ``tests/recognition_fixtures.py``'s ``MapNet``."""
    def reached(i: int) -> bool:
        return i < last or _one_unit(model, flow, (i, last), embedding)

    spatial = {i for i in outside if i not in branches and flow.mixes_tokens(i)
               and not _downsamples(flow, i) and reached(i)}
    pointwise = {j for j in outside if flow.steps[j].kind is OpKind.CONV
                 and not flow.mixes_tokens(j) and _keeps_resolution(flow.steps[j]) and reached(j)
                 and any(flow.steps[j].shape[2:] == flow.steps[i].shape[2:]
                         and _one_unit(model, flow, (i, j), embedding) for i in spatial)}
    return spatial | pointwise


def _keeps_resolution(step: Step) -> bool:
    """The record outputs a map of the spatial size of its input map (``(N, C, *size)``)."""
    return len(step.operand) == len(step.shape) > 2 and step.operand[2:] == step.shape[2:]


def _downsamples(flow: Flow, i: int) -> bool:
    """Record ``i`` shrinks its map, or a record without MACs carrying its output to the next
    records with MACs pools it to a smaller map (a 3x3 conv, a norm, a max pooling of stride
    2); a global pooling to one position (a head's) is none."""
    if not _keeps_resolution(flow.steps[i]):
        return True
    stack, seen = list(flow.consumers[i]), set()
    while stack:
        j = stack.pop()
        step = flow.steps[j]
        if j in seen or step.macs:
            continue
        seen.add(j)
        if len(step.operand) == len(step.shape) > 2 and 1 < prod(step.shape[2:]) < prod(
                step.operand[2:]):
            return True
        stack.extend(flow.consumers[j])
    return False


def _one_unit(model: nn.Module, flow: Flow, records: tuple[int, int], embedding: str) -> bool:
    """The two records run under one module that is neither the model, nor a list, nor one
    holding the patch embedding proper ``embedding`` (a block of a hybrid's stage)."""
    a, b = (path_parts(flow.steps[i].module) for i in records)
    unit = ".".join(a[: shared_parts(a, b)])
    return bool(unit) and not within(embedding, unit) and not isinstance(
        model.get_submodule(unit), LISTS)


def _residual_branches(flow: Flow, of_step: list[int | None], last: int) -> set[int]:
    """Records outside blocks in the branch of a join outside blocks; after the last block
    (record ``last``), of a join whose branch convolves with a spatial kernel (a convolutional
    block after the attention stages, not an attention-pooling head's residual MLP). The models
    showing it: ``tests/recognition_fixtures.py``'s ``FinalNet``."""
    return {j for join, branch in flow.joins.items() if of_step[join] is None and (
                join <= last or any(flow.mixes_tokens(i) for i in branch))
            for j in branch if of_step[j] is None}


def _position_tables(flow: Flow, of_step: list[int | None]) -> set[int]:
    """The records outside blocks that compute a table from parameters alone (no input data:
    :attr:`Flow.weights`) or from constants alone (:attr:`Flow.constants`) which an add
    without MACs then adds to the activations (a record's output, or the model's input data
    itself), and those adds (:data:`POSITION_TABLE`): a position table resized, spatial and
    temporal tables summed, or a sin-cos table made in the forward, before it joins the
    tokens."""
    found: set[int] = set()
    for i, step in enumerate(flow.steps):
        if of_step[i] is not None or step.macs or step.op not in ADDS:
            continue
        tables = [j for j in step.sources if _table(flow, j)]
        if not tables or (len(tables) == len(step.sources) and not step.fed):
            continue  # no table, or no activation it is added to
        found.add(i)
        while tables:
            j = tables.pop()
            if j not in found and of_step[j] is None and _table(flow, j):
                found.add(j)
                tables.extend(flow.sources[j])
    return found


def _table(flow: Flow, j: int) -> bool:
    """Record ``j`` computes a weight (:attr:`Flow.weights`) that reads no input data (not a
    mask token weighted by the patch mask fed beside the image, ``t * w``, which is made per
    input), or computes from constants alone (:attr:`Flow.constants`)."""
    return (flow.weights[j] and not flow.steps[j].unsourced) or flow.constants[j]


def _pointwise_on_map(flow: Flow, i: int) -> bool:
    """Record ``i`` is a convolution that keeps its map's resolution: in a convolutional network
    without attention, between its first and last convolutional blocks, work of its stages
    (pointwise convolutions after each residual depthwise one, transitions), not a
    downsampling. The models showing it: ``tests/recognition_fixtures.py``'s ``ConvNet``."""
    return flow.steps[i].kind is OpKind.CONV and not _downsamples(flow, i)


NORM_COMPUTED = _NormModule(
    "norm-by-computation", (C.NORM,),
    """The records of a module that normalises by what it computes are ``norm``: its own
    records have no MACs and reduce a mean (or variance) of which they take a square root
    (an RMSNorm written as pow, mean, rsqrt and a multiply by its own weight).""",
    "the ops of the records a module runs itself, their MACs", "rms_block")
VECTOR_NORM = _NormModule(
    "norm-by-vector-norm", (C.NORM,),
    """The records of a module that normalises by a vector norm are ``norm``: its own records
    have no MACs, take the vector norm of a tensor a record computed and divide by it (an
    RMSNorm or ScaleNorm written as ``F.normalize(x) * scale * g``, l2-normalised q and k in a
    module of their own, a global response normalisation), as the same model with a LayerNorm
    places its norms.""",
    "the ops of the records a module runs itself, their MACs and sources", "vector_norm_block")
NORM_GAIN = _NormModule(
    "norm-with-outer-gain", (C.NORM,),
    """The records of a module that runs a norm and applies a gain to its output itself are
    ``norm``: under it, only norm records and records of its own without MACs reading what
    runs under it, the norm's output and a parameter among them (a LayerNorm without affine
    and ``* gamma`` beside it), as a LayerNorm with its own affine places them.""",
    "the records under a module, their ops, MACs, sources and parameters", "vector_norm_block")
NORM = _FusedNorm(
    "norm-op", (C.NORM,),
    """A fused normalisation op (layer, batch, group, instance or RMS norm) is ``norm``.""",
    "the op of a record", "plain_block")
TOKEN_MIXER = _TokenMixer(
    "token-mixer-conv", (C.CONV,),
    """In a block, a child unit feeding the block's first core with a spatial convolution, or
    one after it made of spatial convolutions alone, mixes tokens: ``conv``.""",
    "convolution weights with more than one tap, the block's child modules", "mixer_block")
SELECTOR = _Selector(
    "token-selector", (C.MLP,),
    """Records outside blocks whose results reach a block only as indices (a topk's indices
    gathering the tokens), a weighted one among them, are in that block: its weighted records
    ``mlp``.""",
    "which inputs of a block's records are indices", "selector_block")
CONSTANT_PRODUCT = _ConstantProduct(
    "constant-product", (C.TOKENS,),
    """In a block, a product computed from constants alone (no parameter, no record but ones
    computed so: a sin-cos position embedding made in the forward, the token indices times the
    frequencies) is ``tokens``, as a table of parameters added to the tokens is; the records
    mapping it (its sines and cosines) take its component as its consumers.""",
    "records without parameters whose sources are all such records, their MACs, their block",
    "constant_table_block")
IN_BLOCK = _InBlock(
    "weighted-in-block", (C.MLP,),
    """A weighted record in a block that no attention rule placed is ``mlp``.""",
    "MACs reading a parameter, the block of the record", "plain_block")
FREE_PRODUCT = _FreeProduct(
    "free-product-in-block", (C.ATTN_CORE,),
    """A product of two activations in a block that no core holds (a token merge scoring
    every pair of tokens by the product of their keys) multiplies tokens by tokens as the
    cores do, no projection: ``attn_core``. Its producer's component would make it a q/k/v
    projection after the core.""",
    "MACs without a parameter read, the block of the record, the cores' records",
    "index_merge_block")
SKIPLESS = _Skipless(
    "skipless-conv-block", (C.CONV,),
    """Records outside blocks in a module of the kind of a convolutional block whose forward
    runs a residual add (the same forward code, whatever the class holding it), run without
    its skip, are ``conv``.""",
    "the module tree: modules whose forward code elsewhere runs a residual join",
    "skipless_block")
RESIDUAL_BRANCH = _ResidualBranch(
    "residual-branch-conv", (C.CONV,),
    """The records of a residual join's branch outside blocks (before the last block, or
    after it when the branch convolves with a spatial kernel) are ``conv``.""",
    "residual joins outside blocks and their branches", "conv_stem_block")
MAP_CONV = _MapConv(
    "map-conv", (C.CONV,),
    """Outside blocks and the patch embedding proper, a spatial convolution that keeps its
    map's resolution, and the pointwise convolutions at that resolution in one unit with it,
    are ``conv``.""",
    "convolution kernels, input and output map sizes, the unit holding the records",
    "map_conv_block")
QUERY_SELECTION = _QuerySelection(
    "query-selection-head", (C.HEAD,),
    """A token selector (``token-selector``'s records) whose scored tokens, or what they are
    computed from back to the last block's output, the block it reaches also reads by their
    values (a decoder selecting its queries from the encoder's output by a linear or MLP score
    and top-k, then attending over all of that output) is head-like work between two stacks,
    in no block: its records take the rules outside blocks (its weighted ones ``head``, as a
    head scoring tokens after the blocks is).""",
    "the sources of the selector's records back to the last block, the sources of the first "
    "block it reaches", "query_selection")
ACTIVATION_WITH_CONV = _ActivationWithConv(
    "activation-with-conv", (C.CONV,),
    """After the blocks, a weightless record run in the module holding the ``conv`` record
    feeding it (its activation) is ``conv``.""",
    "the record's producer and the module holding it", "final_conv_block")
AFTER_BLOCKS = _AfterBlocks(
    "after-last-block-head", (C.HEAD,),
    """A record after the last block's last record, in no convolutional block, is ``head``.""",
    "the position of the record after the blocks", "plain_block")
HEAD_AGAIN = _HeadAgain(
    "head-called-again", (C.HEAD,),
    """A weighted record outside blocks, before the last block's last record, that reads the
    weight of a record after it is the head called again: a decoder run step by step in a
    loop, the head choosing each step's token, whose embedding the next step reads (the
    indices a head's scores give look up rows of a table: they select no tokens, and the head
    is no token selector), is ``head`` at every step, as at the last.""",
    "the parameters of the records after the last block, the weighted records before it",
    "loop_decoder")
POINTWISE = _Pointwise(
    "pointwise-on-map", (C.CONV,),
    """In a convolutional network without attention, a convolution within the residual span
    that keeps its map's resolution is ``conv``.""",
    "the span of residual joins, the input and output map sizes", "residual_conv_net")
WEIGHTED_OUTSIDE = _WeightedOutside(
    "weighted-before-blocks", (C.PATCH_EMBED,),
    """A weighted record before or between the blocks, no convolution on a map, is
    ``patch_embed`` (a stem, a patch merging).""",
    "MACs reading a parameter before the last block", "plain_block")
POSITION_TABLE = _PositionTable(
    "parameter-only-table", (C.TOKENS,),
    """Outside blocks, the records that compute a table from parameters alone (no input data
    reaches them: a position table resized, spatial and temporal tables summed) or from
    constants alone (a sin-cos table made in the forward: positions times frequencies) and the
    add joining that table to the activations (a record's output or the model's input data)
    are ``tokens``, as the tables are, whatever the rank of each table.""",
    "records computing from parameters only, the add consuming them and its other source",
    "position_tables")
# the order they decide in
RECORD_RULES: tuple[RecordRule, ...] = (
    NORM_COMPUTED, VECTOR_NORM, NORM_GAIN, NORM, TOKEN_MIXER, SELECTOR, CONSTANT_PRODUCT,
    IN_BLOCK, FREE_PRODUCT, SKIPLESS, RESIDUAL_BRANCH, MAP_CONV, QUERY_SELECTION,
    ACTIVATION_WITH_CONV, AFTER_BLOCKS, HEAD_AGAIN, POINTWISE, WEIGHTED_OUTSIDE, POSITION_TABLE,
)
