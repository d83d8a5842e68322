"""What a callback needs besides the tracker: the inputs a step fed the model, and the frameworks.

A callback sees the batch (Lightning) or nothing of it (the ``Trainer``): :func:`model_inputs`
reads the model's inputs from a batch by the frameworks' conventions, and :class:`ForwardInputs`
catches them at the model's own forward instead, as meta tensors of the same shapes (so nothing
of the batch is kept alive), once per forward run in train mode with gradients enabled (so one
per micro-batch under gradient accumulation, and none for evaluation).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from vitprof.core.errors import UserError
from vitprof.count.session import meta_twins

DTYPES = {"bf16": "bf16", "fp16": "fp16", "16": "fp16", "8": "fp8"}
KEYS = {"mfu": "vitprof/mfu", "tflops": "vitprof/tflops",  # entry key -> logged name; the world's
        "world_mfu": "vitprof/world_mfu", "world_tflops": "vitprof/world_tflops"}  # in DDP/FSDP2


def require(module: str, extra: str) -> ModuleType:
    """``import module``, or one UserError naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise UserError(f"{module} is not installed: pip install 'vitprof[{extra}]'") from None


def model_inputs(batch: Any) -> Any:
    """The model's inputs in ``batch``: a tensor is the input, a dict holds keyword arguments
    (Hugging Face's ``pixel_values`` with ``labels``), a tuple or list starts with the input
    and goes on with its targets (``(x, y)``)."""
    if isinstance(batch, torch.Tensor | Mapping):
        return batch
    if isinstance(batch, tuple | list) and batch:
        return batch[0]
    raise UserError(f"cannot read the model's inputs from a batch of type {type(batch).__name__}"
                    f"; pass inputs= (a function from the batch to the model's inputs)")


def precision_dtype(precision: object) -> str | None:
    """The matmul dtype of a framework's precision setting (``"bf16-mixed"``, ``"16-mixed"``,
    ``"bf16-true"``); None for 32-bit (the parameters' dtype decides)."""
    head = str(precision).split("-")[0]
    return DTYPES.get(head)


class ForwardInputs:
    """Catches the inputs of each training forward of ``model`` (meta twins); :meth:`take`
    returns those caught since the last call, as ``(args, kwargs)`` pairs. A call for which
    ``redirected(model)`` is true runs another method through the forward (Lightning's
    strategies call ``training_step`` so): it is no forward, and its inputs are not caught."""

    def __init__(self, model: nn.Module,
                 redirected: Callable[[nn.Module], bool] = lambda module: False) -> None:
        self.redirected = redirected
        self.caught: list[Any] = []
        self.handle: RemovableHandle = model.register_forward_pre_hook(self._catch,
                                                                        with_kwargs=True)

    def _catch(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if module.training and torch.is_grad_enabled() and not self.redirected(module):
            self.caught.append(meta_twins((tuple(args), dict(kwargs))))

    def take(self) -> list[Any]:
        caught, self.caught = self.caught, []
        return caught

    def remove(self) -> None:
        self.handle.remove()
