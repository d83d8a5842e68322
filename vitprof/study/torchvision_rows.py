"""torchvision's published weights, one by one: every classification and video weight's
``meta["num_params"]`` and ``meta["_ops"]`` against vitprof's count of its model.

Each weight's model is built by ``torchvision.models.get_model(name, weights=None)`` on the meta
device with the weight's class count and the sizes its weighted builder takes from it, counted
at batch 1 at the weight's crop size (``weights.transforms.keywords["crop_size"]``), a video
weight over :data:`OPS_FRAMES` frames: the clip ``_ops`` is counted over, whatever the clip
length the weight's ``_docs`` state (``clip_len=32`` for Swin3D, 128 for S3D: the page gives
vitprof's MACs at that length too). The causes are those of the ``published`` peer
(:func:`~vitprof.checks.crosscheck.peers.published.published_causes`: ``_ops`` is GMACs rounded
to the decimals printed; ``num_params`` must be exact), and the params of the modules a weighted
builder drops after loading (:data:`DROPPED_AFTER_LOADING`).
:func:`vitprof.study.pages.torchvision_published.torchvision_published_page` renders them.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import torch
from torch import nn
from tqdm import tqdm

from vitprof.analysis import analyze
from vitprof.checks.crosscheck.causes import Cause
from vitprof.checks.crosscheck.peers.published import published_causes
from vitprof.checks.crosscheck.table import PeerRow, peer_row
from vitprof.models.libraries.base import Published

# Modules a weighted builder drops after loading the weights, so that its num_params leaves
# them out, while get_model(name, weights=None) keeps them: googlenet.py's builder loads with
# aux_logits=True, then sets aux1 and aux2 to None unless aux_logits=True was asked for.
DROPPED_AFTER_LOADING = {"googlenet": ("aux1", "aux2")}
PEER = "torchvision weights"
UNIT = "GMACs (torchvision _ops)"
CLIP_LENGTH = re.compile(r"clip_len=(\d+)")
# The frames of every video weight's _ops: its clip_len where that is 16 (R3D, MC3, R(2+1)D,
# MViT), and Swin3D's and S3D's figures are vitprof's count at 16 frames to the last decimal,
# not at their clip_len (Swin3D-T: 43,882,229,760 MACs at 16 frames, published 43.882).
OPS_FRAMES = 16


@dataclass(frozen=True)
class WeightResult:
    """One weight: its model, kind, input, published figures and the peer row against vitprof,
    or why vitprof could not count it."""

    weight: str  # ResNet50_Weights.IMAGENET1K_V2
    model: str  # resnet50
    kind: str  # classification or video
    image_size: int
    frames: int | None  # counted over (OPS_FRAMES for a video weight)
    clip_length: int | None  # the frames its _docs state (clip_len)
    num_params: int
    ops: float  # GMACs, as printed
    peer: PeerRow | None
    error: str = ""
    at_clip_length: int | None = None  # vitprof's MACs at clip_length, where it is not frames

    @property
    def reconciled(self) -> bool:
        return (self.peer is not None and self.peer.residual_macs == 0
                and self.peer.residual_params == 0)


def weights() -> list[tuple[str, str, Any]]:
    """(kind, model name, weights enum member) of every classification and video weight of the
    installed torchvision, in its own order."""
    import torchvision.models as tvm

    return [(kind, name, member) for kind, module in (("classification", tvm),
                                                     ("video", tvm.video))
            for name in tvm.list_models(module=module) for member in tvm.get_model_weights(name)]


def crop_size(member: Any) -> int:
    """The square crop a weight is evaluated at."""
    crop = member.transforms.keywords["crop_size"]
    return int(crop[0] if isinstance(crop, list | tuple) else crop)


def clip_length(member: Any) -> int:
    """The frames of a video weight's clip, as its ``_docs`` state them (``clip_len=16``)."""
    found = CLIP_LENGTH.search(member.meta["_docs"])
    if found is None:
        raise ValueError(f"{member}: its _docs state no clip_len")
    return int(found.group(1))


