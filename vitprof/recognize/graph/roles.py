"""Roles: a component and a block for every record and parameter of a counted run.

Inside a block: the core is ``attn_core``, its q/k/v projections ``attn_qkv``, its output
projections ``attn_proj``, norms ``norm``, the units that mix tokens with a spatial
convolution ``conv`` (:func:`_token_mixers`: one feeding the first core with such a conv, one
after it made of such convs alone), other weighted records ``mlp``; records without weights
take their producer's component (:func:`vitprof.recognize.rules.positions.resolve_positions_by`:
``x + attn(x)`` is ``attn_proj``, ``gamma * mlp(x)`` is ``mlp``). Outside blocks and outside
the patch embedding proper, convolutional work is ``conv`` wherever it runs
(:func:`_convs_outside_blocks`): the convolutional blocks run without their skip; the
convolutions with a spatial kernel on a map, outside residual branches, that are no
downsampling (they keep the map's resolution, and no pooling shrinks their output before the
next weighted record), and the pointwise convolutions at that resolution in one unit with one
of them (a module of the model, not a list, holding no patch embedding: a local
representation and a fusion by convolutions around a transformer); after the last block, those
in a unit holding it. The records of a residual branch outside blocks (a join's branch: an
inverted residual, a convolutional token mixer) are ``conv``; after the last block, of one
that convolves with a spatial kernel (a last inverted residual, a final conv; an
attention-pooling head's residual MLP is no conv block). Else everything after the last block
is ``head`` (an activation run in the module of the conv feeding it goes with it); before and
between blocks, other weighted records ``patch_embed`` (stem, patch merging: a downsampling),
records reading a parameter without MACs ``tokens`` (class tokens, position embeddings), norms
``norm``, and the rest follow the data flow.
A token selector run before a block is in that block (``token-selector``): records
outside blocks whose results reach the blocks only as indices, none through their values, a
weighted one among them (a predictor whose scores' ``topk`` indices gather the tokens the
block reads); its weighted records are ``mlp``, its norms ``norm``, the rest follow the data
flow.

A fused projection (:mod:`.fused`: the MLP's first layer and q/k/v in one linear) is placed
as its columns that do not reach the core (``mlp`` there), and shared out: each of its records
(forward and backward) becomes one per share, its weight and bias two records of their name,
the q/k/v rows ``attn_qkv``.

A parameter takes the component of the record that reads it with the most MACs; one reaching
records only through free ops (an expanded class token, an indexed bias table), or added whole
to the sequence or to another parameter first (a class token or position embedding of two or
more dimensions, a class token plus its position; a 1-D bias or scale is not), that of
the record consuming it when that is in a core, weighted or ``conv`` (a bias or scale of a
conv block), else ``tokens`` (``head`` after the blocks); but the affine of a norm run by its own
module is the norm's, whatever its rank (a hand-written channel norm's ``* g + b``). Its block is
its owner module's, else its reader's.

A model without an attention core has no transformer block. If a join's branch convolves with
a spatial kernel (residual convolutional blocks with projection shortcuts or not, multi-branch
re-parameterisable blocks, depthwise-conv token mixers: ``residual-span``), it is broken
down as a hybrid without attention, its span running from its first such branch to its last
join: what runs before it is its patch embedding proper, the residual branches and the
convolutional work above ``conv``, between them a convolution that keeps its map's resolution
``conv`` (pointwise convs after each residual) and one that downsamples ``patch_embed``,
everything else after the last join ``head``. Any other model (token-mixing MLPs, a plain
chain of layers) stays in ``other``, with a warning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field, replace
from math import prod
from typing import NamedTuple

from torch import nn

from vitprof.core.overrides import (
    Override,
    apply_to_names,
    compile_overrides,
    first_match,
    unrecognized_warnings,
)
from vitprof.core.records import Component as C
from vitprof.core.records import OpRecord, ParamRecord
from vitprof.count.trace import Trace
from vitprof.recognize.graph.attention import Core
from vitprof.recognize.graph.blocks import Blocks, Span, kind, module_blocks
from vitprof.recognize.graph.flow import Flow, gain_modules, norm_modules, vector_norm_modules
from vitprof.recognize.graph.fused import Fused
from vitprof.recognize.rules import blocks as block_rules
from vitprof.recognize.rules import cores as core_rules
from vitprof.recognize.rules import params as param_rules
from vitprof.recognize.rules import positions as position_rules
from vitprof.recognize.rules import records as record_rules
from vitprof.recognize.rules.base import (
    ALL,
    Parameters,
    ParamRule,
    Placement,
    Reading,
    RuleSet,
)
from vitprof.recognize.rules.overrides import OVERRIDE
from vitprof.recognize.rules.params import is_affine, weight_user
from vitprof.recognize.rules.positions import Pending, resolve_positions_by
from vitprof.recognize.rules.records import Placing, RecordRule
from vitprof.recognize.rules.registry import PARAM_ORDER, RECORD_ORDER, check

NO_BLOCKS = "no transformer blocks recognized: is this a Vision Transformer?"
# how resolve_positions_by placed a record the rules left unplaced -> the rule it applied
_RESOLVED = {"producer": position_rules.PRODUCER.name, "neighbour": position_rules.NEIGHBOUR.name}
# the first words of the warning of a placement the data flow alone could not decide
NO_EVIDENCE = "placed without data-flow evidence"
_KEEP_FLOW = (C.NORM, C.TOKENS)  # components that do not pass on along the data flow
_JOINING = ("aten.add", "aten.add_")  # a token-shaped parameter added to the sequence: tokens

# a fused projection's share of a record or parameter: how it is split, the q/k/v share's component
_Share = tuple[Fused, C]


class _ParamRole(NamedTuple):
    """A parameter's component and block, and the rule that placed it."""

    component: C
    block: int | None
    placed_by: str


