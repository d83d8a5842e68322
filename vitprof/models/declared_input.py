"""The input a model declares: its channels and its spatial size, read from what it says of itself.

Sources, first found wins, each named in :attr:`DeclaredInput.source`:

1. attributes of the model, then of its ``patch_embed``: ``img_size`` / ``image_size`` (an int
   or a pair) and ``in_chans`` / ``in_channels`` / ``num_channels``: what it was built for;
2. what each model library reads (:attr:`vitprof.models.libraries.base.ModelLibrary.declares`),
   in the registry's order: timm's ``pretrained_cfg["input_size"]`` (``(channels, height,
   width)``); a Hugging Face ``config``: ``image_size`` (an int or a pair), ``num_channels``
   and, for a video model, ``num_frames`` (its input is then ``B, T, C, H, W``, channels at axis
   2: the layout of transformers' video models).

Only when none of them says is the size guessed, and then :attr:`DeclaredInput.guessed` names
what was guessed: the size from the length of a position embedding (a square grid of patches,
with up to five prefix tokens). Channels none of them declares stay None: they are traced from
the forward (:mod:`vitprof.models.reached_channels`), never read from a registered convolution.
:attr:`DeclaredInput.conv_rank` is the rank of the first convolution in module order (``Conv1d``,
``Conv2d`` or ``Conv3d``): 3 says the input has frames (a video's or a volume's patch embedding),
whose count a caller guesses when nothing declares it, since the traced forward needs the rank.
A non-square size is kept as it is declared (height, width), never squared.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from torch import nn
from torch.nn.modules.conv import _ConvNd

from vitprof.models.libraries import LIBRARIES
from vitprof.models.libraries.base import Declaration, declared_count, declared_pair

_SIZE_ATTRIBUTES = ("img_size", "image_size")
_CHANNEL_ATTRIBUTES = ("in_chans", "in_channels", "num_channels")


@dataclass(frozen=True)
class DeclaredInput:
    """Channels and spatial size (height, width) of one input image, and where each came from."""

    channels: int | None
    size: tuple[int, ...] | None
    source: str  # where the declared values were read, "" when nothing was declared
    guessed: tuple[str, ...] = ()  # what was guessed, and how
    frames: int | None = None  # a video model's frames (a config's num_frames)
    channel_axis: int = 1  # where a video input's channels go: 1 (B, C, T, H, W) or 2
    conv_rank: int | None = None  # spatial sizes the first convolution takes (3: Conv3d)

    def describe(self) -> str:
        said = f"declared by {self.source}" if self.source else "nothing declared"
        return "; ".join([said, *(f"guessed {g}" for g in self.guessed)])


def square_or_pair(size: int | tuple[int, ...] | list[int]) -> tuple[int, ...]:
    """An image size as (height, width): an int is a square."""
    return (size, size) if isinstance(size, int) else tuple(size)


def _declarations(module: nn.Module) -> Iterator[Declaration]:
    """Each place a model may declare its input, in order (see the module docstring)."""
    for owner, where in ((module, "model"), (getattr(module, "patch_embed", None), "patch_embed")):
        if isinstance(owner, nn.Module):
            size = next((s for a in _SIZE_ATTRIBUTES
                         if (s := declared_pair(getattr(owner, a, None)))), None)
            chans = next((c for a in _CHANNEL_ATTRIBUTES
                          if (c := declared_count(getattr(owner, a, None)))), None)
            yield Declaration(f"{where} attributes", chans, size)
    for library in LIBRARIES:
        declared = library.declares(module) if library.declares is not None else None
        if declared is not None:
            yield declared


def _first_conv(module: nn.Module) -> _ConvNd | None:
    """The first convolution of any rank (``Conv1d``, ``Conv2d``, ``Conv3d``) in module order."""
    return next((m for m in module.modules() if isinstance(m, _ConvNd)), None)


def _size_from_position_embedding(module: nn.Module) -> int | None:
    """Square side in pixels: tokens - prefix = a square grid, times the patchify conv's kernel."""
    patchify = next((m for m in module.modules()
                     if isinstance(m, nn.Conv2d) and m.kernel_size == m.stride), None)
    if patchify is None:
        return None
    for name, param in module.named_parameters():
        if "pos" in name.rpartition(".")[2] and param.dim() == 3:
            tokens = int(param.shape[1])
            for prefix in range(6):
                side = math.isqrt(max(tokens - prefix, 0))
                if side and side * side == tokens - prefix:
                    return side * int(patchify.kernel_size[0])
    return None


def declared_input(module: nn.Module) -> DeclaredInput:
    """What ``module`` declares of its input (see the module docstring), guesses named."""
    channels: int | None = None
    size: tuple[int, ...] | None = None
    frames: int | None = None
    sources: list[str] = []
    for declared in _declarations(module):
        took = False
        if channels is None and declared.channels is not None:
            channels, took = declared.channels, True
        if size is None and declared.size is not None:
            size, took = declared.size, True
        if took:
            sources.append(declared.source)
        frames = frames or declared.frames
    guessed: list[str] = []
    conv = _first_conv(module)
    if size is None and (side := _size_from_position_embedding(module)) is not None:
        size = (side, side)
        guessed.append(f"{side}x{side} from the position embedding's length")
    # transformers' video models take pixel_values of (batch, frames, channels, height, width)
    axis = 2 if frames is not None else 1
    rank = len(conv.kernel_size) if conv is not None else None
    return DeclaredInput(channels, size, " and ".join(sources), tuple(guessed), frames, axis,
                         rank)
