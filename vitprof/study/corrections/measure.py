"""The measuring harness: vitprof profiles of the notes' models, and the figures a claim reads.

Every model, image size and set of factory options is analyzed once, on the meta device, at
batch 1 unless the options name a ``batch_size``. A claim's figures (its measure, its named
values, its own-code measure) are evaluated in the order they need each other: an expression
reads the values it names, ``value`` is the note's figure and ``measured`` the claim's measure.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable, Mapping
from string import Formatter
from typing import Any

import torch

from vitprof.analysis import analyze
from vitprof.core.records import Counts
from vitprof.core.vocab import Component
from vitprof.count.result import Profile
from vitprof.models.closed_form import ViTSpec
from vitprof.models.spec_inference import spec_from_model
from vitprof.models.zoo import ZOO, build
from vitprof.study.corrections.affine import affine
from vitprof.study.corrections.claims import (
    COUNTED,
    Claim,
    Expression,
    Figure,
    Measurement,
    Scope,
    Spec,
)

Number = int | float


def _built(name: str, image_size: int | None, options: dict[str, int]) -> torch.nn.Module:
    """The note model ``name`` of the zoo built with its builder's further ``options``: note
    001 for another BATCH_SIZE (its parameters carry that axis), note 002's linear attention
    as written (num_heads = 1: one (D, D) context)."""
    entry = ZOO[name]
    size = entry.image_size if image_size is None else image_size
    return entry.build(size, entry.num_classes, **options)


class Lab:
    """Measurements on vitprof profiles; each model, size and batch is analyzed once."""

    def __init__(self) -> None:
        self._profiles: dict[tuple[str, int | None, tuple[tuple[str, int], ...]], Profile] = {}
        self._specs: dict[str, ViTSpec] = {}

    def profile(self, name: str, image_size: int | None = None,
                options: tuple[tuple[str, int], ...] = ()) -> Profile:
        key = (name, image_size, options)
        if key not in self._profiles:
            if not options:
                self._profiles[key] = analyze(name, image_size=image_size)
            else:
                with torch.device("meta"):
                    model = _built(name, image_size, dict(options))
                batch = dict(options).get("batch_size", 1)
                self._profiles[key] = analyze(model, batch_size=batch, name=name)
        return self._profiles[key]

    def counts(self, m: Measurement) -> Counts:
        """Counts of ``m.components`` (every component when none) in ``m.scope``."""
        profile = self.profile(m.model, m.image_size, m.options)
        picked = m.components or tuple(Component)
        if m.scope is Scope.ENCODER:
            return (self.counts(_scoped(m, Scope.BLOCKS))
                    + self.counts(_scoped(m, Scope.OUTSIDE, (Component.NORM,))))
        if m.scope is Scope.OUTSIDE:
            groups = [profile.outside]
        elif m.scope is Scope.MODEL:
            groups = [profile.components]
        elif m.scope is Scope.BLOCK:
            groups = [profile.blocks[m.index].components]
        else:
            groups = [b.components for b in profile.blocks]
        return sum((g[c] for g in groups for c in picked), Counts())

    def spec(self, name: str) -> ViTSpec:
        """The model's spec as :func:`vitprof.models.spec_inference.spec_from_model` infers it."""
        if name not in self._specs:
            self._specs[name] = spec_from_model(build(name, device="meta").module)
        return self._specs[name]

    def measure(self, m: Measurement) -> Number:
        """The figure ``m`` names."""
        if m.figure in COUNTED:
            return getattr(self.counts(m), m.figure)
        profile = self.profile(m.model, m.image_size, m.options)
        params = profile.params
        match m.figure:
            case Figure.PARAM:
                return sum(p.numel for p in params if re.search(m.pattern or "", p.name))
            case Figure.SHAPE:
                return next(p.shape for p in params if re.search(m.pattern or "", p.name))[m.axis]
            case Figure.DEPTH:
                return len(profile.blocks)
            case Figure.LAYER_NORMS:  # the norm component's parameters named *weight
                return sum(1 for p in params
                           if p.component is Component.NORM and p.name.endswith("weight"))
            case Figure.PATCHES:  # patch-embedding MACs / its weight's elements
                weight = sum(p.numel for p in params
                             if p.component is Component.PATCH_EMBED and p.name.endswith("weight"))
                return profile.components[Component.PATCH_EMBED].macs // weight
            case Figure.TOKENS:  # the rows of the position embedding
                return next(p.shape for p in params
                            if re.search(r"pos_embed(ding)?$", p.name))[-2]
            case Figure.EXPONENT:
                return self._exponent(m)
            case Figure.ACTIVATION_BYTES:  # the outputs of every counted op of one forward
                return sum(op.bytes_written for op in profile.ops)
            case Figure.INPUT_ELEMENTS:  # the values of the input tensor, the batch included
                return math.prod(profile.input_shape)
            case Figure.AFFINE | Figure.AFFINE_HELD:  # 1: the module is an affine map
                return affine(m.model, m.pattern or "", profile.input_shape,
                              hold_weights=m.figure is Figure.AFFINE_HELD)
        return getattr(self.spec(m.model), m.figure)

    def _exponent(self, m: Measurement) -> float:
        """How ``m.components``' MACs grow with the token count N between the two image sizes:
        the k in MACs ~ N^k."""
        sizes = m.sizes or (0, 0)
        macs = [self.measure(_sized(m, Figure.MACS, s)) for s in sizes]
        tokens = [self.measure(_sized(m, Figure.TOKENS, s)) for s in sizes]
        return math.log(macs[1] / macs[0]) / math.log(tokens[1] / tokens[0])


