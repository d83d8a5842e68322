"""Parameter rules: the component of each parameter a record reads, decided parameter by
parameter in the registry's order (:data:`PARAM_RULES`): the first rule that places a
parameter decides; a parameter no rule places takes the placement of the record reading it
(:class:`Reading`). Parameters no record reads are placed by :data:`UNRUN_CLASS`, else
:data:`UNREAD` (their code: :func:`vitprof.recognize.graph.roles.unread_warnings` and the
reading of the module tree beside it). :data:`TOKENS` places records too (a record rule).
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass
from math import prod
from typing import Any

from vitprof.core.records import Component as C
from vitprof.count.trace import Step
from vitprof.recognize.graph.flow import Flow
from vitprof.recognize.rules.base import Parameters, ParamRule, Placement, Reading, Rule
from vitprof.recognize.rules.flow_checks import PROJECTION_BIAS
from vitprof.recognize.rules.records import Placing, RecordRule


@dataclass(frozen=True)
class _Parametrized(ParamRule):
    def place_parameter(self, at: Parameters, read: Reading) -> Placement | None:
        if not _computes_weight_of(at.flow, read.first, read.user, at.shaped):
            return None
        return Placement(at.placed[read.reader].component, self.name)


@dataclass(frozen=True)
class _NormAffine(ParamRule):
    def place_parameter(self, at: Parameters, read: Reading) -> Placement | None:
        joins = any(rule in at.flow.rules and rule.place_parameter(at, read) is not None
                    for rule in (SEQUENCE_PARAMETER, TOKENS))
        if not (joins and read.affine and read.reader == read.first):
            return None
        return Placement(at.placed[read.reader].component, self.name)


@dataclass(frozen=True)
class _SequenceParameter(ParamRule):
    def place_parameter(self, at: Parameters, read: Reading) -> Placement | None:
        enters = read.dim >= 2 and _enters_sequence(at.flow, read.first, read.name, read.owner,
                                                    at.products)
        return Placement(C.TOKENS, self.name) if enters else None


@dataclass(frozen=True)
class _ConcatenatedParameter(ParamRule):
    def place_parameter(self, at: Parameters, read: Reading) -> Placement | None:
        joining = _concatenated_by(at.flow, read.first, read.name) if read.dim >= 2 else None
        if joining is None or joining in at.products:  # a core's operand: sequence-parameter
            return None
        return Placement(C.HEAD if joining > at.last else C.TOKENS, self.name)


@dataclass(frozen=True)
class _TokenParameter(RecordRule, ParamRule):
    """A record outside blocks reading a parameter of two or more dimensions is ``tokens``;
    a parameter joined to the sequence is ``tokens`` (``head`` after the blocks) unless the
    record consuming it is in a core, weighted or ``conv`` (a conv block's bias or scale)."""

    def place(self, at: Placing, i: int, facts: Any) -> C | None:
        reads = any(name in at.shaped for name in at.flow.steps[i].params)
        return C.TOKENS if reads and not at.in_block(i) else None

    def place_parameter(self, at: Parameters, read: Reading) -> Placement | None:
        reader = read.reader
        if not read.joined or reader in at.in_cores or at.flow.weighted(reader) \
                or at.placed[reader].component is C.CONV:
            return None
        return Placement(C.HEAD if reader > at.last else C.TOKENS, self.name)


@dataclass(frozen=True)
class _OwnModule(ParamRule):
    def owns(self, user: int, first: int, affine: bool) -> bool:
        """The parameter is the affine of a norm its own module runs at ``first``, and
        ``first`` computes a weight that ``user`` uses: it takes the norm's placement."""
        return user != first and affine

    def place_parameter(self, at: Parameters, read: Reading) -> Placement | None:
        own = self.owns(read.user, read.first, read.affine)
        return Placement(at.placed[read.first].component, self.name) if own else None


def _computes_weight_of(flow: Flow, first: int, user: int, shaped: Set[str]) -> bool:
    """Record ``first`` computes, through records without MACs, the weight of the product
    ``user`` (:func:`weight_user`), which reads no parameter of two or more dimensions itself
    (:data:`PARAMETRIZED`: a parametrized linear's weight; learned
    latents normed before a linear reading its own weight are its input, not its weight).
    ``shaped``: the parameters of two or more dimensions."""
    step = flow.steps[user]
    return user != first and flow.weighted(user) and not (
        shaped & {*step.params, *step.carried})


def is_affine(flow: Flow, i: int, owner: str, name: str, sizes: Mapping[str, int]) -> bool:
    """Record ``i`` is a norm run by module ``owner`` and the parameter ``name`` it reads is
    its affine, not the input it normalises (a weight standardisation normalises the conv
    weight itself): smaller than that input, or beside another parameter that is that input
    (a class token normed alone, as large as the norm's weight: a class attention). ``sizes``:
    the elements of each parameter."""
    step = flow.steps[i]
    if not flow.norm(i) or step.module != owner:
        return False
    normalised = _normalised(step, sizes)
    return name != normalised and (normalised is not None or sizes[name] < prod(step.operand)
                                   or _normalises_carried(step, name))


def _normalises_carried(step: Step, name: str) -> bool:
    """The norm ``step`` normalises parameters carried to it through free ops alone (no record
    made its input: a start token's row of an embedding table, looked up by constant indices),
    and reads parameter ``name`` itself: its affine, however large that one token is."""
    return not step.sources and bool(step.carried) and name in step.params


def _normalised(step: Step, sizes: Mapping[str, int]) -> str | None:
    """The parameter a record takes as its first input (the tensor a norm normalises), when no
    record made any of its inputs and none reaches it through free ops: the first parameter
    it reads (parameters are read in the order of the arguments) when as large as that input,
    else None (the model's input, made by no record)."""
    if step.sources or step.carried or not step.params:
        return None
    first = step.params[0]
    return first if sizes[first] == prod(step.operand) else None


def _enters_sequence(flow: Flow, first: int, name: str, owner: str, products: Set[int]) -> bool:
    """The parameter ``name`` (held by module ``owner``), first read by record ``first``, is a
    tensor of the sequence (:data:`SEQUENCE_PARAMETER`): carried
    into one of the cores' ``products`` as an operand, or computed by records into a weight
    that such a product reads joined to activations in one operand (a memory of keys
    normalised, then concatenated to the keys), or the input of a record without MACs run by
    another module than its owner."""
    step = flow.steps[first]
    if first in products:
        return name in step.carried and name not in step.carried_beside
    user = weight_user(flow, first)
    if user in products and flow.joined_weights(user) & flow.descendants(first, user):
        return True
    return not step.macs and step.module != owner and (
        name in step.params or (name in step.carried and flow.norm(first)))


def _concatenated_by(flow: Flow, first: int, name: str) -> int | None:
    """The record that reads the parameter ``name`` (first read by record ``first``)
    concatenated to activations in one operand (:data:`CONCATENATED`), or None: ``first``
    itself when the parameter reaches it so through free ops (a class token expanded and
    concatenated to the patches), or a record reading so what records computed from
    parameters alone, ``first`` among them (a class token plus its row of the position
    table). Records reaching the operand only as indices are no activations joined to it: a
    table gathered at computed offsets (relative positions) is concatenated to nothing; where
    a record reads such indices, which of its operands a parameter shares with activations
    is not known, and it is not taken for concatenated."""
    step = flow.steps[first]
    if name in step.carried_joined:
        return None if step.indexed else first
    stack, seen = [first], set()
    while stack:
        i = stack.pop()
        if i in seen or not flow.weights[i]:
            continue
        seen.add(i)
        for j in flow.consumers[i]:
            indexed = flow.steps[j].indexed
            if any(i in group and not all(flow.weights[k] or k in indexed for k in group)
                   for group in flow.steps[j].joined):
                return j
            stack.append(j)
    return None


def weight_user(flow: Flow, i: int) -> int:
    """The record that uses the weight record ``i`` computes (a standardised conv weight: the
    conv), ``i`` itself when it computes no weight."""
    while flow.weights[i]:
        users = [j for j in flow.consumers[i] if not flow.weights[j]] or flow.consumers[i]
        if not users:
            break
        i = users[0]
    return i


PARAMETRIZED = _Parametrized(
    "parametrized-weight", tuple(C),
    """A parameter whose records compute, with no MACs, the weight of a product that reads no
    parameter of two or more dimensions itself (a parametrization: ``parametrize``'s
    normalised or standardised weight, ``weight_norm``'s ``g * v / ||v||``) is that product's
    weight: it takes the product's component, never ``tokens``, though a module other than its
    owner reads it.""",
    "the records computing a weight, the parameters the product reading it reads itself",
    "parametrized_block")
NORM_AFFINE = _NormAffine(
    "norm-affine", (C.NORM,),
    """A parameter that a norm record run by its own module reads beside the tensor it
    normalises is the norm's affine: it takes that record's component (``norm``), whatever
    its rank and however it is applied, never ``tokens`` (a hand-written channel norm's
    ``(x - mean) / sqrt(var + eps) * g + b`` with ``g`` and ``b`` of shape (1, C, 1, 1): ``b``
    added whole to the map is no position embedding). The parameters and the operations of
    one module land in one component.""",
    "the module running the reader, the parameter's owner module, the reader's first input",
    "hand_norm_block")
SEQUENCE_PARAMETER = _SequenceParameter(
    "sequence-parameter", (C.TOKENS,),
    """A parameter of two or more dimensions that enters the sequence as a tensor of it is
    ``tokens`` wherever the sequence goes next, in a block or in a core: one carried (through
    free ops: expand, cat) into a product of a core as an operand, not beside it as a bias of
    the scores (memory key/values concatenated to k and v), or computed by records into a weight
    joined so (a memory normalised first); one a record without MACs of another
    module than the parameter's takes as its input (learned latents normed before their
    cross-attention), or a norm of another module normalises, carried to it through free ops
    (a row of an embedding table looked up by constant indices: a decoder's start token).""",
    "the parameters a record reads or carries as operands, its MACs, the parameter's owner "
    "module and rank", "memory_block")
CONCATENATED = _ConcatenatedParameter(
    "concatenated-parameter", (C.TOKENS, C.HEAD),
    """A parameter of two or more dimensions concatenated to activations in one operand (a
    class token joined to the patches), through free ops or as what records computed from
    parameters alone (the token plus its row of the position table), is ``tokens``
    (``head`` after the blocks) whatever reads that operand but a core's product
    (``sequence-parameter``), where ``token-parameter`` leaves it to a weighted reader: a
    post-norm block's q/k/v linear, reading the sequence
    first as a pre-norm block's norm does, weights it with its own weight, not with the
    token.""",
    "the operands a record reads joined from several records, which of them computed from "
    "parameters alone", "post_norm_class_token")
TOKENS = _TokenParameter(
    "token-parameter", (C.TOKENS, C.HEAD),
    """A parameter joined to the sequence is ``tokens`` (``head`` after the blocks): outside
    blocks, a record without MACs reading a parameter of two or more dimensions (a class
    token concatenated, a position embedding added) is ``tokens``, and so is a parameter read
    only through free ops, or joined whole (added or concatenated, two or more dimensions),
    unless the record consuming it is in a core, weighted or ``conv``.""",
    "records without MACs reading a parameter, the parameter's rank, how it reaches its first "
    "reader (add, cat, expand)", "plain_block")
OWN_MODULE = _OwnModule(
    "own-module-record", tuple(C),
    """The affine of a norm run by the parameter's own module (a parameter smaller than the
    input normalised) takes the norm's component, never that of the record using what the
    norm computes when it reads no record: a LayerNorm on the raw tiles (the model's input,
    made by no record) before the patch projection, or on learned latents, or on parameters
    carried to it through free ops alone (a start token looked up in an embedding table, one
    token as large as the norm's weight), is ``norm``, parameters and op alike.""",
    "the module running the reader, the parameter's owner module, its size and the input's",
    "raw_norm_net")
UNRUN_CLASS = Rule(
    "unread-like-its-class", tuple(C),
    """A parameter no record reads (its module never ran, or ran without it) takes the
    component of the parameters that were read of the modules of its class (the forward they
    run), when they all have one (a LayerNorm left unused is ``norm``); no data flow says more,
    so the breakdown warns "placed without data-flow evidence" with those modules, 0 MACs,
    their parameters and the evidence used.""",
    "the module tree: the classes of the modules, the parameters read", "unrun_norm")
UNREAD = Rule(
    "unread-parameter", tuple(C),
    """A parameter no record reads that ``unread-like-its-class`` does not place takes the
    component of a parameter of the nearest module holding one that was read; no data flow
    says more, so the breakdown warns "placed without data-flow evidence" with those modules,
    0 MACs, their parameters and the evidence used.""",
    "the module tree", "unread_param")

# the order they decide in
PARAM_RULES: tuple[Rule, ...] = (
    PARAMETRIZED, PROJECTION_BIAS, NORM_AFFINE, SEQUENCE_PARAMETER, TOKENS, CONCATENATED,
    OWN_MODULE, UNRUN_CLASS, UNREAD,
)
