"""The recognition rules: every decision that places a record or a parameter, by name.

Each :class:`Rule` has a short stable name (kebab-case), the components it can place, what it
reads in the data flow, and the fixture of ``tests/recognition_fixtures.py`` that shows it: a
tiny model with neutral names whose breakdown changes when the rule is switched off. The code of
each decision stays where it runs (:mod:`.attention`, :mod:`.blocks`, :mod:`.roles`,
:mod:`.fused`, :func:`vitprof.count.counter.resolve_positions`); it asks its rule
:attr:`Rule.on` before it decides and writes the rule's name into the ``placed_by`` of what it
placed. :data:`RULES` lists them in the order they decide; ``docs/recognition.md`` is generated
from it (:func:`recognition_page`). :func:`disabled` switches rules off, for tests only: a
switched-off rule decides nothing and later rules place what it would have.

No rule reads a name: structure comes from the computation and the module tree (which module
holds which), never from what a module, parameter or class is called. Records a library table
placed (a fact about classes it detects by type) say the table's name (``timm_vit``, ...), and
those a ``--map`` rule placed say :data:`OVERRIDE`. A parameter
read by a record says the rule of the record reading it with the most MACs, the component it
takes; one joined to the sequence says :data:`TOKENS`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from vitprof.core.records import Component as C

_OFF: set[str] = set()  # names of the rules switched off by :func:`disabled`


@dataclass(frozen=True)
class Rule:
    """One recognition decision: ``name`` (what ``placed_by`` says), the ``components`` it can
    place, the rule in terms of the data flow (``doc``), what it reads (``reads``) and the
    ``fixture`` showing it."""

    name: str
    components: tuple[C, ...]
    doc: str
    reads: str
    fixture: str

    @property
    def on(self) -> bool:
        """The rule decides (it is not switched off by :func:`disabled`)."""
        return self.name not in _OFF


RULES: dict[str, Rule] = {}


def _rule(name: str, components: tuple[C, ...], doc: str, reads: str, fixture: str) -> Rule:
    if name in RULES:
        raise ValueError(f"recognition rule {name} defined twice")
    RULES[name] = Rule(name, components, " ".join(doc.split()), reads, fixture)
    return RULES[name]


@contextmanager
def disabled(*names: str) -> Iterator[None]:
    """Switch the rules ``names`` off inside the ``with`` (tests only: removing a rule must
    change its fixture's breakdown)."""
    unknown = [name for name in names if name not in RULES]
    if unknown:
        raise KeyError(f"no recognition rule {', '.join(unknown)}")
    before = set(_OFF)
    _OFF.update(names)
    try:
        yield
    finally:
        _OFF.clear()
        _OFF.update(before)


# ----------------------------------------------------------------------------- attention cores

FUSED_CORE = _rule(
    "fused-attention-op", (C.ATTN_CORE,),
    """A fused attention op (scaled-dot-product or flex attention) is an attention core on its
    own.""",
    "the op of a record", "sdpa_block")
CORE_PRODUCT = _rule(
    "core-product", (C.ATTN_CORE,),
    """A product of two activations (no parameter read) that feeds, through records mapping
    its scores (scaling, mask, softmax, talking-heads), a second product of two activations is
    an attention core: every record on that path is ``attn_core`` (softmax(QK^T)V and
    Q(K^TV) alike).""",
    "MACs without a parameter read, the consumers between two such products", "plain_block")
STREAM_BOUND = _rule(
    "core-within-residual", (C.ATTN_CORE,),
    """The path from a core's first product to its second never crosses a residual add of the
    stream (a join one of whose arms is its fork itself, ``x + f(x)``): kernelised attention's
    last product (phi(Q) (phi(K)^T V), a random-feature buffer making its features) maps no
    scores into the next block's q/k/v linears through the output projection and the
    residual; a bias made from q added to the scores (both arms computed) is crossed.""",
    "the joins between two free products, whether one arm is the fork itself",
    "random_feature_block")
SINGLE_KEY = _rule(
    "single-key-product", (C.ATTN_CORE,),
    """A product of two activations whose scores, through records mapping them, reach an
    element-wise multiply of two activations with more elements than the scores (the scores
    spread over the values' features: a product over one key, as ``einsum`` runs a
    contraction of one) is an attention core, that multiply its second product: q k^T over a
    single key is ``attn_core`` (a regional attention over one region token).""",
    "element-wise multiplies reached from a free product's scores, their output size",
    "single_key_block")
SOFTMAX_WEIGHTED = _rule(
    "softmax-weighted-product", (C.ATTN_CORE,),
    """A product of two activations that feeds no second product is an attention core on its
    own when one of its operands is a softmax, reached through at most 8 records without MACs
    nor parameters (outlook attention: weights made by a linear, normalised, one product with
    the values). A product of two projections (q k^T) reaches no softmax.""",
    "the sources of a free product back to a softmax, through records without MACs",
    "softmax_mix_block")
AGGREGATION = _rule(
    "aggregation-core", (C.ATTN_CORE,),
    """Attention without a product of two activations: an element-wise multiply of two
    activations, one of them normalised weights (a softmax or a division), reduced by a sum
    over the tokens, the reduced context multiplying a third activation broadcast back over
    what was reduced (additive and separable attention). The records from the multiply to
    that last multiply are the core.""",
    "element-wise multiplies without parameters, a softmax or division among their sources, "
    "a smaller sum consuming them, a larger multiply after it", "additive_block")
PRICED_IN_PARTS = _rule(
    "priced-in-parts", (C.ATTN_QKV, C.ATTN_CORE, C.ATTN_PROJ),
    """A fused op priced in parts (``_native_multi_head_attention``) names each part's
    component itself: its in-projection ``attn_qkv``, its products ``attn_core``, its
    out-projection ``attn_proj``.""",
    "the op's own formula", "mha_block")
JOINED_OPERAND = _rule(
    "joined-parameter-operand", (C.ATTN_CORE,),
    """A parameter concatenated to activations in one operand (learned memory key/values
    joined to the keys and values, then a plain matmul) extends the sequence, it weights
    nothing: a product whose operands are activations, one of them extended so, is still a
    product of two activations (``core-product`` reads it), whatever the parameter's layout
    and whether records computed it first (a memory normalised, then concatenated: a weight
    joined to activations in one operand weights nothing either). A parameter reaching a
    product alone (expanded or repeated, no activation beside it) still weights it.""",
    "per operand of a product, the parameters it carries and whether a record wrote it too",
    "memory_matmul_block")
ADDED_TERM = _rule(
    "added-term-beside-product", (C.ATTN_CORE,),
    """A product that adds a term to what it multiplies (``baddbmm``, ``addmm``: ``bias + a @
    b``) reads that term beside its two operands: a parameter reaching it only there (a
    relative-position bias table indexed, then added to the scores by the product that makes
    them) weights nothing, and the product is still one of two activations (``core-product``
    reads it); the table is the core's, as the scores' bias.""",
    "per product, the parameters reaching its added term apart from its two operands",
    "window_bias_block")
QKV = _rule(
    "qkv-feeds-core", (C.ATTN_QKV,),
    """The first weighted records upstream of a core's operands, walking through records
    without MACs that read no parameter but a norm's or a linear's own bias, never through a
    join, are its q/k/v projections.""",
    "the sources of the core's products, back to the first weighted records", "plain_block")
FEEDS_QKV = _rule(
    "feeds-only-qkv", (C.ATTN_QKV,),
    """A weighted record whose output reaches nothing but a core's q/k/v projections (through
    records without MACs, no join: a convolution of the token map before the q, k and v
    linears, a spatial reduction before k and v) is one of those projections' input, a
    q/k/v projection too.""",
    "the consumers of the records upstream of the q/k/v projections", "conv_qkv_block")
GATE = _rule(
    "gate-beside-core", (C.ATTN_QKV,),
    """A weighted record that does not feed the core but whose output meets the core's on
    the way to its output projection (through records without MACs: a sigmoid gate times the
    attention's output, additive attention's keys times the pooled query) is an input
    projection of the attention beside q/k/v.""",
    "the other sources of the records passed by proj-after-core, back to weighted records",
    "gated_block")
PROJ = _rule(
    "proj-after-core", (C.ATTN_PROJ,),
    """The first weighted records downstream of a core's output, before a residual join, are
    its output projections.""",
    "the consumers of the core's output, up to the first weighted records", "plain_block")
NEXT_QKV = _rule(
    "next-core-qkv", (C.ATTN_QKV,),
    """A weighted record that is a core's q/k/v projection (``qkv-feeds-core``) is no output
    projection of an earlier core whose output reaches it first: a core without an output
    projection, its output read (through a norm) by the next attention's q/k/v linear (a
    patch merger: learned queries over the tokens, the merged tokens straight into the next
    block), keeps none.""",
    "the q/k/v projections of every core, the output projections of the others",
    "merger_net")
PASSED = _rule(
    "between-projection-and-core", (C.ATTN_CORE,),
    """The records without MACs passed on the way from the q/k/v projections to the core's
    products, or from them to the output projection (q scaling, rotary, head merging; norms
    aside), are the core's.""",
    "the records walked through by qkv-feeds-core and proj-after-core", "plain_block")
SCORE_BIAS = _rule(
    "score-bias", (C.ATTN_CORE,),
    """The records in the core's module that make what is added beside its operands (a bias or
    a mask of the scores), weighted or not, are the core's.""",
    "the records upstream of a core's non-operand inputs, inside its module", "bias_block")
QUERY_TERM = _rule(
    "score-term-from-query", (C.ATTN_CORE,),
    """The records on a path from a core's q/k/v projections to what it reads beside its
    operands (a term added to the scores computed from q: decomposed relative positions, q
    times a table of offsets along each axis, as SAM and MViTv2 add them) are the core's,
    whatever module runs them: the core may run in a module of its own, the term beside it.""",
    "the records between the core's q/k/v projections and its non-operand inputs",
    "query_term_block")
ATTENTION_MODULE = _rule(
    "inside-attention-module", (C.ATTN_QKV, C.ATTN_PROJ),
    """The attention module is the innermost module holding a core's records and its q/k/v
    and output projections. Weighted records left unplaced that run inside it, below the
    core's block, are projections too: ``attn_qkv`` when the core depends on them,
    ``attn_proj`` when they depend on the core (a spatial reduction before the k/v
    projection).""",
    "the module tree: the innermost module holding the core and its projections; whether "
    "the core depends on the record", "reduced_kv_block")
FUSED_SHARE = _rule(
    "fused-projection-share", (C.ATTN_QKV,),
    """A q/k/v projection whose output is split into parts some of which never reach the core
    (ViT-22B's fused in_proj) is shared out by output columns: the columns reaching the core
    are ``attn_qkv``, the rest is placed as a record that is no projection.""",
    "the column slices of the projection's output and which of them reach the core",
    "fused_block")
JOINED_SPAN = _rule(
    "joined-span-block", tuple(C),
    """A block holding a single core is the innermost module holding that core and the
    residual adds of its stream (adds after the core reading the block's input, or an earlier
    such add, before the next core) run inside it: a stage of one block is not the block, its
    downsampling before or after the block's residual span is no part of it.""",
    "the module tree below the block, the residual adds after the core and their modules",
    "one_block_stages")
RESIDUAL_SEGMENT = _rule(
    "residual-segment-block", tuple(C),
    """A block is its residual stream, not only its module: the residual segments after the
    block's module (adds reading the stream, each an earlier one's output), before the next
    block or core, whose branches neither mix tokens (a spatial convolution) nor hold a core,
    are the block's: the feed-forward of a layer that one module runs from parallel lists
    (``for a, f in zip(attns, ffs): x = a(norm(x)) + x; x = f(norm(x)) + x``).""",
    "the residual adds after a block's records, their sources, the kernels in their branches",
    "parallel_lists")
RESIDUAL_STACK = _rule(
    "residual-attention-block", (C.ATTN_QKV, C.ATTN_CORE, C.ATTN_PROJ, C.MLP),
    """A core outside the lists of blocks, after them, whose output is added back to what it
    attends over (an add after the core reads a record, or a parameter, that the core's
    operands come from: a class token's residual stream) is a block of a later stack (a
    class-attention stage); only one whose output is not added back (an attention-pooling
    head) is left to ``pooling-head-attention``.""",
    "adds after the core, their sources and parameters, the records and parameters before it",
    "class_attention")
POOLING_HEAD = _rule(
    "pooling-head-attention", (C.HEAD,),
    """A core outside the list of blocks, after the last of them (an attention-pooling head),
    is in no block: its projections are ``head``. Every attention pool is one: a learned query
    over the tokens (timm's attention-pooling heads) as a linear scoring each token, a softmax
    over the tokens and their sum so weighted (CCT's sequence pooling, the
    ``softmax-weighted-product`` core); its products stay ``attn_core``, in no block, the
    records that make and mix its weights ``head``.""",
    "the module tree: the core's module is in no list of blocks, and runs after them",
    "pooling_head")

# ----------------------------------------------------------------------------- inside blocks

NORM = _rule(
    "norm-op", (C.NORM,),
    """A fused normalisation op (layer, batch, group, instance or RMS norm) is ``norm``.""",
    "the op of a record", "plain_block")
NORM_COMPUTED = _rule(
    "norm-by-computation", (C.NORM,),
    """The records of a module that normalises by what it computes are ``norm``: its own
    records have no MACs and reduce a mean (or variance) of which they take a square root
    (an RMSNorm written as pow, mean, rsqrt and a multiply by its own weight).""",
    "the ops of the records a module runs itself, their MACs", "rms_block")
VECTOR_NORM = _rule(
    "norm-by-vector-norm", (C.NORM,),
    """The records of a module that normalises by a vector norm are ``norm``: its own records
    have no MACs, take the vector norm of a tensor a record computed and divide by it (an
    RMSNorm or ScaleNorm written as ``F.normalize(x) * scale * g``, l2-normalised q and k in a
    module of their own, a global response normalisation), as the same model with a LayerNorm
    places its norms.""",
    "the ops of the records a module runs itself, their MACs and sources", "vector_norm_block")
NORM_GAIN = _rule(
    "norm-with-outer-gain", (C.NORM,),
    """The records of a module that runs a norm and applies a gain to its output itself are
    ``norm``: under it, only norm records and records of its own without MACs reading what
    runs under it, the norm's output and a parameter among them (a LayerNorm without affine
    and ``* gamma`` beside it), as a LayerNorm with its own affine places them.""",
    "the records under a module, their ops, MACs, sources and parameters", "vector_norm_block")
TOKEN_MIXER = _rule(
    "token-mixer-conv", (C.CONV,),
    """In a block, a child unit feeding the block's first core with a spatial convolution, or
    one after it made of spatial convolutions alone, mixes tokens: ``conv``.""",
    "convolution weights with more than one tap, the block's child modules", "mixer_block")
IN_BLOCK = _rule(
    "weighted-in-block", (C.MLP,),
    """A weighted record in a block that no attention rule placed is ``mlp``.""",
    "MACs reading a parameter, the block of the record", "plain_block")
PRODUCER = _rule(
    "producer", tuple(C),
    """A record without weights takes the component of the record producing its input,
    looking through norms (``x + attn(x)`` is ``attn_proj``).""",
    "the sources of the record", "parallel_block")
NEIGHBOUR = _rule(
    "block-neighbour", tuple(C),
    """A record in a block whose producers have no component takes that of the record before
    it in the block, else of the one after it.""",
    "the order of the block's records", "neighbour_block")
SELECTOR = _rule(
    "token-selector", (C.MLP,),
    """Records outside blocks whose results reach a block only as indices (a topk's indices
    gathering the tokens), a weighted one among them, are in that block: its weighted records
    ``mlp``.""",
    "which inputs of a block's records are indices", "selector_block")

QUERY_SELECTION = _rule(
    "query-selection-head", (C.HEAD,),
    """A token selector (``token-selector``'s records) whose scored tokens, or what they are
    computed from back to the last block's output, the block it reaches also reads by their
    values (a decoder selecting its queries from the encoder's output by a linear or MLP score
    and top-k, then attending over all of that output) is head-like work between two stacks,
    in no block: its records take the rules outside blocks (its weighted ones ``head``, as a
    head scoring tokens after the blocks is).""",
    "the sources of the selector's records back to the last block, the sources of the first "
    "block it reaches", "query_selection")

# ----------------------------------------------------------------------------- outside blocks

POOLED_SKIP = _rule(
    "pooled-skip-join", (C.CONV,),
    """An add whose skip arm is the fork pooled (one record without MACs reading only the
    fork: ``pool(x) + f(x)``, a downsampling block's shortcut) is a residual join, as the
    fork itself or the fork scaled by a parameter is.""",
    "the arms of an add back to their fork, the op of a one-record arm", "pooled_skip_block")
RESIDUAL_BRANCH = _rule(
    "residual-branch-conv", (C.CONV,),
    """The records of a residual join's branch outside blocks (before the last block, or
    after it when the branch convolves with a spatial kernel) are ``conv``.""",
    "residual joins outside blocks and their branches", "conv_stem_block")
SKIPLESS = _rule(
    "skipless-conv-block", (C.CONV,),
    """Records outside blocks in a module of the kind of a convolutional block whose forward
    runs a residual add (the same forward code, whatever the class holding it), run without
    its skip, are ``conv``.""",
    "the module tree: modules whose forward code elsewhere runs a residual join",
    "skipless_block")
MAP_CONV = _rule(
    "map-conv", (C.CONV,),
    """Outside blocks and the patch embedding proper, a spatial convolution that keeps its
    map's resolution, and the pointwise convolutions at that resolution in one unit with it,
    are ``conv``.""",
    "convolution kernels, input and output map sizes, the unit holding the records",
    "map_conv_block")
AFTER_BLOCKS = _rule(
    "after-last-block-head", (C.HEAD,),
    """A record after the last block's last record, in no convolutional block, is ``head``.""",
    "the position of the record after the blocks", "plain_block")
ACTIVATION_WITH_CONV = _rule(
    "activation-with-conv", (C.CONV,),
    """After the blocks, a weightless record run in the module holding the ``conv`` record
    feeding it (its activation) is ``conv``.""",
    "the record's producer and the module holding it", "final_conv_block")
WEIGHTED_OUTSIDE = _rule(
    "weighted-before-blocks", (C.PATCH_EMBED,),
    """A weighted record before or between the blocks, no convolution on a map, is
    ``patch_embed`` (a stem, a patch merging).""",
    "MACs reading a parameter before the last block", "plain_block")
POSITION_TABLE = _rule(
    "parameter-only-table", (C.TOKENS,),
    """Outside blocks, the records that compute a table from parameters alone (no input data
    reaches them: a position table resized, spatial and temporal tables summed) and the add
    joining that table to the activations are ``tokens``, as the tables are, whatever the rank
    of each table.""",
    "records computing from parameters only, the add consuming them and its other source",
    "position_tables")
POINTWISE = _rule(
    "pointwise-on-map", (C.CONV,),
    """In a convolutional network without attention, a convolution within the residual span
    that keeps its map's resolution is ``conv``.""",
    "the span of residual joins, the input and output map sizes", "resnet_like")
STEM_DEFAULT = _rule(
    "before-any-component", (C.PATCH_EMBED,),
    """A weightless record outside blocks with no placed producer (the input's reshaping
    into patches) is ``patch_embed``.""",
    "the record's producers", "plain_block")
RESIDUAL_SPAN = _rule(
    "residual-span", (C.PATCH_EMBED, C.CONV, C.HEAD),
    """A model without an attention core whose joins' branches convolve with a spatial kernel
    is a convolutional network: its span runs from the first such branch to the last join;
    before it is patch embedding, after it head.""",
    "residual joins and whether their branches convolve", "resnet_like")
NO_BLOCKS = _rule(
    "no-blocks", (C.OTHER,),
    """A model with neither an attention core nor a convolutional residual span is no ViT:
    everything is ``other``, with a warning.""",
    "nothing found by the rules above", "mixer_only")

# ----------------------------------------------------------------------------- parameters

TOKENS = _rule(
    "token-parameter", (C.TOKENS, C.HEAD),
    """A parameter joined to the sequence is ``tokens`` (``head`` after the blocks): outside
    blocks, a record without MACs reading a parameter of two or more dimensions (a class
    token concatenated, a position embedding added) is ``tokens``, and so is a parameter read
    only through free ops, or joined whole (added or concatenated, two or more dimensions),
    unless the record consuming it is in a core, weighted or ``conv``.""",
    "records without MACs reading a parameter, the parameter's rank, how it reaches its first "
    "reader (add, cat, expand)", "plain_block")
SEQUENCE_PARAMETER = _rule(
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
PARAMETRIZED = _rule(
    "parametrized-weight", tuple(C),
    """A parameter whose records compute, with no MACs, the weight of a product that reads no
    parameter of two or more dimensions itself (a parametrization: ``parametrize``'s
    normalised or standardised weight, ``weight_norm``'s ``g * v / ||v||``) is that product's
    weight: it takes the product's component, never ``tokens``, though a module other than its
    owner reads it.""",
    "the records computing a weight, the parameters the product reading it reads itself",
    "parametrized_block")
PROJECTION_BIAS = _rule(
    "projection-bias", tuple(C),
    """A parameter added to the output of one weighted record, no larger than that output's
    last dimension (a q/k/v bias kept as a (heads, head_dim) tensor and added after the
    projection, in another module than the projection's), is that product's bias: the
    projection searches walk through the add as through a linear's own bias, and the
    parameter takes the product's component, never ``tokens``.""",
    "the add's one source, whether it is weighted, its last dimension, the parameters' sizes",
    "head_bias_block")
OWN_MODULE = _rule(
    "own-module-record", tuple(C),
    """The affine of a norm run by the parameter's own module (a parameter smaller than the
    input normalised) takes the norm's component, never that of the record using what the
    norm computes when it reads no record: a LayerNorm on the raw tiles (the model's input,
    made by no record) before the patch projection, or on learned latents, is ``norm``,
    parameters and op alike.""",
    "the module running the reader, the parameter's owner module, its size and the input's",
    "raw_norm_net")
NORM_AFFINE = _rule(
    "norm-affine", (C.NORM,),
    """A parameter that a norm record run by its own module reads beside the tensor it
    normalises is the norm's affine: it takes that record's component (``norm``), whatever
    its rank and however it is applied, never ``tokens`` (a hand-written channel norm's
    ``(x - mean) / sqrt(var + eps) * g + b`` with ``g`` and ``b`` of shape (1, C, 1, 1): ``b``
    added whole to the map is no position embedding). The parameters and the operations of
    one module land in one component.""",
    "the module running the reader, the parameter's owner module, the reader's first input",
    "hand_norm_block")
UNRUN_CLASS = _rule(
    "unread-like-its-class", tuple(C),
    """A parameter no record reads (its module never ran, or ran without it) takes the
    component of the parameters that were read of the modules of its class (the forward they
    run), when they all have one (a LayerNorm left unused is ``norm``); no data flow says more,
    so the breakdown warns "placed without data-flow evidence" with those modules, 0 MACs,
    their parameters and the evidence used.""",
    "the module tree: the classes of the modules, the parameters read", "unrun_norm")
UNREAD = _rule(
    "unread-parameter", tuple(C),
    """A parameter no record reads that ``unread-like-its-class`` does not place takes the
    component of a parameter of the nearest module holding one that was read; no data flow
    says more, so the breakdown warns "placed without data-flow evidence" with those modules,
    0 MACs, their parameters and the evidence used.""",
    "the module tree", "unread_param")

OVERRIDE = _rule(
    "override", tuple(C),
    """A ``--map`` rule (a regex and a component) wins over every rule above for the
    parameters and modules it names.""",
    "the user's --map", "mapped_block")
