"""Recognizers that name the component of every module and parameter of a model.

The machinery lives here (:mod:`.base`: tables as :class:`ComponentTable`); the tables
themselves belong to the model families of :mod:`vitprof.models.family`, each beside that
implementation's spec inferrer and zoo entries, which registers them here (:func:`register_tables`)
when it is imported: the package's ``__init__`` imports it, so that every table is known before
the first :func:`recognize`. A table is a fact about classes it detects by type: the graph
recognizer (:mod:`vitprof.recognize.graph`, reading the data flow) names the components of every
model, and a table is only compared with it (:func:`vitprof.analysis.breakdown`, tested equal) or
asked for (``--recognizer tables``). A model no table detects gets :data:`NO_TABLE`'s empty map.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from vitprof.core.records import Component
from vitprof.count.families.base import ComponentMap, ComponentTable, Rule, apply_overrides

if TYPE_CHECKING:
    from torch import nn

__all__ = ["NO_TABLE", "ComponentMap", "ComponentTable", "Rule", "recognize", "register_tables"]

NO_TABLE = "none"  # the family of the map of a model no table detects
_TABLES: list[ComponentTable] = []  # in the order registered: the first that detects wins


def register_tables(tables: Sequence[ComponentTable]) -> None:
    """Add ``tables`` to those :func:`recognize` tries, after the ones registered before."""
    _TABLES.extend(t for t in tables if t not in _TABLES)


def recognize(model: nn.Module, overrides: Sequence[Rule] = ()) -> ComponentMap:
    """The component map of ``model``: from the first table that detects it, else an empty one
    (family :data:`NO_TABLE`: every parameter ``other``, no module, no block), which the graph
    recognizer replaces.

    ``overrides`` are ``(regex, component)`` pairs that win over any recognizer.
    """
    if not _TABLES:
        raise RuntimeError("no component table registered: import vitprof.models.family first")
    family = next((f for f in _TABLES if f.detect(model)), None)
    mapping = family.resolve(model) if family else ComponentMap(
        NO_TABLE, {}, {name: Component.OTHER for name, _ in model.named_parameters()}, {})
    return apply_overrides(mapping, model, overrides)
