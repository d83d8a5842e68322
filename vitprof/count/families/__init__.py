"""Recognizers that name the component of every module and parameter of a model.

The machinery lives here (:mod:`.base`: tables as :class:`ComponentTable`, :mod:`.generic`: the
recognizer for ViTs nobody wrote a table for); the tables themselves belong to the model
families of :mod:`vitprof.models.family`, each beside that implementation's spec inferrer and
zoo entries, which registers them here (:func:`register_tables`) when it is imported: the
package's ``__init__`` imports it, so that every table is known before the first
:func:`recognize`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from vitprof.count.families.base import ComponentMap, ComponentTable, Rule, apply_overrides

if TYPE_CHECKING:
    from torch import nn

__all__ = ["ComponentMap", "ComponentTable", "Rule", "recognize", "register_tables"]

_TABLES: list[ComponentTable] = []  # in the order registered: the first that detects wins


def register_tables(tables: Sequence[ComponentTable]) -> None:
    """Add ``tables`` to those :func:`recognize` tries, after the ones registered before."""
    _TABLES.extend(t for t in tables if t not in _TABLES)


def recognize(model: nn.Module, overrides: Sequence[Rule] = ()) -> ComponentMap:
    """The component map of ``model``: from the first table that detects it, else generic.

    ``overrides`` are ``(regex, component)`` pairs that win over any recognizer.
    """
    # generic is read at call time: its isinstance tables import torch, which the zoo's entries
    # and `vitprof models` (importing .base through this package) do without
    from vitprof.count.families.generic import resolve_generic

    if not _TABLES:
        raise RuntimeError("no component table registered: import vitprof.models.family first")
    family = next((f for f in _TABLES if f.detect(model)), None)
    mapping = family.resolve(model) if family else resolve_generic(model)
    return apply_overrides(mapping, model, overrides)
