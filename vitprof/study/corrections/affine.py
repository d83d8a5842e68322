"""Whether a module of a model is an affine map of its input, tested numerically.

A statement such as note 004's "Attention 是线性操作" says what kind of map a layer is; the
answer is computed, not typed: the module runs on a CPU build of the model (random weights, in
float64) on two random inputs ``a`` and ``b`` of the shape it sees in the model's forward, and it
is affine exactly when ``f((a + b) / 2) = (f(a) + f(b)) / 2`` (to 1e-9 relative): every affine
map passes, and a map with a product of two functions of its input (Q K^T) or a softmax of one
fails. "Linear" in the loose sense of a layer with a bias is affine.

With ``hold_weights`` every softmax in the module returns what it returned for a third input:
the attention weights A held fixed, the premise of reading attention as a weighted average of
the rows of V.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from vitprof.models.zoo import build

_SOFTMAX = frozenset({torch.ops.aten._softmax.default, torch.ops.aten._safe_softmax.default})
_TOLERANCE = 1e-9


class _HeldSoftmax(TorchDispatchMode):
    """Records the output of every softmax on the first run, then returns those outputs, in
    the same order, on every later run."""

    def __init__(self) -> None:
        super().__init__()
        self.kept: list[torch.Tensor] = []
        self.recording = True
        self.at = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if func not in _SOFTMAX:
            return out
        if self.recording:
            self.kept.append(out)
            return out
        self.at += 1
        return self.kept[self.at - 1]

    def replay(self) -> None:
        """From now on return the recorded outputs, from the first."""
        self.recording, self.at = False, 0


@cache
def _module_input(name: str, pattern: str, input_shape: tuple[int, ...]
                  ) -> tuple[torch.Size, nn.Module]:
    """The shape of the first input the module named like ``pattern`` gets in a forward of
    ``name`` (on meta, fed ``input_shape``), and that module of a CPU build in float64 (kept:
    the rest of the build is freed)."""
    meta = build(name, device="meta").module.eval()
    seen: list[torch.Size] = []
    handle = _module(meta, pattern).register_forward_pre_hook(
        lambda _, args: seen.append(args[0].shape))
    with torch.no_grad():
        meta(torch.empty(input_shape, device="meta"))
    handle.remove()
    return seen[0], _module(build(name, device="cpu").module, pattern).double().eval()


def _module(model: nn.Module, pattern: str) -> nn.Module:
    return next(m for path, m in model.named_modules() if re.search(pattern, path))


def _is_affine(f: Callable[[torch.Tensor], torch.Tensor], a: torch.Tensor,
               b: torch.Tensor) -> bool:
    middle, ends = f((a + b) / 2), (f(a) + f(b)) / 2
    return bool(torch.allclose(middle, ends, rtol=_TOLERANCE,
                               atol=_TOLERANCE * float(ends.abs().max())))


def affine(name: str, pattern: str, input_shape: tuple[int, ...],
           hold_weights: bool = False) -> int:
    """1 when the module of the model ``name`` (fed ``input_shape``) whose path matches
    ``pattern`` (the first) is an affine map of its input, else 0; with ``hold_weights``, with
    its softmax outputs held at their values for one input."""
    shape, module = _module_input(name, pattern, tuple(input_shape))
    generator = torch.Generator().manual_seed(0)
    a, b, held_at = (torch.randn(shape, generator=generator, dtype=torch.float64)
                     for _ in range(3))
    with torch.no_grad():
        if not hold_weights:
            return int(_is_affine(module, a, b))
        with _HeldSoftmax() as held:
            module(held_at)
            held.replay()

            def run(x: torch.Tensor) -> torch.Tensor:
                held.at = 0
                return module(x)

            return int(_is_affine(run, a, b))
