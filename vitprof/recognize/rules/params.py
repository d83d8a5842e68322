"""Parameter rules: the component of each parameter, decided parameter by parameter in the
order of :data:`PARAM_RULES` (the first rule that places a parameter decides); a parameter no
rule places takes the component and the rule of the record reading it. Parameters no record
reads are placed by :data:`UNRUN_CLASS`, else :data:`UNREAD`; :data:`OVERRIDE` (``--map``)
wins over every rule.
"""

from __future__ import annotations

from vitprof.core.records import Component as C
from vitprof.recognize.rules.base import Rule

PARAMETRIZED = Rule(
    "parametrized-weight", tuple(C),
    """A parameter whose records compute, with no MACs, the weight of a product that reads no
    parameter of two or more dimensions itself (a parametrization: ``parametrize``'s
    normalised or standardised weight, ``weight_norm``'s ``g * v / ||v||``) is that product's
    weight: it takes the product's component, never ``tokens``, though a module other than its
    owner reads it.""",
    "the records computing a weight, the parameters the product reading it reads itself",
    "parametrized_block")
PROJECTION_BIAS = Rule(
    "projection-bias", tuple(C),
    """A parameter added to the output of one weighted record, no larger than that output's
    last dimension (a q/k/v bias kept as a (heads, head_dim) tensor and added after the
    projection, in another module than the projection's), is that product's bias: the
    projection searches walk through the add as through a linear's own bias, and the
    parameter takes the product's component, never ``tokens``.""",
    "the add's one source, whether it is weighted, its last dimension, the parameters' sizes",
    "head_bias_block")
SEQUENCE_PARAMETER = Rule(
    "sequence-parameter", (C.TOKENS,),
    """A parameter of two or more dimensions that enters the sequence as a tensor of it is
    ``tokens`` wherever the sequence goes next, in a block or in a core: one carried (through
    free ops: expand, cat) into a product of a core as an operand, not beside it as a bias of
    the scores (memory key/values concatenated to k and v), or computed by records into a weight
    joined so (a memory normalised first); one a record without MACs of another
    module than the parameter's takes as its input (Perceiver latents normed before their
    cross-attention).""",
    "the parameters a record reads or carries as operands, its MACs, the parameter's owner "
    "module and rank", "memory_block")
NORM_AFFINE = Rule(
    "norm-affine", (C.NORM,),
    """A parameter that a norm record run by its own module reads beside the tensor it
    normalises is the norm's affine: it takes that record's component (``norm``), whatever
    its rank and however it is applied, never ``tokens`` (a hand-written channel norm's
    ``(x - mean) / sqrt(var + eps) * g + b`` with ``g`` and ``b`` of shape (1, C, 1, 1): ``b``
    added whole to the map is no position embedding). The parameters and the operations of
    one module land in one component.""",
    "the module running the reader, the parameter's owner module, the reader's first input",
    "hand_norm_block")
OWN_MODULE = Rule(
    "own-module-record", tuple(C),
    """The affine of a norm run by the parameter's own module (a parameter smaller than the
    input normalised) takes the norm's component, never that of the record using what the
    norm computes when it reads no record: a LayerNorm on the raw tiles (the model's input,
    made by no record) before the patch projection, or on learned latents, is ``norm``,
    parameters and op alike.""",
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
OVERRIDE = Rule(
    "override", tuple(C),
    """A ``--map`` rule (a regex and a component) wins over every rule above for the
    parameters and modules it names.""",
    "the user's --map", "mapped_block")

# the order they decide in
PARAM_RULES: tuple[Rule, ...] = (
    PARAMETRIZED, PROJECTION_BIAS, SEQUENCE_PARAMETER, NORM_AFFINE, OWN_MODULE, UNRUN_CLASS,
    UNREAD, OVERRIDE,
)
