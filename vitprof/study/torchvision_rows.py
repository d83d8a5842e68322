"""torchvision's published weights, one by one: every classification and video weight's
``meta["num_params"]`` and ``meta["_ops"]`` against vitprof's count of its model.

Each weight's model is built by ``torchvision.models.get_model(name, weights=None)`` on the meta
device with the weight's class count, counted at batch 1 at the weight's crop size
(``weights.transforms.keywords["crop_size"]``), a video weight over the clip length its
``_docs`` states (``clip_len=16``). The causes are those of the ``published`` peer
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
from vitprof.models.family.base import Published

# Modules a weighted builder drops after loading the weights, so that its num_params leaves
# them out, while get_model(name, weights=None) keeps them: googlenet.py's builder loads with
# aux_logits=True, then sets aux1 and aux2 to None unless aux_logits=True was asked for.
DROPPED_AFTER_LOADING = {"googlenet": ("aux1", "aux2")}
PEER = "torchvision weights"
UNIT = "GMACs (torchvision _ops)"
CLIP_LENGTH = re.compile(r"clip_len=(\d+)")


@dataclass(frozen=True)
class WeightResult:
    """One weight: its model, kind, input, published figures and the peer row against vitprof,
    or why vitprof could not count it."""

    weight: str  # ResNet50_Weights.IMAGENET1K_V2
    model: str  # resnet50
    kind: str  # classification or video
    image_size: int
    frames: int | None
    num_params: int
    ops: float  # GMACs, as printed
    peer: PeerRow | None
    error: str = ""

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
    frames = clip_length(member) if kind == "video" else None
    published = Published(f"torchvision {member}", meta["num_params"], meta["_ops"])
    head = (str(member), name, kind, size, frames, meta["num_params"], meta["_ops"])
    try:
        model = built(name, len(meta["categories"]))
        profile = analyze(model, image_size=size, frames=frames, name=name)
    except Exception as error:  # a model whose build or forward raises
        lines = str(error).strip().splitlines()
        return WeightResult(*head, None, f"{type(error).__name__}: {lines[0] if lines else ''}")
    macs = int(Decimal(str(published.gmacs)) * 10**9)
    causes = dropped_causes(name, model) + published_causes(profile, published)
    row = peer_row(PEER, published.gmacs, UNIT, macs, published.params, profile.totals,
                   causes, published.source)
    return WeightResult(*head, row)


def built(name: str, num_classes: int) -> nn.Module:
    """``get_model(name, weights=None)`` on the meta device; a builder that reads tensor values
    while it builds (RegNet's block widths: ``.tolist()`` of a tensor, which meta has not) is
    run on the CPU, then moved to meta."""
    import torchvision.models as tvm

    try:
        with torch.device("meta"):
            return tvm.get_model(name, weights=None, num_classes=num_classes)
    except NotImplementedError:
        return tvm.get_model(name, weights=None, num_classes=num_classes).to("meta")


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
