"""The one optimizer harness: an optimizer's second ``step()`` run under a dispatch mode.

An optimizer's first ``step()`` makes its state (SGD's momentum buffer starts as a copy of the
gradient, Adam's moments as zeros); from the second on, every step does the same work on the same
state. :class:`SecondStep` enters a :class:`StepMode` for the second step only, by a pre-hook and
a post-hook of the optimizer, and takes the hooks off after it. A closure passed to ``step``
(Lightning's forward and backward) runs with the mode paused. Two modes use it: MFU's pricing of
the step's element-wise work (:mod:`vitprof.measure.mfu.optimizer`) and the memory step's log of
the step's allocations (:mod:`vitprof.measure.memory.step`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

import torch
from torch.utils._python_dispatch import TorchDispatchMode


class StepMode(TorchDispatchMode):
    """A dispatch mode over an optimizer's step; while ``paused`` (a closure runs) it only runs
    each op."""

    def __init__(self) -> None:
        super().__init__()
        self.paused = False

    def outside(self, closure: Callable[[], Any]) -> Callable[[], Any]:
        """``closure`` run with the mode paused."""

        def run() -> Any:
            self.paused = True
            try:
                return closure()
            finally:
                self.paused = False

        return run


Mode = TypeVar("Mode", bound=StepMode)


class SecondStep(Generic[Mode]):
    """Runs ``optimizer``'s second ``step()`` under ``make_mode()``; ``done(mode)`` after it,
    where given."""

    COUNTED_STEP = 2

    def __init__(self, optimizer: torch.optim.Optimizer, make_mode: Callable[[], Mode],
                 done: Callable[[Mode], None] | None = None) -> None:
        self.steps = 0
        self._make_mode = make_mode
        self._done = done
        self._mode: Mode | None = None
        self._handles = [optimizer.register_step_pre_hook(self._before),
                         optimizer.register_step_post_hook(self._after)]

    def _before(self, optimizer: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        self.steps += 1
        if self.steps != self.COUNTED_STEP:
            return None
        self._mode = self._make_mode()
        self._mode.__enter__()
        # the step's own arguments: (optimizer, closure) or closure= (None when not passed)
        closure = kwargs.get("closure", args[1] if len(args) > 1 else None)
        if closure is None:
            return None
        wrapped = self._mode.outside(closure)
        if "closure" in kwargs:
            return args, {**kwargs, "closure": wrapped}
        return (args[0], wrapped, *args[2:]), kwargs

    def _after(self, *_: Any) -> None:
        if self._mode is None:
            return
        mode, self._mode = self._mode, None
        mode.__exit__(None, None, None)
        self.remove()
        if self._done is not None:
            self._done(mode)

    def remove(self) -> None:
        """Take the hooks off the optimizer."""
        for handle in self._handles:
            handle.remove()
        self._handles = []
