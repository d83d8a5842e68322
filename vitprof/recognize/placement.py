"""A count's records placed by a component map (:class:`~vitprof.recognize.tables.ComponentMap`).

The count places nothing (:mod:`vitprof.count.counter`); each record keeps where it ran
(:class:`~vitprof.count.trace.Whereabouts`). A map places one record, in order:

1. a fused operation that spans components (``_native_multi_head_attention``) names them itself;
2. an operation that reads a parameter belongs to that parameter's component;
3. otherwise, the innermost running module that has a component;
4. otherwise (a residual add in a block's own ``forward``, pooling in the model's ``forward``),
   where its data comes from: inside a block, the component of the latest counted operation
   that produced one of its inputs (a residual add closes the branch whose output it adds:
   ``x + attn(x)`` is ``attn_proj``, ``x + mlp(x)`` is ``mlp``), or failing that the previous
   counted operation of the block; outside blocks, ``tokens`` before the first block and
   ``head`` after it (:func:`vitprof.recognize.rules.positions.resolve_positions_by`).

A record's block is that of its innermost running module that is a block, else that of the
first parameter it reads. A backward record takes the component and block of the forward record
whose autograd node ran it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from vitprof.core.records import Component, OpRecord, Phase
from vitprof.count.trace import Whereabouts
from vitprof.recognize.rules.positions import Pending, resolve_positions_by
from vitprof.recognize.tables import ComponentMap


def place(ops: Sequence[OpRecord], where: Sequence[Whereabouts], mapping: ComponentMap
          ) -> tuple[OpRecord, ...]:
    """``ops`` (a count's records, ``where`` they ran) with the components and blocks
    ``mapping`` gives them (see the module)."""
    found: list[Component | None] = []
    blocks: list[int | None] = []
    for here in where:
        found.append(here.named or _component(mapping, here))
        blocks.append(blocks[here.owner] if here.owner is not None else _block(mapping, here))
    forward = [i for i, op in enumerate(ops) if op.phase == Phase.FORWARD]
    resolved = dict(zip(forward, (component for component, _ in resolve_positions_by(
        [Pending(found[i], blocks[i], where[i].sources) for i in forward],
        has_blocks=bool(mapping.blocks),
    )), strict=True))
    placed = []
    for i, (op, here) in enumerate(zip(ops, where, strict=True)):
        component = resolved.get(i)
        if component is None and here.owner is not None:
            component = resolved.get(here.owner)
        placed.append(replace(op, component=component or found[i] or Component.OTHER,
                              block=blocks[i]))
    return tuple(placed)


def _component(mapping: ComponentMap, here: Whereabouts) -> Component | None:
    if here.params:
        return mapping.params[here.params[0]]
    for path in reversed(here.stack):
        component = mapping.modules.get(path)
        if component is not None:
            return component
    return None


def _block(mapping: ComponentMap, here: Whereabouts) -> int | None:
    for path in reversed(here.stack):
        index = mapping.blocks.get(path)
        if index is not None:
            return index
    return mapping.block_of(here.params[0]) if here.params else None
