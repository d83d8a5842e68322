"""Core rules: what an attention core is, and which records around it are its q/k/v and
output projections. Their code runs where the cores are found
(:func:`vitprof.recognize.graph.attention.find_cores`, :mod:`vitprof.recognize.graph.flow`,
:mod:`vitprof.recognize.graph.fused`), which asks the :class:`~.base.RuleSet` it is given
whether each is on; :data:`CORE_RULES` places a core's records in its order.
"""

from __future__ import annotations

from dataclasses import dataclass

from vitprof.core.records import Component as C
from vitprof.recognize.rules.base import Parameters, ParamRule, Placement, Reading, Rule

PRICED_IN_PARTS = Rule(
    "priced-in-parts", (C.ATTN_QKV, C.ATTN_CORE, C.ATTN_PROJ),
    """A fused op priced in parts (``_native_multi_head_attention``) names each part's
    component itself: its in-projection ``attn_qkv``, its products ``attn_core``, its
    out-projection ``attn_proj``.""",
    "the op's own formula", "mha_block")
FUSED_CORE = Rule(
    "fused-attention-op", (C.ATTN_CORE,),
    """A fused attention op (scaled-dot-product or flex attention) is an attention core on its
    own.""",
    "the op of a record", "sdpa_block")
CORE_PRODUCT = Rule(
    "core-product", (C.ATTN_CORE,),
    """A product of two activations (no parameter read) that feeds, through records mapping
    its scores (scaling, mask, softmax, talking-heads), a second product of two activations is
    an attention core: every record on that path is ``attn_core`` (softmax(QK^T)V and
    Q(K^TV) alike).""",
    "MACs without a parameter read, the consumers between two such products", "plain_block")
STREAM_BOUND = Rule(
    "core-within-residual", (C.ATTN_CORE,),
    """The path from a core's first product to its second never crosses a residual add of the
    stream (a join one of whose arms is its fork itself, ``x + f(x)``): kernelised attention's
    last product (phi(Q) (phi(K)^T V), a random-feature buffer making its features) maps no
    scores into the next block's q/k/v linears through the output projection and the
    residual; a bias made from q added to the scores (both arms computed) is crossed.""",
    "the joins between two free products, whether one arm is the fork itself",
    "random_feature_block")
SINGLE_KEY = Rule(
    "single-key-product", (C.ATTN_CORE,),
    """A product of two activations whose scores, through records mapping them, reach an
    element-wise multiply of two activations with more elements than the scores (the scores
    spread over the values' features: a product over one key, as ``einsum`` runs a
    contraction of one) is an attention core, that multiply its second product: q k^T over a
    single key is ``attn_core`` (a regional attention over one region token).""",
    "element-wise multiplies reached from a free product's scores, their output size",
    "single_key_block")
SOFTMAX_WEIGHTED = Rule(
    "softmax-weighted-product", (C.ATTN_CORE,),
    """A product of two activations that feeds no second product is an attention core on its
    own when one of its operands is a softmax, reached through at most 8 records without MACs
    nor parameters (outlook attention: weights made by a linear, normalised, one product with
    the values). A product of two projections (q k^T) reaches no softmax.""",
    "the sources of a free product back to a softmax, through records without MACs",
    "softmax_mix_block")
AGGREGATION = Rule(
    "aggregation-core", (C.ATTN_CORE,),
    """Attention without a product of two activations: an element-wise multiply of two
    activations, one of them normalised weights (a softmax or a division), reduced by a sum
    over the tokens, the reduced context multiplying a third activation broadcast back over
    what was reduced (additive and separable attention). The records from the multiply to
    that last multiply are the core.""",
    "element-wise multiplies without parameters, a softmax or division among their sources, "
    "a smaller sum consuming them, a larger multiply after it", "additive_block")
