"""Helpers the spec inferrers of the families read a model with; each refusal is a UserError."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING

from vitprof.core.errors import UserError

if TYPE_CHECKING:
    from torch import nn

_GELU_CLASSES = ("GELU", "GELUTanh")  # nn.GELU and timm's GELU / GELUTanh: aten.gelu, 5 each


def require(condition: bool, model: nn.Module, what: str) -> None:
    """Refuse ``model`` unless ``condition``: ``what`` names the part a spec cannot describe."""
    if not condition:
        raise UserError(f"cannot describe {type(model).__name__} as a ViTSpec: {what}")


def square(value: int | Iterable[int], model: nn.Module, what: str) -> int:
    """The side of a square ``value`` (an int, or equal ints); refuses a non-square one."""
    values = [value] if isinstance(value, int) else [int(v) for v in value]
    require(len(set(values)) == 1, model, f"non-square {what} {tuple(values)}")
    return values[0]


def image_size(value: int | Iterable[int]) -> int | tuple[int, int]:
    """An image size as a spec takes it: the side of a square (an int, or equal ints), else
    ``(height, width)``."""
    values = [value] if isinstance(value, int) else [int(v) for v in value]
    return values[0] if len(set(values)) == 1 else (values[0], values[1])


def identity(module: nn.Module | None) -> bool:
    from torch import nn

    return module is None or isinstance(module, nn.Identity)


def gelu(module: nn.Module) -> bool:
    return type(module).__name__ in _GELU_CLASSES


def grid_image_size(rows: int, patch_size: int, model: nn.Module) -> int:
    """The image side of ``rows`` patches of ``patch_size`` in a square grid."""
    side = math.isqrt(rows)
    require(side * side == rows, model, f"{rows} patches do not make a square grid")
    return side * patch_size
