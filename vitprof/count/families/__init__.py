"""Recognizers that name the component of every module and parameter of a model.

The machinery lives here (:mod:`.base`: tables as :class:`ComponentTable`); the tables
themselves belong to the model families of :mod:`vitprof.models.family`, each beside that
implementation's spec inferrer and zoo entries. A table is a fact about classes it detects by
type; a model no table detects gets :data:`NO_TABLE`'s empty map, and the graph recognizer
(:mod:`vitprof.count.graph`, reading the data flow) names its components.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from vitprof.core.records import Component
from vitprof.count.families.base import ComponentMap, ComponentTable, Rule, apply_overrides

if TYPE_CHECKING:
    from torch import nn

__all__ = ["NO_TABLE", "ComponentMap", "ComponentTable", "Rule", "recognize"]

NO_TABLE = "none"  # the family of the map of a model no table detects


def recognize(model: nn.Module, overrides: Sequence[Rule] = ()) -> ComponentMap:
    """The component map of ``model``: from the first table that detects it, else an empty one
    (family :data:`NO_TABLE`: every parameter ``other``, no module, no block), which the graph
    recognizer replaces.

    ``overrides`` are ``(regex, component)`` pairs that win over any recognizer.
    """
    # read at call time: the family files build their tables from .base, which imports this
    # package first, so importing the registry here at import time would be a cycle
    from vitprof.models.family import TABLES

    family = next((f for f in TABLES if f.detect(model)), None)
    mapping = family.resolve(model) if family else ComponentMap(
        NO_TABLE, {}, {name: Component.OTHER for name, _ in model.named_parameters()}, {})
    return apply_overrides(mapping, model, overrides)