SAMPLED_POINTS = Rule(
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
JOINED_OPERAND = Rule(
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
ADDED_TERM = Rule(
    "added-term-beside-product", (C.ATTN_CORE,),
    """A product that adds a term to what it multiplies (``baddbmm``, ``addmm``: ``bias + a @
    b``) reads that term beside its two operands: a parameter reaching it only there (a
    relative-position bias table indexed, then added to the scores by the product that makes
    them) weights nothing, and the product is still one of two activations (``core-product``
    reads it); the table is the core's, as the scores' bias.""",
    "per product, the parameters reaching its added term apart from its two operands",
    "window_bias_block")
POOLING_HEAD = Rule(
    "pooling-head-attention", (C.HEAD,),
    """A core outside the list of blocks, after the last of them (an attention-pooling head),
    is in no block: its projections are ``head``. Every attention pool is one: a learned query
    over the tokens as a linear scoring each token, a softmax over the tokens and their sum so
    weighted (the ``softmax-weighted-product`` core); its products stay ``attn_core``, in no
    block, the records that make and mix its weights ``head``.""",
    "the module tree: the core's module is in no list of blocks, and runs after them",
    "pooling_head")
SCORE_BIAS = Rule(
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
QUERY_TERM = Rule(
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
FEEDS_QKV = Rule(
    "feeds-only-qkv", (C.ATTN_QKV,),
    """A weighted record whose output reaches nothing but a core's q/k/v projections (through
    records without MACs, no join: a convolution of the token map before the q, k and v
    linears, a spatial reduction before k and v) is one of those projections' input, a
    q/k/v projection too.""",
    "the consumers of the records upstream of the q/k/v projections", "conv_qkv_block")
GATE = Rule(
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
NEXT_QKV = Rule(
    "next-core-qkv", (C.ATTN_QKV,),
    """A weighted record that is a core's q/k/v projection (``qkv-feeds-core``) is no output
    projection of an earlier core whose output reaches it first: a core without an output
    projection, its output read (through a norm) by the next attention's q/k/v linear (a
    patch merger: learned queries over the tokens, the merged tokens straight into the next
    block), keeps none.""",
    "the q/k/v projections of every core, the output projections of the others",
    "merger_net")
ATTENTION_MODULE = Rule(
    "inside-attention-module", (C.ATTN_QKV, C.ATTN_PROJ),
    """The attention module is the innermost module holding a core's records and its q/k/v
    and output projections. Weighted records left unplaced that run inside it, below the
    core's block, are projections too: ``attn_qkv`` when the core depends on them,
    ``attn_proj`` when they depend on the core (a spatial reduction before the k/v
    projection).""",
    "the module tree: the innermost module holding the core and its projections; whether "
    "the core depends on the record", "reduced_kv_block")
FUSED_SHARE = Rule(
    "fused-projection-share", (C.ATTN_QKV,),
    """A q/k/v projection whose output is split into parts some of which never reach the core
    (q, k, v and the MLP's first layer in one linear) is shared out by output columns: the
    columns reaching the core are ``attn_qkv``, the rest is placed as a record that is no
    projection.""",
    "the column slices of the projection's output and which of them reach the core",
    "fused_block")


@dataclass(frozen=True)
class _ProjectionBias(ParamRule):
    """Its parameters: the bias takes the product's component (the searches walking through its
    add: :meth:`~vitprof.recognize.graph.flow.Flow.projection_bias`)."""

    def place_parameter(self, at: Parameters, read: Reading) -> Placement | None:
        if not at.flow.projection_bias(read.first):
            return None
        return Placement(at.placed[read.reader].component, self.name)


PROJECTION_BIAS = _ProjectionBias(
    "projection-bias", tuple(C),
    """A parameter added to the output of one weighted record, no larger than that output's
    last dimension (a q/k/v bias kept as a (heads, head_dim) tensor and added after the
    projection, in another module than the projection's), is that product's bias: the
    projection searches walk through the add as through a linear's own bias, and the
    parameter takes the product's component, never ``tokens``.""",
    "the add's one source, whether it is weighted, its last dimension, the parameters' sizes",
    "head_bias_block")

# the order they decide in
CORE_RULES: tuple[Rule, ...] = (
    PRICED_IN_PARTS, FUSED_CORE, CORE_PRODUCT, STREAM_BOUND, SINGLE_KEY, SOFTMAX_WEIGHTED,
    AGGREGATION, SAMPLED_POINTS, JOINED_OPERAND, ADDED_TERM, POOLING_HEAD, SCORE_BIAS, PASSED,
    QUERY_TERM, QKV, FEEDS_QKV, GATE, PROJ, NEXT_QKV, ATTENTION_MODULE, FUSED_SHARE,
)