@dataclass(frozen=True)
class Breakdown:
    """What the graph recognizer decided: the records and parameters relabelled, warnings;
    per record of ``ops``, the index of the counted record it is (or is a share of: a fused
    projection's, :func:`_op_shares`) in ``origins``; the module path of each block found, with
    its index, in ``blocks`` (a module called several times, a block per call: its first
    call's)."""

    ops: tuple[OpRecord, ...]
    params: tuple[ParamRecord, ...]
    warnings: tuple[str, ...]
    origins: tuple[int, ...] = ()
    blocks: Mapping[str, int] = field(default_factory=dict)  # block module path -> index


def _record_placements(at: Placing, fused: Set[int]) -> list[Placement]:
    """Each record's placement: the core rules' (a ``fused`` projection placed as the part
    of it that is no projection: :func:`_fused_shares` shares out its q/k/v), then record by
    record the first of the record rules on to place it (:data:`RECORD_ORDER`), then the
    position rules for the records in blocks left unplaced
    (:func:`~vitprof.recognize.rules.positions.resolve_positions_by`)."""
    flow = at.flow
    at.placed[:] = [None if i in fused else placement for i, placement in
                    enumerate(core_rules.place_cores(at.cores, at.blocks, flow))]
    if core_rules.ATTENTION_MODULE in flow.rules:
        core_rules.ATTENTION_MODULE.place(flow, at.cores, at.blocks, at.placed)
    on = [rule for rule in (*RECORD_ORDER, *flow.rules.added)
          if isinstance(rule, RecordRule) and rule in flow.rules]
    facts = {rule.name: rule.prepare(at) for rule in on}
    for i, step in enumerate(flow.steps):
        if at.placed[i] is None:
            at.placed[i] = next((Placement(component, rule.name) for rule in on
                                 if (component := rule.place(at, i, facts[rule.name]))
                                 is not None), None)
        own = at.component(i)
        passed = own if own is not None and own not in _KEEP_FLOW else None
        at.carried[i] = passed or (at.carried[step.sources[-1]] if step.sources else None)
    pending = [Pending(at.component(i), block, step.sources)
               for i, (block, step) in enumerate(zip(at.blocks.of_step, flow.steps, strict=True))]
    resolved = resolve_positions_by(pending, True, position_rules.PRODUCER in flow.rules,
                                    position_rules.NEIGHBOUR in flow.rules)
    return [placement or Placement(component, _RESOLVED.get(how, ""))
            for placement, (component, how) in zip(at.placed, resolved, strict=True)]


