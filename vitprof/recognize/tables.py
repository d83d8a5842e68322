"""The component tables of the model libraries, read as facts: a table's map of a model.

The tables are declared by the model libraries (:data:`vitprof.models.libraries.TABLES`, each
beside its library's spec inferrers and zoo entries) and read here when a model is recognized:
nothing is registered at import. A table is a fact about the classes it detects by type: the
graph recognizer (:mod:`vitprof.recognize.graph`, reading the data flow) names the components of
every model, and a table is compared with it (:func:`vitprof.recognize.breakdown`, tested equal)
or asked for (``--recognizer tables``). A model no table detects gets :data:`NO_TABLE`'s empty
map.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from vitprof.core.overrides import (
    Override,
    apply_to_names,
    compile_overrides,
    first_match,
    nearest_owner,
    unrecognized_warnings,
)
from vitprof.core.records import Component
from vitprof.models.libraries import TABLES
from vitprof.models.libraries.base import ComponentTable

if TYPE_CHECKING:
    from torch import nn

__all__ = ["NO_TABLE", "ComponentMap", "recognize", "resolve"]

NO_TABLE = "none"  # the family of the map of a model no table detects


@dataclass(frozen=True)
class ComponentMap:
    """Components of module paths and parameter names, and the transformer blocks: what a
    table says of a model before it runs (:func:`recognize`), which
    :func:`vitprof.recognize.placement.place` applies to a count's records."""

    family: str
    modules: dict[str, Component]
    params: dict[str, Component]
    blocks: dict[str, int]  # block module path -> block index
    warnings: tuple[str, ...] = ()
    overridden: frozenset[str] = frozenset()  # module paths and parameters a --map rule set
    _block_prefixes: tuple[tuple[str, int], ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        ordered = sorted(self.blocks.items(), key=lambda item: -len(item[0]))
        object.__setattr__(self, "_block_prefixes", tuple((p + ".", i) for p, i in ordered))

    def block_of(self, name: str) -> int | None:
        """Index of the block that holds the module or parameter ``name``, or None."""
        if name in self.blocks:
            return self.blocks[name]
        for prefix, index in self._block_prefixes:
            if name.startswith(prefix):
                return index
        return None


def resolve(table: ComponentTable, model: nn.Module) -> ComponentMap:
    """The map ``table`` makes of ``model`` (the conventions of :class:`ComponentTable`)."""
    rules = compile_overrides(table.rules)
    pattern = re.compile(table.blocks)
    blocks: dict[str, int] = {}
    modules: dict[str, Component] = {}
    for path, _ in model.named_modules():
        if pattern.fullmatch(path):
            blocks[path] = len(blocks)
        component = first_match(rules, path) if path else None
        if component is not None:
            modules[path] = component
    params = {
        name: first_match(rules, name) or nearest_owner(modules, name) or Component.OTHER
        for name, _ in model.named_parameters()
    }
    unknown = [name for name, component in params.items() if component is Component.OTHER]
    return ComponentMap(table.name, modules, params, blocks, unrecognized_warnings(unknown))


def recognize(model: nn.Module, overrides: Sequence[Override] = ()) -> ComponentMap:
    """The component map of ``model``: from the first table that detects it, else an empty one
    (family :data:`NO_TABLE`: every parameter ``other``, no module, no block), which the graph
    recognizer replaces.

    ``overrides`` are ``(regex, component)`` pairs that win over any recognizer.
    """
    table = next((t for t in TABLES if t.detect(model)), None)
    mapping = resolve(table, model) if table is not None else ComponentMap(
        NO_TABLE, {}, {name: Component.OTHER for name, _ in model.named_parameters()}, {})
    return apply_overrides(mapping, model, overrides)


def apply_overrides(
    mapping: ComponentMap, model: nn.Module, overrides: Sequence[Override]
) -> ComponentMap:
    """A copy of ``mapping`` where user rules win: a module path or parameter name a rule
    matches takes its component, and a parameter follows its nearest overridden owner. A rule
    whose regex is found in no module path and no parameter name adds a warning (a typo)."""
    if not overrides:
        return mapping
    found = apply_to_names([path for path, _ in model.named_modules()], mapping.params,
                           overrides)
    return ComponentMap(
        mapping.family, {**mapping.modules, **found.modules}, {**mapping.params, **found.params},
        mapping.blocks, mapping.warnings + found.warnings,
        frozenset(found.modules) | frozenset(found.params),
    )
