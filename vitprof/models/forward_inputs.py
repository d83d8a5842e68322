"""The model's own input when its forward wants other than one image tensor: read from the names
of its forward's parameters and from its config, never guessed per model type.

:data:`BUILDERS` maps what a forward's parameters say to a builder, first match wins:

* ``spatial_shapes`` among them (transformers SigLIP 2, NaFlex style): ``pixel_values`` already
  cut into patches, ``(B, N, C * P * P)``, and ``spatial_shapes`` ``(B, 2)``: the patch grid,
  ``sqrt(N) x sqrt(N)`` (a square grid of the config's ``num_patches``; ``patch_size`` P and
  ``num_channels`` C from the vision config); no ``pixel_attention_mask``: no patch is padding
  (a mask would be tested for all ones, a value a meta run does not have);
* ``input_ids`` first and ``pixel_values`` too: a vision-language model (ShieldGemma 2), whose
  input is a prompt with image tokens placed by its processor: refused, one line;
* ``input_ids`` first, no ``pixel_values`` (ImageGPT: one token per pixel, colour clusters):
  ``input_ids`` ``(B, L)`` of zeros (a valid id), L the config's ``n_positions`` or
  ``max_position_embeddings``;
* anything else (``pixel_values``, ``x``, ``inputs``, ...): None, the image tensor of
  :mod:`vitprof.workload`.

A :class:`TensorSpec` is a tensor by its shape and dtype, made on the device of each run:
uninitialised on meta, else zeros or random values, or ``fill`` in every element; ``host``
tensors hold values the forward reads (``spatial_shapes``: sizes), so a meta run gets them on
the CPU.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from vitprof.core.errors import UserError
from vitprof.core.vocab import Device
from vitprof.count.running import one_line


def make_tensor(shape: tuple[int, ...], dtype: torch.dtype, device: str, random: bool,
                fill: int | None = None) -> torch.Tensor:
    """A tensor on ``device``: ``fill`` in every element when given; else uninitialised on
    meta (nothing is allocated), zeros elsewhere, or standard normal values when ``random`` and
    ``dtype`` is a floating type. A shape torch cannot make (its size in bytes overflows, or
    the memory is not there) is a UserError naming it."""
    try:
        return _tensor(shape, dtype, device, random, fill)
    except RuntimeError as error:
        shown = "x".join(map(str, shape))
        raise UserError(f"cannot make an input of shape {shown} on {device}: "
                        f"{one_line(error)}") from None


def _tensor(shape: tuple[int, ...], dtype: torch.dtype, device: str, random: bool,
            fill: int | None) -> torch.Tensor:
    if fill is not None:
        return torch.full(shape, fill, dtype=dtype, device=device)
    if device == Device.META:
        return torch.empty(shape, dtype=dtype, device=Device.META)
    if random and dtype.is_floating_point:
        return torch.randn(shape, device=device).to(dtype)
    return torch.zeros(shape, dtype=dtype, device=device)


@dataclass(frozen=True)
class TensorSpec:
    """A tensor argument by its shape and dtype, made on the device of each run (``fill``: the
    value of every element; ``host``: the forward reads its values, so on meta it is made on
    the CPU)."""

    shape: tuple[int, ...]
    dtype: torch.dtype
    fill: int | None = None
    host: bool = False

    def make(self, device: str = "meta", *, random: bool = False) -> torch.Tensor:
        on = Device.CPU if self.host and device == Device.META else device
        return make_tensor(self.shape, self.dtype, on, random, self.fill)


@dataclass(frozen=True)
class OwnInput:
    """A forward's own arguments: the input tensor ``main`` under the keyword ``name``, the
    other keyword arguments, and where their sizes came from."""

    name: str
    main: TensorSpec
    source: str
    kwargs: Mapping[str, TensorSpec] = field(default_factory=dict)


def _config(module: nn.Module) -> Any:
    config = getattr(module, "config", None)
    if config is None:
        raise UserError(f"{type(module).__name__}'s forward takes no image tensor and it has no "
                        f"config to build its input from; give inputs=...")
    return config


def _setting(config: Any, *names: str) -> int:
    """The first of ``names`` the config sets to a positive int."""
    for name in names:
        value = getattr(config, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    raise UserError(f"the model's config sets none of {', '.join(names)}: cannot build its "
                    f"input; give inputs=...")


def _patches(module: nn.Module, batch: int) -> OwnInput:
    config = _config(module)
    vision = getattr(config, "vision_config", None) or config
    count = _setting(vision, "num_patches")
    size, chans = _setting(vision, "patch_size"), _setting(vision, "num_channels")
    side = math.isqrt(count)
    if side * side != count:
        raise UserError(f"{count} patches make no square grid: give inputs=... with the "
                        f"spatial_shapes of your images")
    return OwnInput(
        "pixel_values", TensorSpec((batch, count, chans * size * size), torch.float32),
        f"config: {count} patches of {chans}x{size}x{size} ({side}x{side} grid)",
        {"spatial_shapes": TensorSpec((batch, 2), torch.long, fill=side, host=True)})


def _vision_language(module: nn.Module, batch: int) -> OwnInput:
    raise UserError(f"{type(module).__name__} is a vision-language model: its forward wants a "
                    f"prompt of input_ids with image tokens beside pixel_values, which vitprof "
                    f"does not build; analyze its vision tower, or give inputs=...")


def _token_ids(module: nn.Module, batch: int) -> OwnInput:
    length = _setting(_config(module), "n_positions", "max_position_embeddings")
    return OwnInput("input_ids", TensorSpec((batch, length), torch.long),
                    f"config: {length} token ids")


def _first(parameters: list[str]) -> str:
    return parameters[0] if parameters else ""


BUILDERS: tuple[tuple[Callable[[list[str]], bool], Callable[[nn.Module, int], OwnInput]], ...] = (
    (lambda names: "spatial_shapes" in names, _patches),
    (lambda names: _first(names) == "input_ids" and "pixel_values" in names, _vision_language),
    (lambda names: _first(names) == "input_ids", _token_ids),
)
"""(a test of the forward's parameter names, the builder of its input), first match wins."""


def forward_parameters(module: nn.Module) -> list[str]:
    """The names of ``module.forward``'s parameters (``self`` excluded), in order."""
    try:
        parameters = inspect.signature(module.forward).parameters.values()
    except (TypeError, ValueError):  # a builtin or a C++ forward: no signature to read
        return []
    return [p.name for p in parameters
            if p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)]


def own_forward_input(module: nn.Module, batch: int) -> OwnInput | None:
    """The input ``module``'s forward wants when it is no image tensor (see the module
    docstring); None for an image model."""
    names = forward_parameters(module)
    for matches, builder in BUILDERS:
        if matches(names):
            return builder(module, batch)
    return None