def _param_roles(
    parameters: Mapping[str, nn.Parameter], flow: Flow, placed: Sequence[Placement],
    blocks: Blocks, cores: list[Core], last: int,
) -> dict[str, _ParamRole]:
    """Each parameter read by a record: placed by the first parameter rule on to place it
    (:data:`PARAM_ORDER`), else as the record reading it with the most MACs (the record
    using the weight it computes: a standardised conv weight; :class:`Reading`); its block is
    its owner module's, else its reader's. ``parameters``: the model's, by name."""
    readers: dict[str, int] = {}
    carriers: dict[str, int] = {}
    for i, step in enumerate(flow.steps):
        for name in step.params:
            best = readers.get(name)
            if best is None or flow.steps[i].macs > flow.steps[best].macs:
                readers[name] = i
        for name in step.carried:
            carriers.setdefault(name, i)
    at = Parameters(
        flow, placed, last,
        in_cores={i for core in cores for i in core.steps | core.bias},
        products={i for core in cores for i in core.steps if flow.steps[i].macs},
        shaped={name for name, p in parameters.items() if p.dim() >= 2},
        sizes={name: p.numel() for name, p in parameters.items()})
    on = [rule for rule in (*PARAM_ORDER, *flow.rules.added)
          if isinstance(rule, ParamRule) and rule in flow.rules]
    owning = param_rules.OWN_MODULE in flow.rules
    owner_block = module_blocks(blocks.paths)
    roles: dict[str, _ParamRole] = {}
    for name, p in parameters.items():
        first = readers.get(name, carriers.get(name))
        if first is None:
            continue
        owner, user = name.rpartition(".")[0], weight_user(flow, first)
        affine = is_affine(flow, first, owner, name, at.sizes)
        own = owning and param_rules.OWN_MODULE.owns(user, first, affine)
        reader = first if own else user
        joined = name not in readers or (p.dim() >= 2 and any(
            flow.steps[i].op in _JOINING for i in (first, reader)))
        read = Reading(name, p.dim(), owner, first, user, reader, affine, joined)
        placement = next((found for rule in on
                          if (found := rule.place_parameter(at, read)) is not None),
                         placed[reader])
        block = owner_block(owner)
        if block is None and placement.component is not C.TOKENS:
            block = blocks.of_step[reader]
        roles[name] = _ParamRole(placement.component, block, placement.rule)
    return roles


def _by_class(model: nn.Module, roles: dict[str, _ParamRole]) -> dict[object, C | None]:
    """Per kind of module (the forward its class runs: a subclass that only renames, as
    :func:`vitprof.testing.neutral_names` makes one per module, is its base's kind), the one
    component of the parameters its modules hold that were read, None where they have
    several."""
    seen: dict[object, set[C]] = {}
    for path, module in model.named_modules():
        placed = {roles[f"{path}.{n}" if path else n].component
                  for n, _ in module.named_parameters(recurse=False)
                  if (f"{path}.{n}" if path else n) in roles}
        seen.setdefault(kind(module), set()).update(placed)
    return {kind: next(iter(found)) if len(found) == 1 else None for kind, found in seen.items()}


