"""The claims of the source notes, read from ``vitprof/data/corrections.toml`` and validated.

The data file states every claim: where it stands in its note, the verbatim quote, the note's
value and unit, the rounding the note allows, what vitprof measures for it and why (see the
comment at the top of the file for the vocabulary). This module only reads it; measuring is
:mod:`.measure`, verdicts are :mod:`.verdicts`. A malformed file is a packaging error, raised as
:class:`ValueError` naming the claim.
"""

from __future__ import annotations

import ast
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cache
from pathlib import Path
from string import Formatter
from typing import Any

from vitprof.core.vocab import Component

DATA = "corrections.toml"
DATA_FILE = Path(__file__).resolve().parents[2] / "data" / DATA


class Figure(StrEnum):
    """What a measurement reads from a model (see the data file's header)."""

    PARAMS = "params"
    MACS = "macs"
    FLOPS = "flops"
    VECTOR_FLOPS = "vector_flops"
    PARAM = "param"
    SHAPE = "shape"
    DEPTH = "depth"
    LAYER_NORMS = "layer_norms"
    PATCHES = "patches"
    TOKENS = "tokens"
    WIDTH = "width"
    MLP_WIDTH = "mlp_width"
    HEAD_DIM = "head_dim"
    PREFIX_TOKENS = "prefix_tokens"
    EXPONENT = "exponent"
    ACTIVATION_BYTES = "activation_bytes"
    INPUT_ELEMENTS = "input_elements"
    IMAGE_SIZE = "image_size"
    AFFINE = "affine"
    AFFINE_HELD = "affine_held"


COUNTED = frozenset({Figure.PARAMS, Figure.MACS, Figure.FLOPS, Figure.VECTOR_FLOPS})
PATTERNED = (Figure.PARAM, Figure.SHAPE, Figure.AFFINE, Figure.AFFINE_HELD)  # read `pattern`


class Scope(StrEnum):
    """Where a counted figure is summed."""

    MODEL = "model"
    BLOCK = "block"
    BLOCKS = "blocks"
    OUTSIDE = "outside"
    ENCODER = "encoder"


@dataclass(frozen=True)
class Measurement:
    """One figure of one model, measured by vitprof on the meta device."""

    model: str
    figure: Figure
    scope: Scope = Scope.MODEL
    components: tuple[Component, ...] = ()
    pattern: str | None = None
    axis: int = -1
    image_size: int | None = None
    options: tuple[tuple[str, int], ...] = ()  # keyword arguments of a note model's factory
    index: int = 0
    sizes: tuple[int, int] | None = None


@dataclass(frozen=True)
class Expression:
    """Arithmetic over numbers and named values: ``100 * encoder / total``."""

    text: str
    names: frozenset[str]


Spec = Measurement | Expression


@dataclass(frozen=True)
class Note:
    """One source note: its file in ``shared/seeds`` and what it describes."""

    id: str
    file: str
    title: str
    compared_with: str


@dataclass(frozen=True)
class OwnCode:
    """The note's own model, or the variant its figure holds for, and how to measure it."""

    label: str
    measure: Spec


class ClaimRule(StrEnum):
    """The rules of :mod:`.verdicts` that decide a claim without a value."""

    SCALES_AS = "scales_as"  # reads the exponent and the term's share of its layer; a power
    SAVES = "saves"  # reads the saving in per cent; the least saving that makes it correct
    FITS = "fits"  # reads the residual of the stated form's fit; the largest residual allowed
    EXCEEDS = "exceeds"  # reads the figures of the model a size name puts higher, of the one
    # below it in the note's ladder and of the standard model of that name; the least margin
    REACHES = "reaches"  # reads a quantity's typical and largest size; the level a statement
    # without a figure implies it reaches


