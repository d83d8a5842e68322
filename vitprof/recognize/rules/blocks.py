"""Block rules: which records form a block, and the span of a model's blocks. Their code runs
where the blocks are found (:func:`vitprof.recognize.graph.blocks.group_blocks`,
:meth:`vitprof.recognize.graph.flow.Flow.free_skip`, the span in
:mod:`vitprof.recognize.graph.roles`), which asks the :class:`~.base.RuleSet` it is given
whether each is on.
"""

from __future__ import annotations

from vitprof.core.records import Component as C
from vitprof.recognize.rules.base import Rule

JOINED_SPAN = Rule(
    "joined-span-block", tuple(C),
    """A block holding a single core is the innermost module holding that core and the
    residual adds of its stream (adds after the core reading the block's input, or an earlier
    such add, before the next core) run inside it: a stage of one block is not the block, its
    downsampling before or after the block's residual span is no part of it.""",
    "the module tree below the block, the residual adds after the core and their modules",
    "one_block_stages")
RESIDUAL_SEGMENT = Rule(
    "residual-segment-block", tuple(C),
    """A block is its residual stream, not only its module: the residual segments after the
    block's module (adds reading the stream, each an earlier one's output), before the next
    block or core, whose branches neither mix tokens (a spatial convolution) nor hold a core,
    are the block's: the feed-forward of a layer that one module runs from parallel lists
    (``for a, f in zip(attns, ffs): x = a(norm(x)) + x; x = f(norm(x)) + x``).""",
    "the residual adds after a block's records, their sources, the kernels in their branches",
    "parallel_lists")
RESIDUAL_STACK = Rule(
    "residual-attention-block", (C.ATTN_QKV, C.ATTN_CORE, C.ATTN_PROJ, C.MLP),
    """A core outside the lists of blocks, after them, whose output is added back to what it
    attends over (an add after the core reads a record, or a parameter, that the core's
    operands come from: a class token's residual stream) is a block of a later stack (a
    class-attention stage); only one whose output is not added back (an attention-pooling
    head) is left to ``pooling-head-attention``.""",
    "adds after the core, their sources and parameters, the records and parameters before it",
    "class_attention")
POOLED_SKIP = Rule(
    "pooled-skip-join", (C.CONV,),
    """An add whose skip arm is the fork pooled (one record without MACs reading only the
    fork: ``pool(x) + f(x)``, a downsampling block's shortcut) is a residual join, as the
    fork itself or the fork scaled by a parameter is.""",
    "the arms of an add back to their fork, the op of a one-record arm", "pooled_skip_block")
RESIDUAL_SPAN = Rule(
    "residual-span", (C.PATCH_EMBED, C.CONV, C.HEAD),
    """A model without an attention core whose joins' branches convolve with a spatial kernel
    is a convolutional network: its span runs from the first such branch to the last join;
    before it is patch embedding, after it head.""",
    "residual joins and whether their branches convolve", "resnet_like")
NO_BLOCKS = Rule(
    "no-blocks", (C.OTHER,),
    """A model with neither an attention core nor a convolutional residual span is no ViT:
    everything is ``other``, with a warning.""",
    "nothing found by the rules above", "mixer_only")

# the order they decide in
BLOCK_RULES: tuple[Rule, ...] = (
    JOINED_SPAN, RESIDUAL_SEGMENT, RESIDUAL_STACK, POOLED_SKIP, RESIDUAL_SPAN, NO_BLOCKS,
)
