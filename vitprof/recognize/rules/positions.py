"""Position rules: a record without weights takes its producer's component (:data:`PRODUCER`),
outside blocks else ``patch_embed`` (:data:`STEM_DEFAULT`), in a block else its neighbour's
(:data:`NEIGHBOUR`): the last the record rules run, record by record, and what
:func:`resolve_positions_by` resolves once they have run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from vitprof.core.records import Component as C
from vitprof.recognize.rules.base import Rule
from vitprof.recognize.rules.records import Placing, RecordRule


@dataclass(frozen=True)
class _Producer(RecordRule):
    def place(self, at: Placing, i: int, facts: Any) -> C | None:
        sources = at.flow.steps[i].sources
        return at.carried[sources[-1]] if sources and not at.in_block(i) else None


@dataclass(frozen=True)
class _StemDefault(RecordRule):
    def place(self, at: Placing, i: int, facts: Any) -> C | None:
        return None if at.in_block(i) else C.PATCH_EMBED


class Pending(NamedTuple):
    """A record as :func:`resolve_positions_by` reads it: its component if known (else None),
    its block and the records it reads (``sources``, indices among the records)."""

    component: C | None
    block: int | None
    sources: tuple[int, ...]


def resolve_positions_by(
    pending: Sequence[Pending], has_blocks: bool, producers: bool = True,
    neighbours: bool = True,
) -> list[tuple[C, str]]:
    """Components of ops no parameter or module names, by data flow then position, each with
    how it was found: ``given`` (it had one), ``producer``, ``neighbour`` (the op before it in
    its block, else after it), ``position`` (outside blocks: ``tokens`` before the first block,
    ``head`` after it) or ``none`` (``other``).

    Data flow: an op without a component takes that of the latest op that produced one of its
    inputs, looking through norms (``x + norm(attn(x))`` is ``attn_proj``, not ``norm``).
    ``pending`` are the forward records (sources refer to their indices). ``producers`` /
    ``neighbours`` False skip those two ways (:data:`PRODUCER`, :data:`NEIGHBOUR` switched off).
    """
    resolved: list[C | None] = [p.component for p in pending]
    how = ["given" if c is not None else "none" for c in resolved]
    passed: list[C | None] = [None] * len(pending)  # a norm passes on its input's
    last_in_block: dict[int, C] = {}
    seen_block = False
    for i, p in enumerate(pending):
        found_by = [j for j in p.sources if j < i and passed[j] is not None] if producers else []
        if p.block is not None:
            seen_block = True
            if resolved[i] is None:
                resolved[i] = passed[found_by[-1]] if found_by else (
                    last_in_block.get(p.block) if neighbours else None)
                how[i] = "producer" if found_by else "neighbour"
            if (found := resolved[i]) is not None:
                last_in_block[p.block] = found
        elif resolved[i] is None and has_blocks:
            resolved[i] = C.HEAD if seen_block else C.TOKENS
            how[i] = "position"
        passed[i] = resolved[i]
        if resolved[i] is C.NORM and found_by:
            passed[i] = passed[found_by[-1]]
    next_in_block: dict[int, C] = {}
    for i in reversed(range(len(pending))):
        block = pending[i].block
        if block is None:
            continue
        if resolved[i] is None and neighbours:
            resolved[i] = next_in_block.get(block)
            how[i] = "neighbour"
        if (found := resolved[i]) is not None:
            next_in_block[block] = found
    return [(c, h) if c is not None else (C.OTHER, "none")
            for c, h in zip(resolved, how, strict=True)]


PRODUCER = _Producer(
    "producer", tuple(C),
    """A record without weights takes the component of the record producing its input,
    looking through norms (``x + attn(x)`` is ``attn_proj``).""",
    "the sources of the record", "parallel_block")
STEM_DEFAULT = _StemDefault(
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
POSITION_RULES: tuple[Rule, ...] = (PRODUCER, STEM_DEFAULT, NEIGHBOUR)
