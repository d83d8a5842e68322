"""``breakdown()``: the one entry point of recognition, on a run a feature already has.

A count places nothing (:func:`vitprof.count.session.count`); every feature (``analyze``,
``profile``, ``memory``, the MFU tracker's time per component) passes its run here once and
reads the placements back: the records and parameters with their components and blocks, the
block paths and the warnings (:class:`Found`). The graph recognizer (:mod:`vitprof.recognize.graph`,
reading the data flow) decides; the component tables the model libraries declare are facts,
read here (:mod:`vitprof.recognize.tables`) and compared with it.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from torch import nn

from vitprof.core.errors import UserError
from vitprof.core.overrides import Override
from vitprof.core.records import Component, OpRecord, ParamRecord
from vitprof.core.vocab import Recognizer
from vitprof.count.session import Run
from vitprof.recognize.graph.roles import graph_breakdown
from vitprof.recognize.placement import place
from vitprof.recognize.rules.base import ALL, RuleSet
from vitprof.recognize.rules.overrides import OVERRIDE
from vitprof.recognize.tables import NO_TABLE, ComponentMap, recognize


@dataclass(frozen=True)
class Found:
    """A breakdown: who made it (``family``: a table's name, ``graph``, or under ``auto``
    ``graph (NAME table agrees)`` / ``graph (NAME table differs)``: :func:`_label`), the
    records and parameters with their components and blocks (the placements), and its
    warnings. ``origins``: per record of ``ops``, the index in ``Run.ops`` of the counted record
    it is or is a share of (a fused projection's); None when ``ops`` are the run's one for one.
    ``blocks``: the module path of each block, with its index (the block paths; a block the
    graph found in no one module has none; a module called several times, a block per call,
    its first call's). ``table``: the map of the table that made the
    breakdown (``--recognizer tables``), else None."""

    family: str
    ops: tuple[OpRecord, ...]
    params: tuple[ParamRecord, ...]
    warnings: tuple[str, ...]
    origins: tuple[int, ...] | None = None
    blocks: Mapping[str, int] = field(default_factory=dict)
    table: ComponentMap | None = None

    def offset(self, index: int) -> int:
        """The index in ``ops`` of the first record made from ``Run.ops[index]`` (the number of
        records made from those before it): where a module event's ``ops`` falls in ``ops``."""
        return index if self.origins is None else bisect_left(self.origins, index)


def breakdown(
    run: Run, model: nn.Module, recognizer: str = Recognizer.AUTO,
    overrides: Sequence[Override] = (), rules: RuleSet = ALL,
) -> Found:
    """The breakdown of ``run`` (a count of ``model``) that ``recognizer`` asks for. ``graph``
    and ``auto`` (the default): roles read from the data flow (:mod:`vitprof.recognize.graph`), the
    one recognizer that decides; under ``auto``, when a table detected the model too, the two
    are compared (:func:`_label`). ``tables``: the records placed by the table that detects the
    model (:func:`vitprof.recognize.placement.place`), else the graph's (kept to compare; the
    tables are facts about the classes they detect by type, tested equal to the graph).
    ``overrides`` (``--map``) win over either. ``rules``: the graph's recognition rules (all,
    unless a test switches some off: :class:`~vitprof.recognize.rules.base.RuleSet`)."""
    mapping = recognize(model, overrides)
    tabled = place(run.ops, run.whereabouts, mapping)
    detected = mapping.family != NO_TABLE
    if detected and recognizer == Recognizer.TABLES:
        return Found(mapping.family, _table_ops(tabled, mapping), _param_records(model, mapping),
                     mapping.warnings, blocks=mapping.blocks, table=mapping)
    if run.trace is None:
        raise UserError("the graph recognizer needs the trace of a forward; this run has none")
    graph = graph_breakdown(model, tabled, run.trace, overrides, rules)
    found = Found(Recognizer.GRAPH, graph.ops, graph.params, graph.warnings, graph.origins,
                  graph.blocks)
    if not detected or recognizer != Recognizer.AUTO:
        return found
    # compared cell by cell (:func:`_cells`), which reads no rule: the records as the table
    # placed them
    table = Found(mapping.family, tabled, _param_records(model, mapping), mapping.warnings)
    return replace(found, family=_label(found, table))


def _param_records(model: nn.Module, mapping: ComponentMap) -> tuple[ParamRecord, ...]:
    return tuple(
        ParamRecord(name, p.numel(), mapping.params[name], mapping.block_of(name), tuple(p.shape),
                    _table_rule(mapping, name, name))
        for name, p in model.named_parameters()
    )


def _table_rule(mapping: ComponentMap, name: str, path: str) -> str:
    """What placed a record of module ``path`` or the parameter ``name`` in a table's
    breakdown: ``override`` where a ``--map`` rule set it or a module holding it, else the
    table."""
    if not mapping.overridden:  # no --map rule: the table placed everything
        return mapping.family
    holders = [path, *(path[:k] for k, c in enumerate(path) if c == ".")]
    ruled = name in mapping.overridden or any(h in mapping.overridden for h in holders)
    return OVERRIDE.name if ruled else mapping.family


def _table_ops(ops: Sequence[OpRecord], mapping: ComponentMap) -> tuple[OpRecord, ...]:
    """``ops`` as the table placed them, each saying so (:func:`_table_rule`)."""
    return tuple(replace(op, placed_by=_table_rule(mapping, "", op.module)) for op in ops)


def _label(graph: Found, table: Found) -> str:
    """Who made ``graph``, as the header and the JSON ``family`` say: ``graph``, and whether the
    table that detected the model places the same params and MACs in every component of every
    block (``graph (torchvision table agrees)``) or not (``... differs``). Vector FLOPs are not
    compared: where an element-wise op between two modules goes (a hybrid backbone's GroupNorm
    activations, a bias beside the scores) is the graph's to say; a table names modules."""
    verdict = "agrees" if _cells(graph) == _cells(table) else "differs"
    return f"{Recognizer.GRAPH} ({table.family} table {verdict})"


def _cells(found: Found) -> Counter[tuple[int | None, Component, bool]]:
    """Params (``False``) and MACs (``True``) per block (None: outside) and component."""
    cells: Counter[tuple[int | None, Component, bool]] = Counter()
    for p in found.params:
        cells[p.block, p.component, False] += p.numel
    for op in found.ops:
        cells[op.block, op.component, True] += op.macs
    return +cells
