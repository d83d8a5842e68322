"""``spec_from_model``: the :class:`~vitprof.models.closed_form.ViTSpec` of a built Vision
Transformer.

Known implementations, each read by the spec inferrers of its family
(:mod:`vitprof.models.libraries`):

* torchvision ``VisionTransformer`` (MHA without weights, so SDPA);
* timm ``VisionTransformer`` and ``VisionTransformerDistilled``: class / distillation / register
  tokens, ``no_embed_class``, token or ``avg`` pooling, ``norm`` or ``fc_norm``, fused or
  non-fused attention;
* Hugging Face ``ViTModel``, ``ViTForImageClassification`` and their DeiT twins, from the config
  (so the 4.x and 5.x module layouts alike), sdpa or eager attention, with or without a mask
  token (``use_mask_token``);
* the note models of :mod:`vitprof.models` and the reference ViT.

Anything a spec cannot describe (layer scale, q/k norms, another activation or norm, a conv
stem, attention pooling...) is a :class:`~vitprof.core.errors.UserError`, and so is a model whose
parameter count differs from the spec's closed form.
"""

from __future__ import annotations

from torch import nn

from vitprof.core.errors import UserError
from vitprof.models.closed_form import ViTSpec, closed_form
from vitprof.models.declared_input import square_or_pair
from vitprof.models.libraries import INFERRERS, KNOWN
from vitprof.models.libraries.describe import require


def _is_norm(module: nn.Module) -> bool:
    """A normalisation layer of torch, or a leaf whose class says it is one: the closed form
    holds for affine LayerNorms only, so any other norm declines it (no breakdown reads this)."""
    return isinstance(module, nn.LayerNorm | nn.GroupNorm | nn.modules.batchnorm._BatchNorm) or (
        "Norm" in type(module).__name__ and not list(module.children())
    )


def _check_norms(model: nn.Module) -> None:
    for name, module in model.named_modules():
        if _is_norm(module):
            affine = isinstance(module, nn.LayerNorm) and module.weight is not None
            require(affine and module.bias is not None, model,
                    f"{name} is a {type(module).__name__}, not an affine LayerNorm")


def _text(sides: tuple[int, ...]) -> str:
    """``224`` for a square, ``224x320`` otherwise."""
    return str(sides[0]) if len(set(sides)) == 1 else "x".join(map(str, sides))


def spec_from_model(
    model: nn.Module, image_size: int | tuple[int, int] | None = None
) -> ViTSpec:
    """The spec of ``model``; ``image_size`` (an int for a square, or ``(height, width)``), if
    given, must be the one its position embedding was built for. Raises :class:`UserError` for
    a model a spec cannot describe."""
    if not isinstance(model, nn.Module):
        raise UserError(f"expected an nn.Module, got {type(model).__name__}")
    infer = next((infer for detect, infer in INFERRERS if detect(model)), None)
    if infer is None:
        raise UserError(
            f"cannot infer a ViTSpec from {type(model).__name__}; known: {KNOWN}"
        )
    spec = infer(model)  # first: an inferrer that refuses a model says what it lacks
    _check_norms(model)
    if image_size is not None and square_or_pair(image_size) != spec.sides:
        raise UserError(f"{type(model).__name__} was built for {_text(spec.sides)}px images, "
                        f"not {_text(square_or_pair(image_size))}px")
    params = sum(p.numel() for p in model.parameters())
    expected = closed_form(spec).totals.params
    require(params == expected, model,
            f"it has {params:,} params where its spec has {expected:,} (parts a spec lacks)")
    return spec
