"""Recognizers that name the component of every module and parameter of a model."""

from __future__ import annotations

from collections.abc import Sequence

from torch import nn

from vitprof.count.families.base import ComponentMap, Family, Rule, apply_overrides
from vitprof.count.families.generic import resolve_generic
from vitprof.count.families.tables import TABLES

__all__ = ["ComponentMap", "Family", "Rule", "recognize"]


def recognize(model: nn.Module, overrides: Sequence[Rule] = ()) -> ComponentMap:
    """The component map of ``model``: from the first table that detects it, else generic.

    ``overrides`` are ``(regex, component)`` pairs that win over any recognizer.
    """
    family = next((f for f in TABLES if f.detect(model)), None)
    mapping = family.resolve(model) if family else resolve_generic(model)
    return apply_overrides(mapping, model, overrides)
