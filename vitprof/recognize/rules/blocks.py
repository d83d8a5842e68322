"""Block rules: which records form a block, and the span of a model's blocks. Each rule is one
object holding its code; :func:`group_blocks` runs them over the machinery of
:mod:`vitprof.recognize.graph.blocks` (containers of cores in the module tree, the spans of a
flat forward, the absorbing of joins and sub-layers), asking the :class:`~.base.RuleSet` it is
given whether each is on. :data:`POOLED_SKIP`, :data:`INPUT_SKIP`, :data:`CONCATENATED_ARM`
and :data:`POST_NORM_STREAM`, asked by the data flow itself, are in :mod:`.flow_checks`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from torch import nn

from vitprof.core.records import Component as C
from vitprof.core.records import ParamRecord
from vitprof.recognize.graph.attention import Core
from vitprof.recognize.graph.blocks import (
    Blocks,
    Span,
    absorb_joins,
    absorb_sandwiched,
    absorb_sublayers,
    common,
    core_paths,
    module_blocks,
    module_chain,
    parallel_cores,
    spans,
    stream_joins,
    sublayers,
    within,
)
from vitprof.recognize.graph.flow import WINDOW, Flow
from vitprof.recognize.graph.ops import ADDS
from vitprof.recognize.rules.base import Placement, Rule
from vitprof.recognize.rules.flow_checks import (
    CONCATENATED_ARM,
    INPUT_SKIP,
    POOLED_SKIP,
    POST_NORM_STREAM,
)


@dataclass(frozen=True)
class _JoinedSpan(Rule):
    def narrowed(self, flow: Flow, cores: list[Core], found: list[tuple[str | None, bool]]
                 ) -> list[tuple[str | None, bool]]:
        """``found`` (per core, its block path) with a block holding one core narrowed to the
        module that runs its residual span: the innermost module holding the core and the
        residual adds of its stream run inside the block, up to the next core. A stage of one
        block is a container of no two cores, so the block came out as the stage, its
        downsampling with it; the adds inside it say where the block is."""
        firsts = sorted(core.first for core in cores)
        narrowed = []
        for core, (block, is_list) in zip(cores, found, strict=True):
            module = flow.steps[core.first].module
            if block is not None and sum(within(flow.steps[c.first].module, block)
                                         for c in cores) == 1:
                limit = next((f for f in firsts if f > core.first), len(flow.steps))
                joins = [flow.steps[j].module for j in stream_joins(flow, core, limit)]
                inside = [m for m in joins if within(m, block)]
                span = common([module, *inside]) if inside else block
                block = span if span.startswith(f"{block}.") else block
            narrowed.append((block, is_list))
        return narrowed


JOINED_SPAN = _JoinedSpan(
    "joined-span-block", tuple(C),
    """A block holding a single core is the innermost module holding that core and the
    residual adds of its stream (adds after the core reading the block's input, or an earlier
    such add, before the next core) run inside it: a stage of one block is not the block, its
    downsampling before or after the block's residual span is no part of it.""",
    "the module tree below the block, the residual adds after the core and their modules",
    "one_block_stages")


@dataclass(frozen=True)
class _ResidualSegment(Rule):
    def extend(self, flow: Flow, cores: list[Core], of_step: list[int | None]) -> None:
        """Extend each block over the unplaced records of the residual segments of its stream
        after it: the joins of the stream of the block's cores
        (:func:`~vitprof.recognize.graph.blocks.stream_joins`) before the next record of
        another block or core, up to the first whose unplaced branch mixes tokens (a spatial
        convolution: a convolutional block after the attention, not its feed-forward) or holds
        a core."""
        every = {i for core in cores for i in core.steps}
        firsts = sorted(core.first for core in cores)
        for core in cores:
            block = of_step[core.first]
            if block is None:
                continue
            last = max(core.steps)
            limit = next((i for i in range(last + 1, len(of_step))
                          if of_step[i] not in (None, block) or i in every), len(of_step))
            limit = min(limit, next((f for f in firsts if f > core.first), len(of_step)))
            for join in stream_joins(flow, core, limit):
                branch = {i for i in flow.joins[join] if of_step[i] is None}
                if branch & every or any(flow.mixes_tokens(i) for i in branch):
                    break
                for i in range(last + 1, join + 1):
                    if of_step[i] is None:
                        of_step[i] = block
                last = max(last, join)


