"""Work an analysis does once, not once per use: what keeps counting as fast as it was before
the graph decided, the state guard and the liveness tracker (issue 38 item 11). Timings are
not asserted here; they are measured in ``benchmarks/analyze_speed.py`` and
``benchmarks/startup.py`` (``--tree`` compares two checkouts)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from importlib import import_module
from typing import Any

import pytest
import torchvision
from torch import nn

from vitprof.core.vocab import Recognizer
from vitprof.count.session import count
from vitprof.count.state import ModelState
from vitprof.recognize import breakdown
from vitprof.recognize.graph.roles import graph_breakdown
from vitprof.recognize.tables import recognize
from vitprof.workload import InputRequest, make_workload

# the module, which its function of the same name shadows as an attribute of the package
recognize_breakdown = import_module("vitprof.recognize.breakdown")


@contextmanager
def walks_of(model: nn.Module, method: str) -> Iterator[list[None]]:
    """Record each call of ``nn.Module.<method>`` on ``model`` itself (not on its submodules,
    which the walk visits), but with ``recurse=False``: one entry per walk of the whole
    model."""
    original = getattr(nn.Module, method)
    walks: list[None] = []

    def counted(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
        if self is model and kwargs.get("recurse", True):
            walks.append(None)
        return original(self, *args, **kwargs)

    setattr(nn.Module, method, counted)
    try:
        yield walks
    finally:
        setattr(nn.Module, method, original)


@pytest.fixture(scope="module")
def counted_vit() -> tuple[Any, Any, Any]:
    """torchvision's ViT-B/16 on meta: its workload, table mapping and counted run."""
    work = make_workload("vit_b_16", InputRequest.of(None))
    mapping = recognize(work.module, work.rules)
    return work, mapping, count(work.module, work.inputs.example("meta"))


def test_the_graph_breakdown_walks_the_parameters_once(counted_vit: Any) -> None:
    # main walked model.named_parameters() 7 times per breakdown (kernels, shapes, sizes, the
    # readers, the records, the unread, the order): 7 x 152 parameters on vit_b_16
    work, _, run = counted_vit
    with walks_of(work.module, "named_parameters") as walks:
        graph_breakdown(work.module, run.ops, run.trace)
    assert len(walks) == 1


def test_auto_compares_the_table_without_relabelling_its_records(
        counted_vit: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # the table's records say what placed them only where they are the breakdown (--recognizer
    # tables); under auto the table is compared cell by cell, which reads no rule
    work, _, run = counted_vit
    relabelled: list[None] = []
    original = recognize_breakdown._table_ops

    def table_ops(ops: Any, table: Any) -> Any:
        relabelled.append(None)
        return original(ops, table)

    monkeypatch.setattr(recognize_breakdown, "_table_ops", table_ops)
    auto = breakdown(run, work.module, Recognizer.AUTO, work.rules)
    assert (auto.family, relabelled) == ("graph (torchvision table agrees)", [])
    tables = breakdown(run, work.module, Recognizer.TABLES, work.rules)
    assert (tables.family, len(relabelled)) == ("torchvision", 1)
    assert {op.placed_by for op in tables.ops} == {"torchvision"}


def test_a_table_rule_without_map_rules_names_the_table() -> None:
    model = torchvision.models.vit_b_16()
    mapping = recognize(model)
    assert not mapping.overridden
    assert recognize_breakdown._table_rule(mapping, "heads.head.weight", "heads.head") \
        == "torchvision"


def test_the_state_guard_walks_the_modules_once() -> None:
    # main walked them 3 times: modules(), buffers() and named_parameters() each walk the tree
    model = torchvision.models.vit_b_16()
    with walks_of(model, "named_modules") as walks:
        state = ModelState(model)
    assert len(walks) == 1
    # of each module's 15 dict and set attributes, copied: those with entries, here
    # _parameters (77 of the 152 modules hold parameters) and _modules (40 have children)
    held = sum(bool(vars(m)["_parameters"]) + bool(vars(m)["_modules"]) for m in model.modules())
    assert len(state.contents) == held