# For each rule: the name of its parameter and the roles of the values it reads.
RULE_INPUTS: dict[ClaimRule, tuple[str, frozenset[str]]] = {
    ClaimRule.SCALES_AS: ("power", frozenset({"exponent", "share"})),
    ClaimRule.SAVES: ("percent", frozenset({"saving"})),
    ClaimRule.FITS: ("within", frozenset({"residual"})),
    ClaimRule.EXCEEDS: ("by", frozenset({"larger", "smaller", "named"})),
    ClaimRule.REACHES: ("level", frozenset({"typical", "largest"})),
}

# What a note writes before a figure it gives as approximate ("~86M", "约 86M", "≈ 85.8"): such a
# figure is a conventional one, read as rounded or cut to its last digit (rule 1).
APPROXIMATE_MARKS = ("~", "约", "≈", "\\approx")


@dataclass(frozen=True)
class Judge:
    """A rule of :mod:`.verdicts` that decides a claim without a value: its parameter and the
    named values it reads, by role."""

    rule: ClaimRule
    parameter: float
    reads: Mapping[str, str]


def judge(table: Mapping[str, Any]) -> Judge:
    """A :class:`Judge` from ``{rule = ..., <parameter> = ..., <role> = "value name", ...}``."""
    rule = ClaimRule(table["rule"])
    parameter, roles = RULE_INPUTS[rule]
    reads = {k: v for k, v in table.items() if k not in ("rule", parameter)}
    if set(reads) != roles:
        raise ValueError(f"rule {rule} reads {sorted(roles)}, not {sorted(reads)}")
    return Judge(rule, table[parameter], reads)


@dataclass(frozen=True)
class Claim:
    """One figure (or a structural statement that drives figures) a note states.

    ``value`` is the note's figure in ``unit`` (None for O-notation claims, which ``judge``
    decides); ``measure`` is the correct value for the model the note describes; ``reason`` a
    template over ``values``, ``value`` and ``measured`` (the measure's result), which the
    values may read too; ``shown``, a template alike, what the page shows as vitprof's value
    where the measure alone does not say it (the terms of a fitted form), else empty.
    ``evaluated``: the value is vitprof's evaluation of the note's formula or code, not a figure
    the note states. ``declared``: the note says it leaves the term out or approximates it.
    """

    id: str
    note: Note
    where: str
    quote: tuple[str, ...]
    value: float | None
    unit: str
    measure: Spec
    reason: str
    values: Mapping[str, Spec] = field(default_factory=dict)
    tolerance: float = 0.0
    own_code: OwnCode | None = None
    judge: Judge | None = None
    evaluated: bool = False
    declared: bool = False
    shown: str = ""

    @property
    def approximate(self) -> bool:
        """The note marks the figure as approximate (:data:`APPROXIMATE_MARKS`) and states its
        rounding (a tolerance): rule 1 reads it as rounded or cut to its last digit."""
        return self.tolerance > 0 and any(mark in quote for quote in self.quote
                                          for mark in APPROXIMATE_MARKS)


_NODES = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Load, ast.Add, ast.Sub, ast.Mult, ast.Div,
          ast.FloorDiv, ast.Pow, ast.USub)
_MEASUREMENT_KEYS = frozenset(Measurement.__dataclass_fields__)
_CLAIM_KEYS = frozenset({"id", "where", "quote", "value", "unit", "measure", "reason", "values",
                         "tolerance", "own_code", "judge", "evaluated", "declared",
                         "shown"})


def expression(text: str) -> Expression:
    """Parse ``text``, allowing only numbers, names, + - * / // ** and parentheses."""
    tree = ast.parse(text, mode="eval")
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Constant):
            if not isinstance(node.value, int | float):
                raise ValueError(f"not a number in {text!r}: {node.value!r}")
        elif not isinstance(node, _NODES):
            raise ValueError(f"only arithmetic is allowed in {text!r}")
    return Expression(text, frozenset(names))