def _unread(model: nn.Module, parameters: Mapping[str, nn.Parameter],
            roles: dict[str, _ParamRole], rules: RuleSet) -> list[ParamRecord]:
    """Parameters no record read: the component of the modules of their module's class that
    ran (:data:`~vitprof.recognize.rules.params.UNRUN_CLASS`), else the role of a parameter of the
    nearest module that has one (``other`` with the rules switched off); no data flow says
    more: :func:`unread_warnings`. ``parameters``: the model's, by name."""
    records = []
    classes = _by_class(model, roles) if param_rules.UNRUN_CLASS in rules else {}
    for name, p in parameters.items():
        if name in roles:
            continue
        owner = name
        found = None
        while owner and found is None and param_rules.UNREAD in rules:
            owner = owner.rpartition(".")[0]
            prefix = f"{owner}." if owner else ""
            found = next((r for n, r in roles.items() if n.startswith(prefix)), None)
        role, block, _ = found or _ParamRole(C.OTHER, None, "")
        rule = param_rules.UNREAD.name if found else ""
        like = classes.get(kind(model.get_submodule(name.rpartition(".")[0])))
        if like is not None:
            role, rule = like, param_rules.UNRUN_CLASS.name
        records.append(ParamRecord(name, p.numel(), role, block, tuple(p.shape), rule))
    return records


# the evidence each rule placing parameters no record read used
_EVIDENCE = {param_rules.UNRUN_CLASS.name: "placed like the modules of their class that ran",
             param_rules.UNREAD.name: "placed as their nearest module's"}


def unread_warnings(records: Sequence[ParamRecord]) -> tuple[str, ...]:
    """The warnings for parameters no record read (a module that never ran, a mask token its
    module ran without), one per rule that placed them: ``NO_EVIDENCE: <modules>, 0 MACs,
    <params>, <the evidence used> (<components>)``."""
    placed: dict[str, list[ParamRecord]] = {}
    for record in records:
        placed.setdefault(record.placed_by, []).append(record)
    return tuple(_unread_warning(found, _EVIDENCE.get(rule, "left unplaced"))
                 for rule, found in placed.items())


def _unread_warning(records: Sequence[ParamRecord], evidence: str) -> str:
    owners = list(dict.fromkeys(record.name.rpartition(".")[0] or "(root)" for record in records))
    shown = ", ".join(owners[:3]) + (f" and {len(owners) - 3} more" if len(owners) > 3 else "")
    params = sum(record.numel for record in records)
    components = "/".join(sorted({record.component.value for record in records}))
    return (f"{NO_EVIDENCE}: {shown}, 0 MACs, {params:,} params no operation read, "
            f"{evidence} ({components})")


def _relabel(ops: Sequence[OpRecord], trace: Trace, placements: Sequence[Placement],
             of_step: list[int | None], shared: dict[int, _Share]
             ) -> tuple[tuple[OpRecord, ...], tuple[int, ...]]:
    """``ops`` with the graph's placements (components and rules) and blocks; a backward record
    follows its forward owner (one with no known owner keeps the counter's labels). A record
    of a fused projection (``shared``: by forward record), forward or backward, is one record
    per share; with the records, the index in ``ops`` of the one each comes from."""
    relabelled: list[OpRecord] = []
    origins: list[int] = []
    for index, (op, owner) in enumerate(zip(ops, trace.owners, strict=True)):
        placed = op if owner is None else replace(
            op, component=placements[owner].component, block=of_step[owner],
            placed_by=placements[owner].rule)
        parts = _op_shares(placed, *shared[owner]) if owner in shared else (placed,)
        relabelled.extend(parts)
        origins.extend([index] * len(parts))
    return tuple(relabelled), tuple(origins)


def _fused_shares(flow: Flow, cores: list[Core], blocks: Blocks, fused: dict[int, Fused]
                  ) -> tuple[dict[int, _Share], dict[str, _Share]]:
    """How the fused projections are shared out, by record and by parameter (those a fused
    record reads itself: its weight and bias). Their q/k/v share is ``attn_qkv``, ``head`` for
    the core of an attention-pooling head (in no block), as a projection's
    (:func:`~vitprof.recognize.rules.cores.place_cores`)."""
    loose = blocks.loose if core_rules.POOLING_HEAD in flow.rules else frozenset()
    by_step = {i: (fused[i], C.HEAD if k in loose else C.ATTN_QKV)
               for k, core in enumerate(cores) for i in core.qkv if i in fused}
    by_param = {name: share for i, share in by_step.items() for name in flow.steps[i].params}
    return by_step, by_param