def _scoped(m: Measurement, scope: Scope, components: tuple[Component, ...] | None = None
            ) -> Measurement:
    return Measurement(m.model, m.figure, scope, m.components if components is None else components,
                       image_size=m.image_size, options=m.options)


def _sized(m: Measurement, figure: Figure, size: int) -> Measurement:
    components = m.components if figure is Figure.MACS else ()
    return Measurement(m.model, figure, components=components, image_size=size,
                       options=m.options)


_BINARY: dict[type, Callable[[Any, Any], Number]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Pow: operator.pow,
}


def _arithmetic(node: ast.AST, names: Mapping[str, Number]) -> Number:
    """Evaluate a tree :func:`~.claims.expression` validated."""
    if isinstance(node, ast.Expression):
        return _arithmetic(node.body, names)
    if isinstance(node, ast.Constant):
        assert isinstance(node.value, int | float)
        return node.value
    if isinstance(node, ast.Name):
        return names[node.id]
    if isinstance(node, ast.UnaryOp):
        return -_arithmetic(node.operand, names)
    assert isinstance(node, ast.BinOp)
    return _BINARY[type(node.op)](_arithmetic(node.left, names), _arithmetic(node.right, names))


class Figures:
    """The figures of one claim, each evaluated once, on demand."""

    def __init__(self, claim: Claim, lab: Lab) -> None:
        self.claim, self.lab = claim, lab
        self.known: dict[str, Number] = {} if claim.value is None else {"value": claim.value}

    def get(self, name: str) -> Number:
        """A named value, ``value`` (the note's) or ``measured`` (the claim's measure)."""
        if name not in self.known:
            item = self.claim.measure if name == "measured" else self.claim.values[name]
            self.known[name] = self.evaluate(item)
        return self.known[name]

    def evaluate(self, item: Spec) -> Number:
        if isinstance(item, Measurement):
            return self.lab.measure(item)
        assert isinstance(item, Expression)
        return _arithmetic(ast.parse(item.text, mode="eval"),
                           {name: self.get(name) for name in item.names})


class _ReasonFormatter(Formatter):
    """``{x}``: an integer with thousands separators; ``{x:M}``: millions with two decimals."""

    def format_field(self, value: Any, format_spec: str) -> str:
        if format_spec == "M":
            return f"{value / 1e6:.2f}M"
        if not format_spec and isinstance(value, int):
            return f"{value:,}"
        return format(value, format_spec)


def reason(template: str, figures: Figures) -> str:
    """A template of the claim (its reason, or what it shows) with its figures filled in."""
    names = {name for _, name, _, _ in Formatter().parse(template) if name}
    return _ReasonFormatter().format(template, **{name: figures.get(name) for name in names})
