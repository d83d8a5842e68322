"""What one model's page shows, computed once: its Profile, its cross-check, its
image-size sweep and the closed form's crossover.

:func:`model_page_inputs` builds and analyses the model here, and only here;
:func:`vitprof.study.pages.markdown.model_page` turns the result into markdown and figures
without counting anything. The Profile at the model's own size is reused by the cross-check
(its peers run on the meta and CPU builds of :class:`~vitprof.checks.crosscheck.Subject`,
the meta build also gives the patch size and the spec) and by the sweep's first point.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction

from torch import nn

from vitprof.analysis import analyze
from vitprof.checks.crosscheck import TABLE, CrossCheck, Subject, check_subject
from vitprof.core.errors import UserError
from vitprof.core.vocab import Component
from vitprof.count.result import Profile
from vitprof.models.closed_form import AttentionKind, block_counts
from vitprof.models.spec_inference import spec_from_model
from vitprof.models.zoo import infer_patch_size
from vitprof.sweep import Sweep, size_marks, sweep_from
from vitprof.workload import InputRequest

SWEEP_POINTS = 8
SWEEP_REACH = 1.5  # image-size sweeps run to this multiple of the estimated crossover size

# The peers a model page shows: those vitprof depends on and those the ``test`` extra installs,
# so that ``report --check`` regenerates the same page wherever the suite runs. The others
# (DeepSpeed builds from source; a peer installed by its own package) are left to
# ``vitprof crosscheck``.
PAGE_PEERS = tuple(peer.name for peer in TABLE if not peer.optional or "test" in peer.extras)


@dataclass(frozen=True)
class ClosedFormCrossover:
    """Where the closed form puts the attention-core / MLP crossover: N* = M tokens for a
    softmax ViT of width D = ``width`` and MLP width M = ``mlp_width``."""

    width: int
    mlp_width: int
    tokens: Fraction


@dataclass(frozen=True)
class ModelPageInputs:
    """Everything a model page shows; ``scaling`` is None when no patch size is known, or
    when the whole input shape or a patch mask that cannot be rebuilt per size was given (no
    image-size sweep; ``not_swept`` then says why: :func:`not_swept`),
    ``closed_form`` when no softmax-ViT spec describes the model."""

    profile: Profile
    crosscheck: CrossCheck
    scaling: Sweep | None
    closed_form: ClosedFormCrossover | None
    not_swept: str = ""  # why there is no image-size sweep, when the page should say it


def scaling_sizes(profile: Profile, patch_size: int) -> list[int]:
    """Image sizes (multiples of the patch size) from the model's own size to about 1.5 x the
    size where the attention core is estimated to overtake the MLP (patches / core ratio),
    or to 4 x its own size when there is no such size."""
    start = profile.input_shape[-1] // patch_size
    core, mlp = profile.components[Component.ATTN_CORE].macs, profile.components[Component.MLP].macs
    if core and mlp:
        side = math.sqrt(start * start * mlp / core)
        stop = max(start + SWEEP_POINTS, math.ceil(SWEEP_REACH * side))
    else:
        stop = 4 * start
    steps = [round(start + i * (stop - start) / (SWEEP_POINTS - 1)) for i in range(SWEEP_POINTS)]
    return sorted({k * patch_size for k in steps})


def closed_form_crossover(module: nn.Module) -> ClosedFormCrossover | None:
    """The crossover token count from :mod:`vitprof.models.closed_form` and the spec of
    ``module``, or None when no spec describes it or its attention is not softmax."""
    try:
        spec = spec_from_model(module)
    except UserError:
        return None
    if spec.attention is not AttentionKind.SOFTMAX:
        return None
    tokens = spec.prefix_tokens + spec.num_patches
    block = block_counts(spec, tokens)
    crossover = Fraction(tokens * block[Component.MLP].macs, block[Component.ATTN_CORE].macs)
    return ClosedFormCrossover(spec.width, spec.mlp_width, crossover)


def image_size_sweep(
    profile: Profile, patch_size: int, held: InputRequest | None = None,
    recognizer: str = "auto",
) -> Sweep:
    """The model of ``profile`` analysed at :func:`scaling_sizes` (square images), ``profile``
    itself at its own size where that is a square; the rest of the input (frames, channels,
    dtype) is ``held``'s and the breakdown ``recognizer``'s, the same at every size, and a patch
    mask is rebuilt over each size's patches (:func:`_at_size`; :func:`not_swept` first says
    whether it can be)."""
    height, width = profile.input_shape[-2:]
    own = width if height == width else None
    sizes = scaling_sizes(profile, patch_size)
    profiles = [(size, profile if size == own
                 else analyze(profile.model, request=_at_size(held or InputRequest(), size,
                                                              patch_size),
                              recognizer=recognizer))
                for size in sizes]
    return sweep_from(profile.model, "image_size", patch_size, profiles,
                      size_marks(profile.model, own))


NOT_SWEPT = "not swept: the whole input shape was given (--input-shape fixes every size)"


def _grid(height: int, width: int, patch_size: int) -> int:
    """The patches of a ``height`` x ``width`` image cut into ``patch_size`` squares."""
    return (height // patch_size) * (width // patch_size)


def _at_size(held: InputRequest, size: int, patch_size: int) -> InputRequest:
    """``held`` at the square image ``size``: its patch mask, if any, over that size's
    patches (the same batch)."""
    mask = held.patch_mask
    if mask is not None:
        mask = (mask[0], _grid(size, size, patch_size))
    return replace(held, image_size=size, patch_mask=mask)


def not_swept(request: InputRequest, profile: Profile, patch_size: int) -> str:
    """Why the page has no image-size sweep of ``profile`` (analysed at ``request``), or ""
    where it has one: the whole input shape was given, or a patch mask that is not over the
    patches of the size analysed (cut into ``patch_size`` squares), which no other size's
    mask can be rebuilt from."""
    if request.input_shape is not None:
        return NOT_SWEPT
    height, width = profile.input_shape[-2:]
    patches = _grid(height, width, patch_size)
    if request.patch_mask is not None and request.patch_mask[1] != patches:
        return (f"not swept: the patch mask covers {request.patch_mask[1]} patches, not the "
                f"{patches} of the {height}x{width} input in {patch_size}-pixel patches, so "
                f"it cannot be rebuilt at other sizes")
    return ""


def model_page_inputs(
    name: str, request: InputRequest | None = None, recognizer: str = "auto"
) -> ModelPageInputs:
    """What the page of the model ``name`` (any name :func:`vitprof.analyze` accepts) shows, at
    the input ``request`` asks for (:class:`vitprof.workload.InputRequest`; None: the model's
    own), broken down by
    ``recognizer`` (``analyze``'s): one analysis there, one per other swept size, one meta and
    one CPU build for the peers. The sweep holds the frames, channels, dtype and recognizer and
    sweeps square image sizes from the width analysed, a patch mask rebuilt over each size's
    patches; with ``input_shape`` there is none."""
    request = request or InputRequest()
    profile = analyze(name, request=request, recognizer=recognizer)
    subject = Subject(profile, profile.model, request)
    patch_size = infer_patch_size(subject.meta_model)
    closed_form = closed_form_crossover(subject.meta_model)  # before any peer runs on it
    why = not_swept(request, profile, patch_size) if patch_size else ""
    return ModelPageInputs(
        profile=profile,
        crosscheck=check_subject(subject, PAGE_PEERS),
        scaling=image_size_sweep(profile, patch_size, request, recognizer)
        if patch_size and not why else None,
        closed_form=closed_form,
        not_swept=why,
    )
