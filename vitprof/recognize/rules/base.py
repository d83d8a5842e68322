"""What a recognition rule is, which rules a breakdown runs, and what a rule decides.

A :class:`Rule` has a short stable name (kebab-case: what ``placed_by`` says), the components
it can place, what it reads in the data flow (``reads``), the rule in words (``doc``) and the
fixture of ``tests/recognition_fixtures.py`` showing it: a tiny model with neutral names whose
breakdown changes when the rule is switched off. A rule that places records or parameters one
by one holds its decision (:class:`RecordRule`, :class:`ParamRule`), and so does a rule that
finds cores (:class:`~.cores.CoreFinder`) or groups blocks: the machinery of
:mod:`vitprof.recognize.graph` is what they read. :class:`RuleSet` is passed to the recognizer
as an argument: a switched-off rule decides nothing and later rules place what it would have.

No rule reads a name: structure comes from the computation and the module tree (which module
holds which), never from what a module, parameter or class is called.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from vitprof.core.records import Component

if TYPE_CHECKING:
    from vitprof.recognize.graph.flow import Flow


@dataclass(frozen=True)
class Rule:
    """One recognition decision: ``name`` (what ``placed_by`` says), the ``components`` it can
    place, the rule in terms of the data flow (``doc``, whitespace folded), what it reads
    (``reads``) and the ``fixture`` showing it."""

    name: str
    components: tuple[Component, ...]
    doc: str
    reads: str
    fixture: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "doc", " ".join(self.doc.split()))


@dataclass(frozen=True)
class RuleSet:
    """The rules a breakdown runs: all but those named in ``off`` (tests switch a rule off to
    see that its fixture's breakdown changes), and the ``added`` rules after the registry's of
    their kind (a rule being written, before it joins its file's list). ``rule in rules`` says
    whether ``rule`` is on."""

    off: frozenset[str] = field(default_factory=frozenset)
    added: tuple[Rule, ...] = ()

    def __init__(self, off: Iterable[str] = (), added: Iterable[Rule] = ()) -> None:
        object.__setattr__(self, "off", frozenset(off))
        object.__setattr__(self, "added", tuple(added))

    def __contains__(self, rule: object) -> bool:
        return isinstance(rule, Rule) and rule.name not in self.off


ALL = RuleSet()  # every rule on


class Placement(NamedTuple):
    """Where a rule placed a record or a parameter: its ``component`` and the ``rule`` that
    decided (its name; ``""`` when none did)."""

    component: Component
    rule: str


@dataclass(frozen=True)
class Parameters:
    """What the parameter rules read: the data ``flow``, the records' ``placed`` placements,
    the last block's ``last`` record, the records of the cores (``in_cores``: theirs and their
    score bias; ``products``: those with MACs), the parameters of two or more dimensions
    (``shaped``) and every parameter's elements (``sizes``)."""

    flow: Flow
    placed: Sequence[Placement]
    last: int
    in_cores: Set[int]
    products: Set[int]
    shaped: Set[str]
    sizes: Mapping[str, int]


@dataclass(frozen=True)
class Reading:
    """How parameter ``name`` (of ``dim`` dimensions, held by module ``owner``) is read: the
    record reading it with the most MACs (``first``; else the first carrying it through free
    ops), the product using the weight ``first`` computes (``user``, ``first`` itself when it
    computes none), the record whose placement it takes (``reader``: ``first`` when it is the
    affine of a norm its own module runs, ``own-module-record``, else ``user``), whether it is
    that norm's affine (``affine``) and whether it joins the sequence (``joined``: only carried,
    or added or concatenated whole, two or more dimensions)."""

    name: str
    dim: int
    owner: str
    first: int
    user: int
    reader: int
    affine: bool
    joined: bool


@dataclass(frozen=True)
class ParamRule(Rule):
    """A rule that places parameters one by one."""

    def place_parameter(self, at: Parameters, read: Reading) -> Placement | None:
        """The placement of the parameter ``read``, or None: the rule does not place it."""
        raise NotImplementedError
