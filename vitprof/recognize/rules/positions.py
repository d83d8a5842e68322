"""Position rules: a record without weights takes its producer's component, else its
neighbour's in its block (:func:`resolve_positions_by`).
"""

from __future__ import annotations

from vitprof.core.records import Component as C
from vitprof.recognize.rules.base import Rule

PRODUCER = Rule(
    "producer", tuple(C),
    """A record without weights takes the component of the record producing its input,
    looking through norms (``x + attn(x)`` is ``attn_proj``).""",
    "the sources of the record", "parallel_block")
STEM_DEFAULT = Rule(
    "before-any-component", (C.PATCH_EMBED,),
    """A weightless record outside blocks with no placed producer (the input's reshaping
    into patches) is ``patch_embed``.""",
    "the record's producers", "plain_block")
NEIGHBOUR = Rule(
    "block-neighbour", tuple(C),
    """A record in a block whose producers have no component takes that of the record before
    it in the block, else of the one after it.""",
    "the order of the block's records", "neighbour_block")

# the order they decide in
POSITION_RULES: tuple[Rule, ...] = (
    PRODUCER, STEM_DEFAULT, NEIGHBOUR,
)
