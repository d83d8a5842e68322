"""Sweeps: one model analyzed over a range of image sizes, depths or widths.

Every point is a full :func:`vitprof.analyze` on the meta device (nothing is allocated or
computed, so a point costs a fraction of a second). Along the image-size axis the attention core
grows with the square of the token count N (``QK^T`` and ``AV`` are N x N per head) while every
other component grows linearly with N, so the ratio attention-core MACs / MLP MACs is linear in N:
:meth:`Sweep.crossover` finds where it reaches 1 from the measured points, exactly whenever the
model follows that law (for a plain ViT, core = 2 N^2 D and MLP = 2 N D M per block, so the
crossover is at N = M tokens).

Depth and width sweeps rebuild the model with one dimension changed, by the model library that
has a variant for it (:attr:`vitprof.models.libraries.base.ModelLibrary.variant`): the torchvision
``VisionTransformer`` (all ``vit_*`` names) and timm ViTs. A width sweep keeps the head width d
(and torchvision's the MLP ratio M / D) of the original model.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from itertools import pairwise
from typing import Any

from torch import nn

from vitprof.analysis import analyze
from vitprof.core.display import Shown
from vitprof.core.errors import UserError
from vitprof.core.progress import progress as progress_bar
from vitprof.core.records import UNITS, Component, Counts
from vitprof.core.vocab import SWEEP_AXES as AXES
from vitprof.core.vocab import SweepAxis
from vitprof.count.result import Profile
from vitprof.models.libraries import LIBRARIES
from vitprof.models.zoo import build, infer_patch_size, published_sizes
from vitprof.workload import InputRequest


@dataclass(frozen=True)
class SweepPoint:
    """One analyzed variant: the swept value, the counts per component and the input they
    were counted on (its shape, batch first, and dtype)."""

    value: int
    patches: int | None  # patch tokens per image (image-size sweeps only)
    components: dict[Component, Counts]
    input_shape: tuple[int, ...]
    input_dtype: str

    @property
    def totals(self) -> Counts:
        return sum(self.components.values(), Counts())

    @property
    def attn_core(self) -> Counts:
        return self.components[Component.ATTN_CORE]

    @property
    def mlp(self) -> Counts:
        return self.components[Component.MLP]

    @property
    def attention(self) -> Counts:
        """The attention layer as a whole: qkv + core + proj (as :attr:`Profile.attention`)."""
        c = self.components
        return c[Component.ATTN_QKV] + c[Component.ATTN_CORE] + c[Component.ATTN_PROJ]


@dataclass(frozen=True)
class Crossover:
    """Where the attention core's MACs reach the MLP's, interpolated between two swept sizes.

    ``tokens`` is N* = 1 / slope of (core / mlp) against the patch count, exact when core grows
    as N^2 and the MLP as N; ``patches`` and ``image_size`` are the matching patch count and
    image side (``patch_size * sqrt(patches)``, not necessarily a multiple of the patch size).
    ``first_swept`` is the smallest swept image size where core MACs exceed MLP MACs.
    """

    tokens: Fraction
    patches: Fraction
    image_size: float
    first_swept: int


@dataclass(frozen=True, repr=False)
class Sweep(Shown):
    """A model's counts along one axis, in the order the values were given, and the warnings of
    its analyses (each once, in the order first met)."""

    model: str
    axis: str
    patch_size: int | None
    points: tuple[SweepPoint, ...]
    warnings: tuple[str, ...] = ()
    marks: tuple[int, ...] = ()  # image sizes the model is made for (:func:`size_marks`)

    def crossover(self) -> Crossover | None:
        """The attention-core / MLP crossover of an image-size sweep, if the sweep brackets it."""
        if self.axis != SweepAxis.IMAGE_SIZE or self.patch_size is None:
            return None
        measured = [(p, _core_ratio(p)) for p in sorted(self.points, key=lambda p: p.value)]
        for (a, ra), (b, rb) in pairwise(measured):
            if ra is None or rb is None or not ra <= 1 < rb:
                continue
            slope = (rb - ra) / (b.patches - a.patches)  # type: ignore[operator]
            patches = a.patches + (1 - ra) / slope  # type: ignore[operator]
            return Crossover(
                tokens=1 / slope,
                patches=patches,
                image_size=self.patch_size * math.sqrt(patches),
                first_swept=b.value,
            )
        return None

    def to_dict(self) -> dict[str, Any]:
        """The JSON interface: the model, the axis, the units, the warnings, every point's
        input, totals and components, and the crossover (null when the sweep does not bracket
        it)."""
        crossover = self.crossover()
        return {
            "model": self.model, "axis": self.axis, "units": dict(UNITS),
            "warnings": list(self.warnings),
            "points": [{"value": p.value, "patches": p.patches,
                        "input_shape": list(p.input_shape), "input_dtype": p.input_dtype,
                        "totals": p.totals.as_dict(),
                        "components": {str(c): v.as_dict() for c, v in p.components.items()}}
                       for p in self.points],
            "crossover": None if crossover is None else {
                "tokens": float(crossover.tokens), "patches": float(crossover.patches),
                "image_size": crossover.image_size, "first_swept": crossover.first_swept,
            },
        }


def _core_ratio(point: SweepPoint) -> Fraction | None:
    return Fraction(point.attn_core.macs, point.mlp.macs) if point.mlp.macs else None


# ------------------------------------------------------------------------------- variants


def variant_factory(name: str, axis: str) -> Callable[[int], nn.Module]:
    """A function value -> the model ``name`` with its depth or width set to value, on meta."""
    base = build(name, device="meta").module
    rebuilders = [library for library in LIBRARIES if library.variant is not None]
    made = (library.variant(name, base, axis) for library in LIBRARIES
            if library.variant is not None)
    make = next((variant for variant in made if variant is not None), None)
    if make is None:
        raise UserError(
            f"--{axis} sweeps rebuild {' and '.join(r.name for r in rebuilders)} ViTs; {name} "
            f"is neither (use --image-size, or a {'/'.join(r.name for r in rebuilders)} model)"
        )

    def on_meta(value: int) -> nn.Module:
        import torch

        with torch.device("meta"):
            return make(value)

    return on_meta


# ------------------------------------------------------------------------------- sweeping


def parse_values(text: str) -> list[int]:
    """``"224,384,518"`` -> ``[224, 384, 518]``; each value a positive integer, no repeats."""
    values = []
    for part in text.split(","):
        try:
            value = int(part.strip())
        except ValueError:
            raise UserError(f"expected comma-separated integers, got '{text}'") from None
        if value < 1:
            raise UserError(f"sweep values must be positive, got {value}")
        values.append(value)
    if len(set(values)) != len(values):
        raise UserError(f"sweep values repeat: '{text}'")
    return values


def sweep(
    name: str, axis: str, values: Sequence[int], *, batch_size: int = 1,
    progress: bool = True, request: InputRequest | None = None,
) -> Sweep:
    """Analyze ``name`` at every value of ``axis`` (``image_size``, ``depth`` or ``width``),
    the rest of the input held at ``request`` (:class:`vitprof.workload.InputRequest`; else
    the one ``batch_size`` makes), its image size replaced on the ``image_size`` axis."""
    request = InputRequest.of(request, batch_size=batch_size)
    if axis not in AXES:
        raise ValueError(f"unknown sweep axis {axis}")
    if not values:
        raise UserError("a sweep needs at least one value")
    make = variant_factory(name, axis) if axis != SweepAxis.IMAGE_SIZE else None
    built = build(name, device="meta")
    patch_size = infer_patch_size(built.module)
    profiles = []
    for value in progress_bar(values, desc=f"{name} {axis}", unit="point", enabled=progress):
        if make is None:
            profile = analyze(name, request=replace(request, image_size=value))
        else:
            profile = analyze(make(value), request=request, name=name)
        profiles.append((value, profile))
    return sweep_from(name, axis, patch_size, profiles, size_marks(name, built.image_size))


def size_marks(name: str, own: int | tuple[int, int] | None) -> tuple[int, ...]:
    """The image sizes to mark on an image-size sweep of ``name``: its own size ``own`` (a
    square one) and the sizes its published weights are made for, where vitprof knows them
    (:func:`vitprof.models.zoo.published_sizes`: 224 and 384 for vit_b_16, 224 and 518 for
    vit_h_14). Each is a size the model is made for; sizes usual for other models (518 on a
    /16 model, 224 on a 32 px model) are not marked."""
    sizes = set(published_sizes(name))
    if isinstance(own, int):
        sizes.add(own)
    return tuple(sorted(sizes))


def sweep_from(
    name: str, axis: str, patch_size: int | None, profiles: Sequence[tuple[int, Profile]],
    marks: tuple[int, ...] = (),
) -> Sweep:
    """The Sweep of analyses made already: ``(value, Profile)`` pairs of ``name`` along
    ``axis``, in order; patch counts for image sizes when ``patch_size`` is known; ``marks``
    the sizes to mark (:func:`size_marks`)."""
    points = []
    warnings: dict[str, None] = {}
    for value, profile in profiles:
        image = axis == SweepAxis.IMAGE_SIZE
        patches = (value // patch_size) ** 2 if image and patch_size else None
        points.append(SweepPoint(value, patches, dict(profile.components), profile.input_shape,
                                 profile.input_dtype))
        warnings.update(dict.fromkeys(profile.warnings))
    return Sweep(name, axis, patch_size, tuple(points), tuple(warnings), marks)
