"""The one module stack: which module of a model is running, with enter and leave callbacks.

In the manner of torch's ``torch.utils.module_tracker.ModuleTracker``: forward pre-hooks and
forward hooks (``always_call=True``, so a module that raises is still left) on every module of
``model``, named by its path in ``model.named_modules()`` (``""`` for the root). Counting,
timing and crosscheck's kernel log all read the innermost path from here.

With ``backward=True`` the backward is followed too, as ``ModTracker`` does: the first gradient
reaching an output of a module's call enters it, the gradients of all of its inputs that
require one leave it (``torch.autograd.graph.register_multi_grad_hook``, modes ``"any"`` and
``"all"``; in mode ``"all"`` a hook on the output the backward starts from never runs). A
module whose inputs need no gradient (the first layer, fed the image) is never left in the
backward. Backward entries are reported to the callbacks only; :attr:`ModuleStack.current` is
the forward stack, empty during the backward. :attr:`ModuleStack.calls` tells the calls of one
module apart: each running module with the ordinal of its call among the forward's module calls.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import torch
from torch import nn
from torch.autograd.graph import register_multi_grad_hook
from torch.utils._pytree import tree_flatten

Callback = Callable[[str, nn.Module], None]  # (module path, module)


def _needing_grad(value: Any) -> list[torch.Tensor]:
    leaves, _ = tree_flatten(value)
    return [t for t in leaves if isinstance(t, torch.Tensor) and t.requires_grad]


class ModuleStack:
    """The paths of the modules of ``model`` running now, innermost last, while entered.

    ``on_enter(path, module)`` is called when a module starts, ``on_leave(path, module)`` when it
    ends (also when it raises). :attr:`in_backward` tells the callbacks which pass runs.
    """

    def __init__(
        self, model: nn.Module, *, on_enter: Callback | None = None,
        on_leave: Callback | None = None, backward: bool = False,
    ) -> None:
        self.model = model
        self.on_enter = on_enter
        self.on_leave = on_leave
        self.backward = backward
        self.paths: list[str] = []
        # the running modules, outermost first, each with the ordinal of its call: how many
        # module calls the forward entered before it (one tuple while no module enters or
        # leaves, shared by the records made meanwhile)
        self.calls: tuple[tuple[str, int], ...] = ()
        self._entered = 0
        self._handles: list[Any] = []

    @property
    def current(self) -> str:
        """Path of the innermost running module, ``""`` (the root's own path) when none runs."""
        return self.paths[-1] if self.paths else ""

    @property
    def in_backward(self) -> bool:
        """True while the autograd engine runs a backward."""
        return torch._C._current_graph_task_id() != -1

    def __enter__(self) -> ModuleStack:
        for path, module in self.model.named_modules():
            self._handles.append(module.register_forward_pre_hook(partial(self._enter, path)))
            self._handles.append(
                module.register_forward_hook(partial(self._leave, path), always_call=True)
            )
        return self

    def __exit__(self, *exc: object) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        self.paths.clear()
        self.calls, self._entered = (), 0

    def _enter(self, path: str, module: nn.Module, args: Any) -> None:
        self.paths.append(path)
        self.calls += ((path, self._entered),)
        self._entered += 1
        self._notify(self.on_enter, path, module)
        if self.backward and (needing := _needing_grad(args)):
            self._handles.append(register_multi_grad_hook(
                needing, lambda _grads: self._notify(self.on_leave, path, module)
            ))

    def _leave(self, path: str, module: nn.Module, args: Any, output: Any) -> None:
        if self.paths and self.paths[-1] == path:
            self.paths.pop()
            self.calls = self.calls[:-1]
        self._notify(self.on_leave, path, module)
        if self.backward and (needing := _needing_grad(output)):
            self._handles.append(register_multi_grad_hook(
                needing, lambda _grad: self._notify(self.on_enter, path, module), mode="any"
            ))

    @staticmethod
    def _notify(callback: Callback | None, path: str, module: nn.Module) -> None:
        if callback is not None:
            callback(path, module)
