"""The input channels of a model that declares none, traced from its forward.

:func:`traced_channels` runs the forward once on meta with a 3-channel probe and stops at the
first convolution it computes (``aten.convolution``, whether a module or ``F.conv2d`` calls it):
that convolution's input channels (``weight.shape[1] x groups``) are what the image reaches
first. Which convolution a model *registers* first says nothing of it (a block's convolution
may be registered before the stem that the image meets). A forward that computes no
convolution, or fails before one, gives 3 channels, an ordinary image.

A traced count other than 3 is tried on a whole forward; when the model rejects it (an error
the meta device does not cause: :func:`vitprof.count.running.meta_caused`) and accepts 3
channels, it gets 3 (the first convolution computed read something else than the image: a
learned map, a mask). Every result says how it was found, for the input's ``input from:`` line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from vitprof.count.running import meta_caused
from vitprof.count.state import untouched

RGB = 3  # the channels of an ordinary image, the probe's and the fallback's


class _Reached(Exception):
    """Raised at the first convolution, to stop the probe there."""


def _in_channels(image: Any, weight: torch.Tensor, bias: Any, stride: Any, padding: Any,
                 dilation: Any, transposed: bool, output_padding: Any, groups: int) -> int:
    """The input channels of an ``aten.convolution`` call, read from its weight: ``(out,
    in / groups, ...)``, or ``(in, out / groups, ...)`` for a transposed one."""
    return int(weight.shape[0]) if transposed else int(weight.shape[1]) * int(groups)


class _FirstConvolution(TorchDispatchMode):
    """Records the input channels of the first ``aten.convolution`` and stops the forward."""

    def __init__(self) -> None:
        super().__init__()
        self.channels: int | None = None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func.overloadpacket is torch.ops.aten.convolution and self.channels is None:
            self.channels = _in_channels(*args, **kwargs)
            raise _Reached
        return func(*args, **kwargs)


def _evaluated(module: nn.Module, forward: Callable[[], Any]) -> None:
    """``forward()`` with ``module`` in eval mode and no gradients (as an inference count runs
    it); the module (its modes, attributes and buffers) and the random generators are left as
    they were (:func:`vitprof.count.state.untouched`). Parameters it changes in place are not
    named here: the count that follows runs the same forward and names them."""
    with untouched(module, changed=[]), torch.no_grad():
        module.eval()
        forward()


def first_convolution_channels(module: nn.Module, forward: Callable[[], Any]) -> int | None:
    """The input channels of the first convolution ``forward()`` (one forward of ``module`` on
    meta) computes; None when it computes none or fails before one."""
    probe = _FirstConvolution()
    try:
        with probe:
            _evaluated(module, forward)
    except Exception:  # _Reached, or a failure before any convolution: the probe says what it saw
        pass
    return probe.channels


def _accepts(module: nn.Module, forward: Callable[[], Any]) -> bool:
    """Whether ``forward()`` runs, or fails only for a reason of the meta device."""
    try:
        _evaluated(module, forward)
    except Exception as error:
        return meta_caused(error)
    return True


def traced_channels(module: nn.Module, forward: Callable[[int], Any]) -> tuple[int, str]:
    """The channels of ``module``'s input, and the guess that says how they were found
    (see the module docstring); ``forward(channels)`` runs one forward on meta."""
    reached = first_convolution_channels(module, lambda: forward(RGB))
    if reached is None:
        return RGB, f"{RGB} channels (no convolution reads the image)"
    if reached == RGB or _accepts(module, lambda: forward(reached)) or not _accepts(
            module, lambda: forward(RGB)):
        return reached, f"{reached} channels from the first convolution the image reaches"
    return RGB, (f"{RGB} channels (the model rejects the {reached} of the first convolution "
                 f"it computes)")