RESIDUAL_SEGMENT = _ResidualSegment(
    "residual-segment-block", tuple(C),
    """A block is its residual stream, not only its module: the residual segments after the
    block's module (adds reading the stream, each an earlier one's output), before the next
    block or core, whose branches neither mix tokens (a spatial convolution) nor hold a core,
    are the block's: the feed-forward of a layer that one module runs from parallel lists
    (``for a, f in zip(attns, ffs): x = a(norm(x)) + x; x = f(norm(x)) + x``).""",
    "the residual adds after a block's records, their sources, the kernels in their branches",
    "parallel_lists")


@dataclass(frozen=True)
class _CallBlock(Rule):
    def split(self, flow: Flow, of_step: list[int | None], paths: dict[str, int]
              ) -> dict[int, str]:
        """Each call of a block's module a block of its own: ``of_step`` (blocks by module path)
        renumbered in the order the calls start and ``paths`` naming each module's first call,
        where a module runs more than once; returns the later calls' blocks with their module's
        path. A call is the block module's (a list of layers, which no one calls: the innermost
        running module holding it); a record it does not run (a module of the block called from
        another block's forward: one activation module shared by the blocks) is in the call
        before it."""
        modules = {index: path for path, index in paths.items()}
        entered = {path for calls in {step.calls for step in flow.steps} for path, _ in calls}
        called: list[tuple[int, int] | None] = []  # per step, (its block, the call) or None
        running: dict[int, int] = {}  # per block, the call of its last record
        for i, block in enumerate(of_step):
            if block is None:
                called.append(None)
                continue
            module = modules[block]
            call = next((n for path, n in reversed(flow.steps[i].calls) if path == module or (
                module not in entered and within(module, path))), running.get(block, -1))
            running[block] = call
            called.append((block, call))
        order = dict.fromkeys(key for key in called if key is not None)  # as the calls start
        if len(order) == len(paths):
            return {}
        number = {key: n for n, key in enumerate(order)}
        first: dict[str, int] = {}
        later: dict[int, str] = {}
        for (block, _), n in number.items():
            if modules[block] in first:
                later[n] = modules[block]
            else:
                first[modules[block]] = n
        paths.update(first)
        for i, key in enumerate(called):
            if key is not None:
                of_step[i] = number[key]
        return later


CALL_BLOCK = _CallBlock(
    "block-per-call", tuple(C),
    """A block's module called several times is a block per call: a decoder layer run step by
    step in a loop, each step reading what the last one gave, is as many blocks as steps, each
    with its cores, projections, MLP and norms (its parameters are the first call's). The
    calls are the module's entries into its forward (a list's: the module running it),
    whatever its path.""",
    "the calls of the running modules of each record", "one_module_decoder")


@dataclass(frozen=True)
class _ResidualStack(Rule):
    def added_back(self, flow: Flow, core: Core) -> bool:
        """An add after ``core`` reads a record the core depends on, or a parameter read or
        carried by one, or data no record made where one of those records reads such data too:
        the core's output joins the stream it attends over (a class-attention block's ``t +
        attn(norm(cat(t, x)))``; a decoder layer's ``x + attn(norm(x))`` on the rows a lookup
        gave, whose table the norm carries), as no attention-pooling head's does."""
        last = max(core.steps)
        before = set().union(*(flow.ancestors(i, max(0, core.first - WINDOW)) for i in core.steps))
        before -= core.steps
        read = {name for i in before for name in (*flow.steps[i].params, *flow.steps[i].carried)}
        # data no record made: input data, a constant, or the rows a copy of a table holds
        outside = any(step.unsourced or (step.carried and not step.sources)
                      for step in (flow.steps[i] for i in before))
        return any(flow.steps[j].op in ADDS and (
            any(i in before for i in flow.steps[j].sources) or read & set(flow.steps[j].params)
            or (outside and flow.steps[j].unsourced))
            for j in flow.descendants(last, last + WINDOW) - {last})


RESIDUAL_STACK = _ResidualStack(
    "residual-attention-block", (C.ATTN_QKV, C.ATTN_CORE, C.ATTN_PROJ, C.MLP),
    """A core outside the lists of blocks, after them, whose output is added back to what it
    attends over (an add after the core reads a record, or a parameter, that the core's
    operands come from: a class token's residual stream; or data no record made that those
    records read too: a decoder layer's first step on rows looked up from a table) is a block
    of a later stack (a class-attention stage, a decoder); only one whose output is not added
    back (an attention-pooling head) is left to ``pooling-head-attention``.""",
    "adds after the core, their sources and parameters, the records and parameters before it, "
    "the operands no record made",
    "class_attention")


