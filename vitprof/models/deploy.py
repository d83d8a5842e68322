"""The deploy form of a model: what runs after inference-time re-parameterisation.

``deploy_form(model)`` returns a *copy* (the caller's model is never touched) in which

1. each model library's deploy step runs
   (:attr:`vitprof.models.libraries.base.ModelLibrary.deploy`, in the registry's order): timm's
   re-parameterisation where a module has it (:func:`timm.utils.reparameterize_model`:
   ``fuse()``, ``reparameterize()`` or ``switch_to_deploy()`` on every child that defines one,
   e.g. LeViT's ``ConvNorm`` / ``LinearNorm``, FastViT's MobileOne branches), skipped without
   timm;
2. every BatchNorm that immediately follows a convolution or a linear layer in the same
   ``nn.Sequential`` (and normalises that layer's output channels) is folded into it: the layer
   gains a bias, the BatchNorm becomes ``nn.Identity``.

The fold is the usual one, exact in real arithmetic: with ``s = gamma / sqrt(var + eps)``,
``W' = W * s`` (per output channel) and ``b' = beta + (b - mean) * s``. It runs on any device,
meta included (no weights are needed to count). Counting consequences of one fold over ``C``
channels: the BatchNorm's ``2C`` affine parameters and its running-statistics buffers go, the
layer gains ``C`` bias parameters, MACs are unchanged and the BatchNorm's vector FLOPs go (the
layer's bias add takes their place).
"""

from __future__ import annotations

import copy
from itertools import pairwise

import torch
from torch import nn

from vitprof.models.libraries import LIBRARIES

FOLDABLE = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Linear)
NORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)


def deploy_form(model: nn.Module) -> nn.Module:
    """A copy of ``model`` re-parameterised by timm and with BatchNorm folded (module docs)."""
    copied = reparameterized(model)
    fold_batch_norms(copied)
    return copied


def reparameterized(model: nn.Module) -> nn.Module:
    """A copy of ``model`` after the libraries' deploy steps only (timm's
    ``reparameterize_model``; a plain copy without timm): what timm itself deploys, and what
    its results tables count."""
    copied = copy.deepcopy(model)
    with torch.device(_device(model)):  # timm's fuse() builds its new layers on this device
        for library in LIBRARIES:
            if library.deploy is not None:
                library.deploy(copied)
    return copied


def _device(model: nn.Module) -> torch.device:
    for tensor in [*model.parameters(), *model.buffers()]:
        return tensor.device
    return torch.device("cpu")


def fold_batch_norms(model: nn.Module) -> int:
    """Fold, in place, every BatchNorm that follows a conv or linear in a Sequential; how many."""
    folded = 0
    for sequential in [m for m in model.modules() if isinstance(m, nn.Sequential)]:
        names = list(sequential._modules)
        for first, second in pairwise(names):
            layer, norm = sequential._modules[first], sequential._modules[second]
            if _foldable(layer, norm):
                sequential._modules[first] = fold(layer, norm)  # type: ignore[arg-type]
                sequential._modules[second] = nn.Identity()
                folded += 1
    return folded


def _out_channels(layer: nn.Conv1d | nn.Conv2d | nn.Conv3d | nn.Linear) -> int:
    return layer.out_features if isinstance(layer, nn.Linear) else layer.out_channels


def _foldable(layer: nn.Module | None, norm: nn.Module | None) -> bool:
    return (
        isinstance(layer, FOLDABLE) and isinstance(norm, NORMS)
        and norm.track_running_stats and norm.running_var is not None
        and norm.num_features == _out_channels(layer)
    )


@torch.no_grad()
def fold(
    layer: nn.Conv1d | nn.Conv2d | nn.Conv3d | nn.Linear,
    norm: nn.BatchNorm1d | nn.BatchNorm2d | nn.BatchNorm3d,
) -> nn.Module:
    """A new layer computing ``norm(layer(x))`` in eval mode, with a bias."""
    mean, var = norm.running_mean, norm.running_var
    if mean is None or var is None:
        raise ValueError("folding needs a BatchNorm that tracks its running statistics")
    weight = layer.weight
    fused = copy.deepcopy(layer)
    fused.bias = nn.Parameter(torch.empty(_out_channels(layer), device=weight.device,
                                          dtype=weight.dtype))
    scale = torch.rsqrt(var + norm.eps)
    if norm.weight is not None:
        scale = scale * norm.weight
    shift = -mean * scale
    if layer.bias is not None:
        shift = shift + layer.bias * scale
    if norm.bias is not None:
        shift = shift + norm.bias
    fused.weight.copy_(weight * scale.reshape(-1, *([1] * (weight.dim() - 1))))
    fused.bias.copy_(shift)
    return fused
