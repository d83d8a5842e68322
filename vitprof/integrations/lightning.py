"""PyTorch Lightning: ``Trainer(callbacks=[MFUCallback()])`` logs ``vitprof/mfu`` and
``vitprof/tflops`` each training step through ``pl_module.log_dict``.

A step is one optimizer step (``trainer.global_step`` moved): with ``accumulate_grad_batches=k``
it is timed from the start of its first micro-batch (``on_train_batch_start``, the batch is
loaded) to the end of its last (``on_train_batch_end``, after the optimizer step) and counted as
all its micro-batches, by the engine of :func:`vitprof.track`. What a micro-batch counts is the
LightningModule's forward on the inputs ``training_step`` fed it, caught at that forward
(:class:`vitprof.integrations.feeding.ForwardInputs`: a dict batch or several forwards are as
they ran), plus its backward; a ``training_step`` that never calls ``self(...)`` is counted as
the forward on the batch's inputs (:func:`vitprof.integrations.feeding.model_inputs`), and
``inputs(batch)`` replaces both. A LightningModule without a ``forward`` of its own (a
``training_step`` running ``self.head(self.backbone(x))``) cannot be counted: one warning when
the training starts says to give it a ``forward`` and call ``self(x)``, and its steps are timed
without FLOPs. The matmul dtype follows the Trainer's precision
(``"bf16-mixed"`` is bf16). On CUDA an entry is logged when its events are read, about one step
late; the last one is in ``callback.tracker.history`` and ``callback.tracker.summary()``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from torch import nn

from vitprof.core.errors import UserError
from vitprof.integrations.feeding import (
    KEYS,
    ForwardInputs,
    model_inputs,
    precision_dtype,
    require,
)
from vitprof.measure.mfu.tracker import StepEntry, Tracker, track

pl = require("lightning.pytorch", "lightning")


class MFUCallback(pl.Callback):  # type: ignore[name-defined]
    """Tracks every optimizer step; ``peak_tflops``, ``timing`` and ``summary`` (a markdown
    file written when the training ends) as in :func:`vitprof.track`;
    ``inputs(batch)``: the model's inputs in a batch (default: as the forward was called)."""

    def __init__(self, peak_tflops: float | None = None, *,
                 inputs: Callable[[Any], Any] | None = None, timing: bool = False,
                 summary: str | Path | None = None) -> None:
        self.peak_tflops = peak_tflops
        self.inputs = inputs
        self.timing = timing
        self.summary = summary
        self.tracker: Tracker | None = None
        self.forwards: ForwardInputs | None = None
        self._module: Any = None
        self._batches: list[Any] = []  # the micro-batches of the step under way
        self._steps_at_start: int | None = None  # global_step when that step began
        self._countable = True  # the module has a forward to count

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        self._module = pl_module
        optimizers = trainer.optimizers
        self.tracker = track(pl_module, self.peak_tflops,
                             dtype=precision_dtype(trainer.precision), on_step=self._log,
                             optimizer=optimizers[0] if len(optimizers) == 1 else None,
                             timing=self.timing, summary=self.summary)
        self.tracker.__enter__()
        self.forwards = ForwardInputs(pl_module)
        self._countable = has_forward(pl_module)
        if not self._countable:
            warnings.warn(f"vitprof: {type(pl_module).__name__} has no forward of its own, so "
                          f"its training steps cannot be counted (they are timed, without FLOPs "
                          f"or MFU): give it a forward running what training_step runs (e.g. "
                          f"`def forward(self, x): return self.head(self.backbone(x))`) and "
                          f"call self(x) in training_step; inputs= only chooses what the "
                          f"forward is fed", stacklevel=2)

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any,
                             batch_idx: int) -> None:
        if self.forwards is not None:
            self.forwards.take()  # forwards outside a batch (vitprof's own count) are in none
        if self.tracker is not None and self._steps_at_start is None:
            self._steps_at_start = trainer.global_step
            self.tracker.begin()

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        if self.tracker is None or self.forwards is None:
            return
        self._batches += self._fed(self.forwards.take(), batch)
        if trainer.global_step != self._steps_at_start:  # the optimizer stepped: a step ends
            self.tracker.step(*self._batches)
            self._batches, self._steps_at_start = [], None

    def _fed(self, caught: list[Any], batch: Any) -> list[Any]:
        """The inputs of this micro-batch's forwards; none (one warning) where they cannot be
        read or the module has no forward to count them with, so that the step has no FLOPs
        and the training goes on."""
        if not self._countable:
            return []
        if self.inputs is None and caught:
            return caught
        try:
            return [(self.inputs or model_inputs)(batch)]
        except UserError as error:
            warnings.warn(f"vitprof: this step cannot be counted, no MFU for it: {error}",
                          stacklevel=2)
            return []

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        if self.tracker is not None and self.forwards is not None:
            self.tracker.on_step = None  # Lightning takes no log_dict here
            self.tracker.close()
            self.forwards.remove()

    def _log(self, entry: StepEntry) -> None:
        values = {key: float(entry[name]) for name, key in KEYS.items()
                  if entry[name] is not None}
        if values:
            self._module.log_dict(values, on_step=True, on_epoch=False)


def has_forward(module: nn.Module) -> bool:
    """Whether ``module``'s class defines a forward (LightningModule's own only passes the
    call on to ``nn.Module``'s, which raises)."""
    return type(module).forward not in (pl.LightningModule.forward, nn.Module.forward)