def explain_weight(kind: str, name: str, member: Any) -> WeightResult:
    """Count the weight's model and explain its figures; a model that cannot be built or run is
    a result with its error (one line), not an exception."""

    meta = member.meta
    size = crop_size(member)
    clip = clip_length(member) if kind == "video" else None
    frames = OPS_FRAMES if kind == "video" else None
    published = Published(f"torchvision {member}", meta["num_params"], meta["_ops"])
    head = (str(member), name, kind, size, frames, clip, meta["num_params"], meta["_ops"])
    try:
        model = built(name, meta)
        profile = analyze(model, image_size=size, frames=frames, name=name)
        at_clip = (analyze(model, image_size=size, frames=clip, name=name).totals.macs
                   if clip is not None and clip != frames else None)
    except Exception as error:  # a model whose build or forward raises
        lines = str(error).strip().splitlines()
        return WeightResult(*head, None, f"{type(error).__name__}: {lines[0] if lines else ''}")
    macs = int(Decimal(str(published.gmacs)) * 10**9)
    causes = dropped_causes(name, model) + published_causes(profile, published)
    row = peer_row(PEER, published.gmacs, UNIT, macs, published.params, profile.totals,
                   causes, published.source)
    return WeightResult(*head, row, at_clip_length=at_clip)


def sized_as_weighted(name: str, meta: dict[str, Any]) -> dict[str, Any]:
    """The sizes a weighted builder of ``name`` takes from the weight's ``meta`` (its
    ``_ovewrite_named_param`` calls), which ``weights=None`` leaves at their defaults: the ViTs'
    ``image_size`` (518 for ``ViT_H_14_Weights.IMAGENET1K_SWAG_E2E_V1``) and MaxViT's
    ``input_size`` (MViT's builders pass the sizes its weights have themselves)."""
    import torchvision.models as tvm

    module = tvm.get_model_builder(name).__module__.rpartition(".")[2]
    if module == "vision_transformer":
        return {"image_size": meta["min_size"][0]}
    if module == "maxvit":
        return {"input_size": meta["min_size"]}
    return {}


def built(name: str, meta: dict[str, Any]) -> nn.Module:
    """``get_model(name, weights=None)`` with the weight's class count (the builder's own where
    the weight has no categories) and sizes
    (:func:`sized_as_weighted`), on the meta device; a builder that reads tensor values while it
    builds (RegNet's block widths: ``.tolist()`` of a tensor, which meta has not) is run on the
    CPU, then moved to meta."""
    import torchvision.models as tvm

    categories = meta["categories"]  # None for a feature extractor's weights (VGG16 FEATURES)
    arguments = {**({"num_classes": len(categories)} if categories else {}),
                 **sized_as_weighted(name, meta)}
    try:
        with torch.device("meta"):
            return tvm.get_model(name, weights=None, **arguments)
    except NotImplementedError:
        return tvm.get_model(name, weights=None, **arguments).to("meta")


def dropped_causes(name: str, model: nn.Module) -> list[Cause]:
    """The params of the modules the weighted builder of ``name`` drops after loading
    (:data:`DROPPED_AFTER_LOADING`); in eval mode they run no MACs."""
    dropped = DROPPED_AFTER_LOADING.get(name, ())
    params = sum(p.numel() for module in dropped
                 for p in model.get_submodule(module).parameters())
    return [Cause(f"the weighted builder drops {', '.join(dropped)} after loading (auxiliary "
                  f"classifiers, which eval mode does not run): their {params:,} params",
                  params=-params)] if params else []


def torchvision_rows(models: list[str] | None = None) -> list[WeightResult]:
    """Every weight counted and explained (only the weights of ``models``, for tests), with a
    progress bar on stderr."""
    selected = [w for w in weights() if models is None or w[1] in models]
    rows = tqdm(selected, desc="torchvision weights", unit="weight", disable=None,
                file=sys.stderr)
    return [explain_weight(*w) for w in rows]