def measurement(table: Mapping[str, Any]) -> Measurement:
    """A :class:`Measurement` from its table, every key and value checked."""
    unknown = set(table) - _MEASUREMENT_KEYS
    if unknown:
        raise ValueError(f"unknown measurement keys {sorted(unknown)}")
    found = Measurement(
        model=table["model"], figure=Figure(table["figure"]),
        scope=Scope(table.get("scope", Scope.MODEL)),
        components=tuple(Component(c) for c in table.get("components", ())),
        pattern=table.get("pattern"), axis=table.get("axis", -1),
        image_size=table.get("image_size"), options=tuple(sorted(table.get("options", {}).items())),
        index=table.get("index", 0),
        sizes=tuple(table["sizes"]) if "sizes" in table else None,
    )
    if (found.figure in PATTERNED) != (found.pattern is not None):
        raise ValueError(f"a pattern goes with {', '.join(PATTERNED)} only: {dict(table)}")
    if (found.figure is Figure.EXPONENT) != (found.sizes is not None):
        raise ValueError(f"sizes go with exponent only: {dict(table)}")
    if found.scope is not Scope.MODEL and found.figure not in COUNTED:
        raise ValueError(f"a scope goes with counted figures only: {dict(table)}")
    if found.pattern is not None:
        re.compile(found.pattern)
    return found


def spec(item: str | Mapping[str, Any]) -> Spec:
    """A figure: an expression string or a measurement table."""
    return expression(item) if isinstance(item, str) else measurement(item)


def _template_names(template: str) -> set[str]:
    return {name for _, name, _, _ in Formatter().parse(template) if name}


def _check_names(claim: Claim) -> None:
    """Every name an expression, the reason or the judge uses is defined."""
    known = set(claim.values) | {"value", "measured"}
    specs = [*claim.values.values(), claim.measure, *([claim.own_code.measure]
                                                      if claim.own_code else [])]
    used = set().union(*(s.names for s in specs if isinstance(s, Expression)))
    used |= _template_names(claim.reason) | _template_names(claim.shown)
    if claim.judge is not None:
        used |= set(claim.judge.reads.values())
    if used - known:
        raise ValueError(f"undefined names {sorted(used - known)}")
    if isinstance(claim.measure, Expression) and {"value", "measured"} & claim.measure.names:
        raise ValueError("the measure cannot read the note's value or itself")


def claim(table: Mapping[str, Any], notes: Mapping[str, Note]) -> Claim:
    """A :class:`Claim` from its table in the data file."""
    try:
        unknown = set(table) - _CLAIM_KEYS
        if unknown:
            raise ValueError(f"unknown keys {sorted(unknown)}")
        own, judge_table = table.get("own_code"), table.get("judge")
        found = Claim(
            id=table["id"], note=notes[table["id"].split("-")[0]], where=table["where"],
            quote=tuple(table["quote"]), value=table.get("value"), unit=table["unit"],
            measure=spec(table["measure"]), reason=table["reason"],
            values={name: spec(item) for name, item in table.get("values", {}).items()},
            tolerance=table.get("tolerance", 0.0),
            own_code=None if own is None else OwnCode(own["label"], spec(own["measure"])),
            judge=None if judge_table is None else judge(judge_table),
            evaluated=table.get("evaluated", False), declared=table.get("declared", False),
            shown=table.get("shown", ""),
        )
        if (found.value is None) == (found.judge is None):
            raise ValueError("a claim has a value or a judge, not both")
        _check_names(found)
    except (KeyError, ValueError, TypeError, SyntaxError) as error:
        raise ValueError(f"{DATA}: claim {table.get('id', '?')}: {error}") from error
    return found


def parse(data: Mapping[str, Any]) -> tuple[dict[str, Note], tuple[Claim, ...]]:
    """The notes and the claims of a parsed data file, in file order; ids are unique."""
    notes = {key: Note(key, **fields) for key, fields in data["notes"].items()}
    claims = tuple(claim(table, notes) for table in data["claim"])
    ids = [c.id for c in claims]
    if len(ids) != len(set(ids)):
        raise ValueError(f"{DATA}: duplicate claim ids")
    return notes, claims


@cache
def load() -> tuple[dict[str, Note], tuple[Claim, ...]]:
    """The notes and claims shipped with vitprof."""
    return parse(tomllib.loads(DATA_FILE.read_text(encoding="utf-8")))
