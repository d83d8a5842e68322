"""A convolution that floors its input: its windows stop before the input ends.

Along one side of ``size`` positions, a convolution makes ``floor((size + 2 padding -
dilation (kernel - 1) - 1) / stride) + 1`` outputs. When its windows tile the input without gaps
(dilation 1, kernel >= stride), the input positions after its last window are read by none: a
stride-14 patch embedding floors a 384-pixel side to 27 patches and leaves the last
384 - 27 x 14 = 6 rows unread. Nothing is refused for that (the model accepts the input and
computes on what it reads); the counter keeps each such convolution (:func:`floored`) and the
analysis states it (:func:`floor_warnings`). A convolution with gaps between its windows (a 1x1
stride-2 downsampling, a dilated kernel) skips positions by design: it is not said to floor.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vitprof.count.formulas import aten
from vitprof.count.formulas.registry import packet

CONVOLUTIONS = (aten.convolution, aten._convolution)
SIDE_NAMES = ("frame", "row", "column")  # the last spatial sides' names, (T, H, W)


def unread_tail(size: int, kernel: int, stride: int, padding: int = 0, dilation: int = 1) -> int:
    """Input positions at the end of one side of ``size`` that no window of a convolution
    reads; 0 when its windows leave gaps (``dilation > 1`` or ``kernel < stride``)."""
    if dilation != 1 or kernel < stride:
        return 0
    outputs = (size + 2 * padding - kernel) // stride + 1
    last_read = (outputs - 1) * stride + kernel - 1  # in padded positions
    return max(0, padding + size - 1 - last_read)


@dataclass(frozen=True)
class Floor:
    """A convolution run by ``module`` (``""``: the model's own forward) whose windows leave
    the last ``unread`` positions of each spatial side of its input unread: ``sides`` in,
    ``grid`` out, at ``stride``."""

    module: str
    sides: tuple[int, ...]
    grid: tuple[int, ...]
    stride: tuple[int, ...]
    unread: tuple[int, ...]

    def text(self) -> str:
        """``patch_embed.proj (stride 14) floors its 384x384 input to 27x27, leaving the last
        6 rows and 6 columns unread``."""
        names = [*SIDE_NAMES[-len(self.sides):]] if len(self.sides) <= len(SIDE_NAMES) else [
            f"position of side {i}" for i in range(len(self.sides))]
        unread = [f"{n} {name}{'s' if n > 1 else ''}"
                  for n, name in zip(self.unread, names, strict=True) if n]
        stride = _joined(self.stride) if len(set(self.stride)) > 1 else str(self.stride[0])
        return (f"{self.module or 'the model'} (stride {stride}) floors its {_joined(self.sides)}"
                f" input to {_joined(self.grid)}, leaving the last {' and '.join(unread)} unread")


def _joined(sizes: Sequence[int]) -> str:
    return "x".join(map(str, sizes))


def floored(op: Any, named: Mapping[str, Any], out: Any, module: str) -> Floor | None:
    """The :class:`Floor` of a call of ``op`` with ``named`` arguments (bound to its schema)
    returning ``out``, run by ``module``: None unless ``op`` is a convolution (not transposed)
    that leaves input positions unread."""
    if packet(op) not in CONVOLUTIONS or named["transposed"]:
        return None
    sides = tuple(named["input"].shape[2:])
    kernel = tuple(named["weight"].shape[2:])
    spread = [_per_side(named[key], len(sides)) for key in ("stride", "padding", "dilation")]
    unread = tuple(unread_tail(size, k, s, p, d)
                   for size, k, s, p, d in zip(sides, kernel, *spread, strict=True))
    if not any(unread):
        return None
    return Floor(module, sides, tuple(out.shape[2:]), spread[0], unread)


def _per_side(value: Sequence[int], sides: int) -> tuple[int, ...]:
    """A convolution's stride, padding or dilation for each side (one value: every side)."""
    values = tuple(int(v) for v in value)
    return values * sides if len(values) == 1 else values


def floor_warnings(floors: Iterable[Floor]) -> tuple[str, ...]:
    """What the analysis says of the convolutions that floored their input, each once."""
    return tuple(f.text() for f in dict.fromkeys(floors))
