"""PyTorch Lightning: ``Trainer(callbacks=[MFUCallback()])`` logs ``vitprof/mfu`` and
``vitprof/tflops`` each training step through ``pl_module.log_dict``.

The step is timed from ``on_train_batch_start`` (the batch is loaded) to ``on_train_batch_end``
(after the optimizer step) and counted as the LightningModule's forward on the batch's inputs
(:func:`vitprof.integrations.feeding.model_inputs`, or ``inputs(batch)``) plus its backward,
by the engine of :func:`vitprof.track`. The matmul dtype follows the Trainer's precision
(``"bf16-mixed"`` is bf16). On CUDA an entry is logged when its events are read, about one
step late; the last one is in ``callback.tracker.history`` and ``callback.tracker.summary()``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vitprof.integrations.feeding import KEYS, model_inputs, precision_dtype, require
from vitprof.measure.mfu.tracker import StepEntry, Tracker, track

pl = require("lightning.pytorch", "lightning")


class MFUCallback(pl.Callback):  # type: ignore[name-defined]
    """Tracks every training step; ``peak_tflops`` and ``timing`` as in :func:`vitprof.track`;
    ``inputs(batch)``: the model's inputs in a batch."""

    def __init__(self, peak_tflops: float | None = None, *,
                 inputs: Callable[[Any], Any] = model_inputs, timing: bool = False) -> None:
        self.peak_tflops = peak_tflops
        self.inputs = inputs
        self.timing = timing
        self.tracker: Tracker | None = None
        self._module: Any = None

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        self._module = pl_module
        optimizers = trainer.optimizers
        self.tracker = track(pl_module, self.peak_tflops,
                             dtype=precision_dtype(trainer.precision), on_step=self._log,
                             optimizer=optimizers[0] if len(optimizers) == 1 else None,
                             timing=self.timing)
        self.tracker.__enter__()

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any,
                             batch_idx: int) -> None:
        if self.tracker is not None:
            self.tracker.begin()

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        if self.tracker is not None:
            self.tracker.step(self.inputs(batch))

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        if self.tracker is not None:
            self.tracker.on_step = None  # Lightning takes no log_dict here
            self.tracker.close()

    def _log(self, entry: StepEntry) -> None:
        values = {key: float(entry[name]) for name, key in KEYS.items()
                  if entry[name] is not None}
        if values:
            self._module.log_dict(values, on_step=True, on_epoch=False)
