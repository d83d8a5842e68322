"""Recognizers that name the component of every module and parameter of a model.

The machinery lives here (:mod:`.base`: tables as :class:`ComponentTable`, :mod:`.generic`: the
recognizer for ViTs nobody wrote a table for); the tables themselves belong to the model
families of :mod:`vitprof.models.family`, each beside that implementation's spec inferrer and
zoo entries.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from vitprof.count.families.base import ComponentMap, ComponentTable, Rule, apply_overrides

if TYPE_CHECKING:
    from torch import nn

__all__ = ["ComponentMap", "ComponentTable", "Rule", "recognize"]


def recognize(model: nn.Module, overrides: Sequence[Rule] = ()) -> ComponentMap:
    """The component map of ``model``: from the first table that detects it, else generic.

    ``overrides`` are ``(regex, component)`` pairs that win over any recognizer.
    """
    # read at call time: the family files build their tables from .base, which imports this
    # package first, so importing the registry here at import time would be a cycle
    # generic is read here too: its isinstance tables import torch, which the zoo's entries and
    # `vitprof models` (importing .base through this package) do without
    from vitprof.count.families.generic import resolve_generic
    from vitprof.models.family import TABLES

    family = next((f for f in TABLES if f.detect(model)), None)
    mapping = family.resolve(model) if family else resolve_generic(model)
    return apply_overrides(mapping, model, overrides)