@dataclass(frozen=True)
class _ResidualSpan(Rule):
    def span(self, flow: Flow) -> Span | None:
        """The residual blocks of a convolutional network (no attention): from the first record
        of the first branch of a join that convolves with a spatial kernel, a residual ``x +
        f(x)`` (or ``res_scale(x) + f(x)``) if there is one (a multi-branch block in the stem is
        patch embedding), to the last join of any kind (a downsampling shortcut ``conv(x) +
        f(x)``, the summed branches of a multi-branch block, the last MLP residual). None when no
        join convolves: token-mixing MLPs or a chain of layers are no convolutional network."""
        convolving = [(join, branch) for join, branch in flow.joins.items()
                      if any(flow.mixes_tokens(i) for i in branch)]
        if not convolving:
            return None
        skipping = [branch for join, branch in convolving if flow.free_skip(join)]
        first = skipping[0] if skipping else convolving[0][1]
        return Span(min(first), max(flow.joins))


RESIDUAL_SPAN = _ResidualSpan(
    "residual-span", (C.PATCH_EMBED, C.CONV, C.HEAD),
    """A model without an attention core whose joins' branches convolve with a spatial kernel
    is a convolutional network: its span runs from the first such branch to the last join;
    before it is patch embedding, after it head.""",
    "residual joins and whether their branches convolve", "residual_conv_net")


@dataclass(frozen=True)
class _NoBlocks(Rule):
    def place(self, flow: Flow, parameters: Mapping[str, nn.Parameter]
              ) -> tuple[list[Placement], dict[str, ParamRecord]]:
        """Every record and parameter ``other``, by this rule."""
        placements = [Placement(C.OTHER, self.name)] * len(flow.steps)
        params = {name: ParamRecord(name, p.numel(), C.OTHER, None, tuple(p.shape), self.name)
                  for name, p in parameters.items()}
        return placements, params


NO_BLOCKS = _NoBlocks(
    "no-blocks", (C.OTHER,),
    """A model with neither an attention core nor a convolutional residual span is no ViT:
    everything is ``other``, with a warning.""",
    "nothing found by the rules above", "mixer_only")

# the order they decide in
BLOCK_RULES: tuple[Rule, ...] = (
    JOINED_SPAN, CALL_BLOCK, RESIDUAL_SEGMENT, RESIDUAL_STACK, POOLED_SKIP, INPUT_SKIP,
    CONCATENATED_ARM, POST_NORM_STREAM, RESIDUAL_SPAN, NO_BLOCKS,
)


def group_blocks(model: nn.Module, flow: Flow, cores: list[Core]) -> Blocks:
    """The blocks of the trace (:mod:`vitprof.recognize.graph.blocks`), grouped by the block
    rules on."""
    joining = {flow.steps[i].module for i in flow.joins}
    every = {i for core in cores for i in core.steps}
    found = core_paths(model, [flow.steps[c.first].module for c in cores],
                        lambda ks: parallel_cores(flow, [cores[k] for k in ks], every),
                        lambda child: any(within(m, child) for m in joining))
    if JOINED_SPAN in flow.rules:
        found = JOINED_SPAN.narrowed(flow, cores, found)
    listed = [c.first for c, (_, is_list) in zip(cores, found, strict=True) if is_list]
    loose = frozenset(
        k for k, (c, (path, is_list)) in enumerate(zip(cores, found, strict=True))
        if listed and not is_list and c.first > max(listed)
        and not (RESIDUAL_STACK in flow.rules and RESIDUAL_STACK.added_back(flow, c))
    )
    paths: dict[str, int] = {}
    for k, (path, _) in enumerate(found):
        if path is not None and k not in loose and path not in paths:
            paths[path] = len(paths)
    block = module_blocks(paths)
    of_step = [block(step.module) for step in flow.steps]
    later = CALL_BLOCK.split(flow, of_step, paths) if CALL_BLOCK in flow.rules else {}
    holding = {prefix for c in cores for _, prefix in module_chain(flow.steps[c.first].module)}
    absorb_sublayers(flow, of_step, sublayers(model, paths, holding))
    if RESIDUAL_SEGMENT in flow.rules:
        RESIDUAL_SEGMENT.extend(flow, [c for k, c in enumerate(cores) if k not in loose], of_step)
    flat = [c for k, (c, (path, _)) in enumerate(zip(cores, found, strict=True))
            if path is None and k not in loose]
    if flat:
        spans(flow, flat, of_step, len(paths) + len(later))
    absorb_joins(flow, of_step)
    absorb_sandwiched(of_step)
    return Blocks(of_step, paths, loose, later=later)
