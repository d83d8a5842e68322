"""What a recognizer produces: which component and block each module and parameter belongs to.

A recognizer (a "family") looks at a model once, before it runs, and returns a
:class:`ComponentMap`. The counter then attributes every operation from that map: an operation
that reads a parameter belongs to that parameter's component; any other operation belongs to the
innermost running module that has a component.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from vitprof.core.errors import UserError
from vitprof.core.records import Component

if TYPE_CHECKING:
    from torch import nn

Rule = tuple[str, Component]


@dataclass(frozen=True)
class ComponentMap:
    """Components of module paths and parameter names, and the transformer blocks."""

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


@dataclass(frozen=True)
class ComponentTable:
    """A recognizer written as a table: regexes searched in module paths and parameter names.

    ``blocks`` must fully match a block's module path; blocks are numbered in the order
    ``named_modules`` yields them (registration order, which is execution order in the models
    the tables describe), across stages: Swin's fourth stage's first block follows the third's
    last. The first rule whose regex is found in a path wins; a parameter no rule names takes the
    component of its nearest ancestor module that has one.
    """

    name: str
    detect: Callable[[nn.Module], bool]
    blocks: str
    rules: Sequence[Rule]

    def resolve(self, model: nn.Module) -> ComponentMap:
        rules = compile_rules(self.rules)
        pattern = re.compile(self.blocks)
        blocks: dict[str, int] = {}
        modules: dict[str, Component] = {}
        for path, _ in model.named_modules():
            if pattern.fullmatch(path):
                blocks[path] = len(blocks)
            component = first_match(rules, path) if path else None
            if component is not None:
                modules[path] = component
        params = {
            name: first_match(rules, name) or owner_component(modules, name)
            for name, _ in model.named_parameters()
        }
        unknown = [name for name, component in params.items() if component is Component.OTHER]
        return ComponentMap(self.name, modules, params, blocks, unrecognized_warnings(unknown))


def unrecognized_warnings(names: Sequence[str]) -> tuple[str, ...]:
    """The warning for parameters no recognizer placed (they are counted as ``other``)."""
    if not names:
        return ()
    shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
    return (f"{len(names)} parameter tensor(s) not recognized, counted as other: {shown}",)


def compile_rules(rules: Iterable[Rule]) -> list[tuple[re.Pattern[str], Component]]:
    """Compile ``(regex, component)`` rules; a bad regex or component name is a user error."""
    compiled = []
    for regex, component in rules:
        try:
            compiled.append((re.compile(regex), Component(component)))
        except re.error as error:
            raise UserError(f"bad regular expression '{regex}' in a rule: {error}") from None
        except ValueError:
            raise UserError(f"unknown component '{component}' in the rule for '{regex}'") from None
    return compiled


def first_match(rules: list[tuple[re.Pattern[str], Component]], name: str) -> Component | None:
    for regex, component in rules:
        if regex.search(name):
            return component
    return None


def owner_component(modules: dict[str, Component], name: str) -> Component:
    """Component of the nearest ancestor module of ``name`` that has one, else OTHER."""
    return _nearest_owner(modules, name) or Component.OTHER


def apply_overrides(
    mapping: ComponentMap, model: nn.Module, overrides: Sequence[Rule]
) -> ComponentMap:
    """A copy of ``mapping`` where user rules win: a module path or parameter name a rule
    matches takes its component, and a parameter follows its nearest overridden owner. A rule
    whose regex is found in no module path and no parameter name adds a warning (a typo)."""
    if not overrides:
        return mapping
    rules = compile_rules(overrides)
    paths = [path for path, _ in model.named_modules() if path]
    overridden = {
        path: component for path in paths if (component := first_match(rules, path)) is not None
    }
    params = {}
    ruled = set(overridden)
    for name, component in mapping.params.items():
        user = first_match(rules, name) or _nearest_owner(overridden, name)
        params[name] = user or component
        if user is not None:
            ruled.add(name)
    names = [*paths, *mapping.params]
    unmatched = tuple(
        f"--map rule '{regex.pattern}={component}' matched no module or parameter"
        for regex, component in rules if not any(regex.search(name) for name in names)
    )
    return ComponentMap(
        mapping.family, {**mapping.modules, **overridden}, params, mapping.blocks,
        mapping.warnings + unmatched, frozenset(ruled),
    )


def _nearest_owner(modules: dict[str, Component], name: str) -> Component | None:
    path = name
    while path:
        path = path.rpartition(".")[0]
        if path in modules:
            return modules[path]
    return None
