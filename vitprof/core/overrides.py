"""The user's ``--map`` overrides: ``(regex, component)`` pairs that win over any recognizer,
and the warning for the names no recognizer placed.

An :data:`Override`'s regex is searched in module paths and parameter names; the first override
whose regex is found in a name wins, and a parameter no override names follows its nearest
overridden owner module. This module holds the vocabulary and its matching, read by the
recognizers that apply it (:mod:`vitprof.recognize.tables`, the graph's ``--map`` step); it
imports no torch.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from vitprof.core.errors import UserError
from vitprof.core.records import Component

Override = tuple[str, Component]
Compiled = list[tuple[re.Pattern[str], Component]]


def compile_overrides(overrides: Iterable[Override]) -> Compiled:
    """Compile ``(regex, component)`` overrides; a bad regex or component name is a user error."""
    compiled = []
    for regex, component in overrides:
        try:
            compiled.append((re.compile(regex), Component(component)))
        except re.error as error:
            raise UserError(f"bad regular expression '{regex}' in a rule: {error}") from None
        except ValueError:
            raise UserError(f"unknown component '{component}' in the rule for '{regex}'") from None
    return compiled


def first_match(rules: Compiled, name: str) -> Component | None:
    """The component of the first rule whose regex is found in ``name``, else None."""
    for regex, component in rules:
        if regex.search(name):
            return component
    return None


def nearest_owner(modules: Mapping[str, Component], name: str) -> Component | None:
    """The component of the nearest ancestor module of ``name`` in ``modules``, else None."""
    path = name
    while path:
        path = path.rpartition(".")[0]
        if path in modules:
            return modules[path]
    return None


@dataclass(frozen=True)
class Overridden:
    """What overrides set: the module paths they match (``modules``), each parameter's
    component where an override or an overridden owner module names it (``params``), and a
    warning per override that matched no name (a typo)."""

    modules: dict[str, Component]
    params: dict[str, Component]
    warnings: tuple[str, ...]


def apply_to_names(paths: Sequence[str], params: Iterable[str],
                   overrides: Sequence[Override]) -> Overridden:
    """The overrides applied to module ``paths`` (the root's ``""`` aside) and parameter
    names ``params`` (:class:`Overridden`)."""
    rules = compile_overrides(overrides)
    names = list(params)
    modules = {path: component for path in paths if path
               and (component := first_match(rules, path)) is not None}
    ruled = {name: component for name in names
             if (component := first_match(rules, name) or nearest_owner(modules, name))
             is not None}
    everything = [*(path for path in paths if path), *names]
    unmatched = tuple(
        f"--map rule '{regex.pattern}={component}' matched no module or parameter"
        for regex, component in rules if not any(regex.search(name) for name in everything)
    )
    return Overridden(modules, ruled, unmatched)


def unrecognized_warnings(names: Sequence[str]) -> tuple[str, ...]:
    """The warning for parameters no recognizer placed (they are counted as ``other``)."""
    if not names:
        return ()
    shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
    return (f"{len(names)} parameter tensor(s) not recognized, counted as other: {shown}",)
