"""Shape helpers for formulas: formulas read shapes, never values."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch


def shape(t: Any) -> tuple[int, ...]:
    """The shape of tensor ``t`` as plain ints."""
    return tuple(int(s) for s in t.shape)


def numel(t: Any) -> int:
    """The number of elements of tensor ``t``."""
    return math.prod(shape(t))


def first_tensor(value: Any) -> torch.Tensor:
    """``value`` itself, or the first tensor of a tuple of outputs."""
    if isinstance(value, torch.Tensor):
        return value
    return next(v for v in value if isinstance(v, torch.Tensor))


def first_argument(inputs: Mapping[str, Any]) -> Any:
    """The first argument of the schema (``self``, ``input``, ``grad_output``...)."""
    return next(iter(inputs.values()))
