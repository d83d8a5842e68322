"""The user's ``--map`` (regex=component pairs): it wins over every recognition rule, placed
last in the registry; its code: :func:`vitprof.recognize.graph.roles.graph_breakdown`'s
overrides."""

from __future__ import annotations

from vitprof.core.records import Component as C
from vitprof.recognize.rules.base import Rule

OVERRIDE = Rule(
    "override", tuple(C),
    """A ``--map`` rule (a regex and a component) wins over every rule above for the
    parameters and modules it names.""",
    "the user's --map", "mapped_block")