def _op_shares(op: OpRecord, fused: Fused, component: C) -> tuple[OpRecord, ...]:
    """``op`` (placed as the rest of a fused projection) as its q/k/v share (``component``) and
    its rest: MACs, vector FLOPs and bytes split by output columns, summing to ``op``'s."""
    if component is op.component:
        return (op,)
    counts = (op.macs, op.vector_flops, op.bytes_read, op.bytes_written)
    qkv, rest = zip(*map(fused.shares, counts), strict=True)
    fields = ("macs", "vector_flops", "bytes_read", "bytes_written")
    return (replace(op, component=component, placed_by=core_rules.FUSED_SHARE.name,
                    **dict(zip(fields, qkv, strict=True))),
            replace(op, **dict(zip(fields, rest, strict=True))))


def _param_shares(record: ParamRecord, share: _Share | None) -> tuple[ParamRecord, ...]:
    """``record``, or for a parameter of a fused projection with a dimension of its output
    width (the weight's rows, the bias), two records of its name: the elements of the q/k/v
    columns (the share's component) and the rest (``record``'s), with their shapes."""
    if share is None or share[1] is record.component or share[0].width not in record.shape:
        return (record,)
    fused, component = share
    axis = record.shape.index(fused.width)
    parts = []
    for columns, placed, rule in zip(fused.shares(fused.width), (component, record.component),
                                     (core_rules.FUSED_SHARE.name, record.placed_by), strict=True):
        shape = (*record.shape[:axis], columns, *record.shape[axis + 1:])
        parts.append(replace(record, numel=prod(shape), component=placed, shape=shape,
                             placed_by=rule))
    return tuple(parts)


def _override(model: nn.Module, flow: Flow, placements: Sequence[Placement],
              params: dict[str, ParamRecord], shared: tuple[dict[int, _Share], dict[str, _Share]],
              overrides: Sequence[Override]) -> tuple[list[Placement], tuple[str, ...]]:
    """``--map`` rules win: parameters they name (or a module holding them), and the records
    reading those parameters or running in modules they name (or under them), placed by
    :data:`~vitprof.recognize.rules.OVERRIDE`. A fused
    projection or parameter a rule reaches is not shared out (dropped from ``shared``)."""
    mapped = apply_to_names([path for path, _ in model.named_modules()], params, overrides)
    rules = compile_overrides(overrides)

    def ruled(name: str) -> C | None:
        return first_match(rules, name) or _nearest(mapped.modules, name.rpartition(".")[0])

    by_step, by_param = shared
    for name, record in params.items():
        rule = ruled(name)
        if rule is not None:
            params[name] = replace(record, component=rule, placed_by=OVERRIDE.name)
            by_param.pop(name, None)
    placed = []
    for i, (placement, step) in enumerate(zip(placements, flow.steps, strict=True)):
        rule = next(filter(None, map(ruled, step.params)), None) or _nearest(
            mapped.modules, step.module)
        if rule is not None:
            by_step.pop(i, None)
            placement = Placement(rule, OVERRIDE.name)
        placed.append(placement)
    return placed, mapped.warnings


def _nearest(modules: dict[str, C], path: str) -> C | None:
    while path:
        if path in modules:
            return modules[path]
        path = path.rpartition(".")[0]
    return None


def _block_span(blocks: Blocks) -> Span:
    """The span of a ViT's blocks: from the first record in a block to the last."""
    inside = [i for i, block in enumerate(blocks.of_step) if block is not None]
    return Span(inside[0], inside[-1])


