"""Record rules: the component of each record the core rules left unplaced, decided record by
record in the order of :data:`RECORD_RULES` (the first rule that places a record decides).
"""

from __future__ import annotations

from vitprof.core.records import Component as C
from vitprof.recognize.rules.base import Rule

NORM_COMPUTED = Rule(
    "norm-by-computation", (C.NORM,),
    """The records of a module that normalises by what it computes are ``norm``: its own
    records have no MACs and reduce a mean (or variance) of which they take a square root
    (an RMSNorm written as pow, mean, rsqrt and a multiply by its own weight).""",
    "the ops of the records a module runs itself, their MACs", "rms_block")
VECTOR_NORM = Rule(
    "norm-by-vector-norm", (C.NORM,),
    """The records of a module that normalises by a vector norm are ``norm``: its own records
    have no MACs, take the vector norm of a tensor a record computed and divide by it (an
    RMSNorm or ScaleNorm written as ``F.normalize(x) * scale * g``, l2-normalised q and k in a
    module of their own, a global response normalisation), as the same model with a LayerNorm
    places its norms.""",
    "the ops of the records a module runs itself, their MACs and sources", "vector_norm_block")
NORM_GAIN = Rule(
    "norm-with-outer-gain", (C.NORM,),
    """The records of a module that runs a norm and applies a gain to its output itself are
    ``norm``: under it, only norm records and records of its own without MACs reading what
    runs under it, the norm's output and a parameter among them (a LayerNorm without affine
    and ``* gamma`` beside it), as a LayerNorm with its own affine places them.""",
    "the records under a module, their ops, MACs, sources and parameters", "vector_norm_block")
NORM = Rule(
    "norm-op", (C.NORM,),
    """A fused normalisation op (layer, batch, group, instance or RMS norm) is ``norm``.""",
    "the op of a record", "plain_block")
TOKEN_MIXER = Rule(
    "token-mixer-conv", (C.CONV,),
    """In a block, a child unit feeding the block's first core with a spatial convolution, or
    one after it made of spatial convolutions alone, mixes tokens: ``conv``.""",
    "convolution weights with more than one tap, the block's child modules", "mixer_block")
SELECTOR = Rule(
    "token-selector", (C.MLP,),
    """Records outside blocks whose results reach a block only as indices (a topk's indices
    gathering the tokens), a weighted one among them, are in that block: its weighted records
    ``mlp``.""",
    "which inputs of a block's records are indices", "selector_block")
IN_BLOCK = Rule(
    "weighted-in-block", (C.MLP,),
    """A weighted record in a block that no attention rule placed is ``mlp``.""",
    "MACs reading a parameter, the block of the record", "plain_block")
SKIPLESS = Rule(
    "skipless-conv-block", (C.CONV,),
    """Records outside blocks in a module of the kind of a convolutional block whose forward
    runs a residual add (the same forward code, whatever the class holding it), run without
    its skip, are ``conv``.""",
    "the module tree: modules whose forward code elsewhere runs a residual join",
    "skipless_block")
RESIDUAL_BRANCH = Rule(
    "residual-branch-conv", (C.CONV,),
    """The records of a residual join's branch outside blocks (before the last block, or
    after it when the branch convolves with a spatial kernel) are ``conv``.""",
    "residual joins outside blocks and their branches", "conv_stem_block")
MAP_CONV = Rule(
    "map-conv", (C.CONV,),
    """Outside blocks and the patch embedding proper, a spatial convolution that keeps its
    map's resolution, and the pointwise convolutions at that resolution in one unit with it,
    are ``conv``.""",
    "convolution kernels, input and output map sizes, the unit holding the records",
    "map_conv_block")
QUERY_SELECTION = Rule(
    "query-selection-head", (C.HEAD,),
    """A token selector (``token-selector``'s records) whose scored tokens, or what they are
    computed from back to the last block's output, the block it reaches also reads by their
    values (a decoder selecting its queries from the encoder's output by a linear or MLP score
    and top-k, then attending over all of that output) is head-like work between two stacks,
    in no block: its records take the rules outside blocks (its weighted ones ``head``, as a
    head scoring tokens after the blocks is).""",
    "the sources of the selector's records back to the last block, the sources of the first "
    "block it reaches", "query_selection")
ACTIVATION_WITH_CONV = Rule(
    "activation-with-conv", (C.CONV,),
    """After the blocks, a weightless record run in the module holding the ``conv`` record
    feeding it (its activation) is ``conv``.""",
    "the record's producer and the module holding it", "final_conv_block")
AFTER_BLOCKS = Rule(
    "after-last-block-head", (C.HEAD,),
    """A record after the last block's last record, in no convolutional block, is ``head``.""",
    "the position of the record after the blocks", "plain_block")
POINTWISE = Rule(
    "pointwise-on-map", (C.CONV,),
    """In a convolutional network without attention, a convolution within the residual span
    that keeps its map's resolution is ``conv``.""",
    "the span of residual joins, the input and output map sizes", "resnet_like")
WEIGHTED_OUTSIDE = Rule(
    "weighted-before-blocks", (C.PATCH_EMBED,),
    """A weighted record before or between the blocks, no convolution on a map, is
    ``patch_embed`` (a stem, a patch merging).""",
    "MACs reading a parameter before the last block", "plain_block")
POSITION_TABLE = Rule(
    "parameter-only-table", (C.TOKENS,),
    """Outside blocks, the records that compute a table from parameters alone (no input data
    reaches them: a position table resized, spatial and temporal tables summed) and the add
    joining that table to the activations are ``tokens``, as the tables are, whatever the rank
    of each table.""",
    "records computing from parameters only, the add consuming them and its other source",
    "position_tables")
TOKENS = Rule(
    "token-parameter", (C.TOKENS, C.HEAD),
    """A parameter joined to the sequence is ``tokens`` (``head`` after the blocks): outside
    blocks, a record without MACs reading a parameter of two or more dimensions (a class
    token concatenated, a position embedding added) is ``tokens``, and so is a parameter read
    only through free ops, or joined whole (added or concatenated, two or more dimensions),
    unless the record consuming it is in a core, weighted or ``conv``.""",
    "records without MACs reading a parameter, the parameter's rank, how it reaches its first "
    "reader (add, cat, expand)", "plain_block")

# the order they decide in
RECORD_RULES: tuple[Rule, ...] = (
    NORM_COMPUTED, VECTOR_NORM, NORM_GAIN, NORM, TOKEN_MIXER, SELECTOR, IN_BLOCK, SKIPLESS,
    RESIDUAL_BRANCH, MAP_CONV, QUERY_SELECTION, ACTIVATION_WITH_CONV, AFTER_BLOCKS, POINTWISE,
    WEIGHTED_OUTSIDE, POSITION_TABLE, TOKENS,
)
