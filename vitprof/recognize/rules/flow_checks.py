"""The rules the data flow asks itself: which parameters weight a product
(:data:`JOINED_OPERAND`, :data:`ADDED_TERM`), which add is a product's bias
(:data:`PROJECTION_BIAS`), which add is a residual join (:data:`POOLED_SKIP`,
:data:`INPUT_SKIP`, :data:`CONCATENATED_ARM`), where a residual stream goes on
(:data:`POST_NORM_STREAM`) and which records take a record's values, not only its indices
(:data:`OUTPUT_BY_VALUE`). Their code answers the questions of
:class:`~vitprof.recognize.graph.flow.Flow`, which calls it when the rule is on, so this module
imports nothing from :mod:`vitprof.recognize.graph` (the flow imports it). They decide in the
registry's order with the core rules (:data:`JOINED_OPERAND`, :data:`ADDED_TERM`,
:data:`PROJECTION_BIAS`, :data:`OUTPUT_BY_VALUE`) and the block rules (the others).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from vitprof.core.records import Component as C
from vitprof.core.records import OpKind
from vitprof.count.trace import Step
from vitprof.recognize.graph.ops import ADDS
from vitprof.recognize.rules.base import Parameters, ParamRule, Placement, Reading, Rule

if TYPE_CHECKING:
    from vitprof.recognize.graph.flow import Flow


@dataclass(frozen=True)
class _JoinedOperand(Rule):
    def joined_weights(self, flow: Flow, i: int) -> set[int]:
        """The records computing a weight that step ``i`` reads only joined to activations in
        one operand (a memory of keys normalised, then concatenated to the keys), whatever the
        layout."""
        mixed = [group for group in flow.steps[i].joined
                 if not all(flow.weights[j] for j in group)]
        alone = {j for j in flow.steps[i].sources
                 if not any(j in group for group in flow.steps[i].joined)}
        return {j for group in mixed for j in group} - alone

    def unweighting(self, step: Step) -> set[str]:
        """The parameters reaching ``step`` through free ops joined to activations in an
        operand: they weight nothing."""
        return set(step.carried_joined)


JOINED_OPERAND = _JoinedOperand(
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


@dataclass(frozen=True)
class _AddedTerm(Rule):
    def unweighting(self, step: Step) -> set[str]:
        """The parameters reaching ``step`` only in the term it adds beside its operands (a
        bias of the scores): they weight nothing."""
        return set(step.carried_beside)


ADDED_TERM = _AddedTerm(
    "added-term-beside-product", (C.ATTN_CORE,),
    """A product that adds a term to what it multiplies (``baddbmm``, ``addmm``: ``bias + a @
    b``) reads that term beside its two operands: a parameter reaching it only there (a
    relative-position bias table indexed, then added to the scores by the product that makes
    them) weights nothing, and the product is still one of two activations (``core-product``
    reads it); the table is the core's, as the scores' bias.""",
    "per product, the parameters reaching its added term apart from its two operands",
    "window_bias_block")


@dataclass(frozen=True)
class _ProjectionBias(ParamRule):
    """Its parameters: the bias takes the product's component (the searches walking through its
    add: :meth:`adds_bias`)."""

    def adds_bias(self, flow: Flow, i: int) -> bool:
        """Step ``i`` adds a bias to a product's output wherever it runs: an add of parameters
        that no earlier record read to the output of one weighted record, each parameter no
        larger than that output's last dimension, the product's features (a q/k/v bias kept as
        a (heads, head_dim) tensor and added after the projection); a position embedding
        varies over the tokens, larger; a class token added back to its attention's output was
        read before, by the attention."""
        step = flow.steps[i]
        if step.op not in ADDS or step.macs or not step.params or len(step.sources) != 1:
            return False
        source = step.sources[0]
        features = flow.steps[source].shape[-1:] or (0,)
        return flow.weighted(source) and all(
            flow.param_sizes.get(name, features[0] + 1) <= features[0]
            and flow.first_readers[name] == i for name in step.params)

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


@dataclass(frozen=True)
class _OutputByValue(Rule):
    def takes_values(self, step: Step, source: int) -> bool:
        """``step`` reads record ``source``'s values, not only indices computed from them (a
        top-k or an argsort choosing the tokens it gathers)."""
        return source not in step.indexed


OUTPUT_BY_VALUE = _OutputByValue(
    "output-by-value", (C.ATTN_PROJ,),
    """The walk from a core to its output projections follows the values of its records, never
    indices computed from them: a record that reads a record of the core (or of the walk) only
    as indices (a block keeping the tokens that the first token's row of the attention map
    weights most, chosen by an argsort, then running its MLP on them) takes none of the core's
    output; the MLP's first linear is no output projection. Where the attention's output
    itself is reordered by indices computed elsewhere before its projection, the walk reads it
    by value and passes.""",
    "the sources each record reads only as indices (integer tensors)", "fused_token_block")


@dataclass(frozen=True)
class _PooledSkip(Rule):
    def skips(self, step: Step) -> bool:
        """``step`` (one record without MACs reading only the fork) pools the fork: the skip
        arm of ``pool(x) + f(x)``."""
        return step.kind is OpKind.POOL


POOLED_SKIP = _PooledSkip(
    "pooled-skip-join", (C.CONV,),
    """An add whose skip arm is the fork pooled (one record without MACs reading only the
    fork: ``pool(x) + f(x)``, a downsampling block's shortcut) is a residual join, as the
    fork itself or the fork scaled by a parameter is.""",
    "the arms of an add back to their fork, the op of a one-record arm", "pooled_skip_block")


@dataclass(frozen=True)
class _InputSkip(Rule):
    def arms(self, flow: Flow, i: int) -> list[set[int]] | None:
        """If step ``i`` adds the model's input data itself (:attr:`Step.fed`) to records
        computed from it, with MACs on the way, the arm of each of its sources: the records
        from the input to that source (:data:`~vitprof.recognize.graph.flow.WINDOW` back at
        most); else None."""
        step = flow.steps[i]
        if not step.fed or not step.sources or not all(flow.from_input[j] for j in step.sources):
            return None
        arms = [{j for j in flow.ancestors(source, max(0, source - flow.window))
                 if flow.from_input[j]} for source in step.sources]
        return arms if any(flow.steps[j].macs for arm in arms for j in arm) else None


INPUT_SKIP = _InputSkip(
    "input-skip-join", tuple(C),
    """An add of the model's input data itself (a tensor passed to the forward, a view or a
    copy of it: no record computed it) and records computed from it, with products on the way,
    is a residual join whose fork is the input, ``x + f(x)`` as any other: the first residual
    add of a model that is one encoder layer alone, fed the tokens or a map it flattens.""",
    "the operands an add reads that are the model's input data, the records computed from it",
    "input_skip_layer")


@dataclass(frozen=True)
class _ConcatenatedArm(Rule):
    def one_operand(self, step: Step) -> bool:
        """Every record ``step`` reads was written into one of its operands (a concatenation):
        they are one arm, not the arms of a join."""
        return any(set(step.sources) <= set(group) for group in step.joined)


CONCATENATED_ARM = _ConcatenatedArm(
    "concatenated-one-arm", tuple(C),
    """A join adds its operands: records concatenated into one operand are one arm, however
    they fork (the sines and cosines of two products of one frequency row, side by side in a
    position table added to the input): their fork is no residual stream.""",
    "the records each operand of an add was written by", "input_skip_layer")


@dataclass(frozen=True)
class _PostNormStream(Rule):
    def through_norm(self, flow: Flow, j: int, stream: int) -> bool:
        """Record ``j`` normalises the stream: a norm reading record ``stream`` or an earlier
        one (post-norm: ``x = norm(x + f(x))``)."""
        return flow.norm(j) and any(k <= stream for k in flow.steps[j].sources)


POST_NORM_STREAM = _PostNormStream(
    "post-norm-stream", tuple(C),
    """A block's residual stream runs through a norm of it: after ``x = norm(x + f(x))``, an
    add reading that norm's output is the stream's next residual add (a post-norm layer's
    feed-forward), as one reading the add's output is.""",
    "the sources of the residual adds after a core, the norms among them", "input_skip_layer")