def _roles(
    model: nn.Module, parameters: Mapping[str, nn.Parameter], flow: Flow, cores: list[Core],
    blocks: Blocks, span: Span, fused: Set[int] = frozenset(),
) -> tuple[list[Placement], dict[str, ParamRecord], tuple[str, ...]]:
    """The placements of the records and the parameters' records, given the blocks and their
    span (with no block at all, a convolutional network's: ``residual-span``); the
    ``fused`` projections as their part that is no projection; the warning for parameters
    never read (:func:`unread_warnings`). ``parameters``: the model's, by name."""
    shaped = {name for name, p in parameters.items() if p.dim() >= 2}
    at = Placing(model, flow, cores, blocks, span, shaped, [None] * len(flow.steps),
                 [None] * len(flow.steps))
    placements = _record_placements(at, fused)
    param_roles = _param_roles(parameters, flow, placements, blocks, cores, span.last)
    params = {name: ParamRecord(name, p.numel(), *param_roles[name][:2], tuple(p.shape),
                                param_roles[name].placed_by)
              for name, p in parameters.items() if name in param_roles}
    unread = _unread(model, parameters, param_roles, flow.rules)
    params.update({record.name: record for record in unread})
    return placements, params, unread_warnings(unread)


def graph_breakdown(
    model: nn.Module, ops: Sequence[OpRecord], trace: Trace, overrides: Sequence[Override] = (),
    rules: RuleSet = ALL,
) -> Breakdown:
    """The components and blocks of ``ops`` (a counted run of ``model`` with its ``trace``) and
    of the parameters of ``model``, read from the data flow by the recognition
    ``rules`` (all unless some are switched off); ``overrides`` (``--map``) win.
    Without an attention core, a convolutional network's parts are placed as a hybrid's; any
    other model's are ``other`` (not a ViT) but what the rules name."""
    parameters = dict(model.named_parameters())  # walked once, read by every step below
    kernels = {name for name, p in parameters.items()
               if p.dim() >= 3 and prod(p.shape[2:]) > 1}
    rules = check(rules)
    norms = {**dict.fromkeys(vector_norm_modules(trace) if record_rules.VECTOR_NORM in rules
                             else (), record_rules.VECTOR_NORM.name),
             **dict.fromkeys(norm_modules(trace) if record_rules.NORM_COMPUTED in rules else (),
                             record_rules.NORM_COMPUTED.name)}
    if record_rules.NORM_GAIN in rules:
        norms = {**dict.fromkeys(gain_modules(trace, norms.keys()), record_rules.NORM_GAIN.name),
                 **norms}
    flow = Flow(trace, norms, kernels, {name: p.numel() for name, p in parameters.items()},
                rules)
    cores = core_rules.find_cores(flow)
    fused = core_rules.FUSED_SHARE.projections(flow, cores) if (
        core_rules.FUSED_SHARE in flow.rules) else {}
    blocks = block_rules.group_blocks(model, flow, cores) if cores else Blocks(
        [None] * len(flow.steps), {}, frozenset())
    span = _block_span(blocks) if cores else block_rules.RESIDUAL_SPAN.span(flow) if (
        block_rules.RESIDUAL_SPAN in flow.rules) else None
    shared = _fused_shares(flow, cores, blocks, fused)
    if span is not None:
        if record_rules.SELECTOR in rules:
            selector = record_rules.SELECTOR
            blocks = selector.selected(blocks, selector.selectors(flow, blocks.of_step, span.last))
        placements, params, unread = _roles(model, parameters, flow, cores, blocks, span,
                                            fused.keys())
        unknown = [name for name, p in params.items() if p.component is C.OTHER]
        warnings = unrecognized_warnings(unknown) + unread
    else:
        placements, params = block_rules.NO_BLOCKS.place(flow, parameters)
        warnings = (NO_BLOCKS,)
    of_step = blocks.of_step
    if overrides and OVERRIDE in rules:
        placements, ruled = _override(model, flow, placements, params, shared, overrides)
        warnings += ruled
    ordered = tuple(record for name in parameters
                    for record in _param_shares(params[name], shared[1].get(name)))
    records, origins = _relabel(ops, trace, placements, of_step, shared[0])
    return Breakdown(records, ordered, warnings, origins, dict(blocks.paths))
