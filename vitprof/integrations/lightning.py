"""PyTorch Lightning: ``Trainer(callbacks=[MFUCallback()])`` logs ``vitprof/mfu`` and
``vitprof/tflops`` each training step through ``pl_module.log_dict``. ``vitprof/mfu`` is a
compute-window MFU: the time between one step's end and the next one's start (Lightning
fetching the next batch, its hooks) is in no step, where ``ThroughputMonitor``'s clock holds it.

A step is one optimizer step (``trainer.global_step`` moved): with ``accumulate_grad_batches=k``
it is timed from the start of its first micro-batch (``on_train_batch_start``, the batch is
loaded) to the end of its last (``on_train_batch_end``, after the optimizer step) and counted as
all its micro-batches, by the engine of :func:`vitprof.track`. A LightningModule with a
``forward`` of its own is counted on meta, which leaves the step's time alone: a micro-batch is
the forward on the inputs ``training_step`` fed it, caught at that forward
(:class:`vitprof.integrations.feeding.ForwardInputs`: a dict batch or several forwards are as
they ran), plus its backward; a ``training_step`` that never calls ``self(...)`` is counted as
the forward on the batch's inputs (:func:`vitprof.integrations.feeding.model_inputs`), and
``inputs(batch)`` replaces both. A LightningModule without a ``forward`` (a ``training_step``
running ``self.head(self.backbone(x))``, as Lightning's examples do) has its step counted as it
runs (:mod:`vitprof.measure.mfu.live_count`), once per batch signature (the shapes and dtypes
of the batch's tensors): from the batch's start to its optimizer step (or its end, under
gradient accumulation), so whatever ``training_step`` ran and its backward; that one step has
FLOPs but no MFU (its time holds the count). The matmul dtype follows the Trainer's precision
(``"bf16-mixed"`` is bf16). On CUDA an entry is logged when its events are read, about one step
late; the last one is in ``callback.tracker.history`` and ``callback.tracker.summary()``.

Under the DDP strategy, or FSDP2 (``ModelParallelStrategy`` with ``fully_shard`` in
``configure_model``; the ``"fsdp"`` strategy is FSDP1 and refuses the CPU), each rank counts its
own step and logs ``vitprof/mfu`` and ``vitprof/tflops`` of it, and ``vitprof/world_mfu`` and
``vitprof/world_tflops`` of the world's step (:mod:`vitprof.measure.mfu.ranks`); Lightning's
loggers write rank 0's, every rank's entries are in its ``callback.tracker.history``. The
strategy's call of ``training_step`` through the wrapper's forward is no forward
(:func:`redirected`).
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
from vitprof.measure.mfu.flops import RanStep, signature
from vitprof.measure.mfu.live_count import LiveCount
from vitprof.measure.mfu.tracker import StepEntry, Tracker, track

pl = require("lightning.pytorch", "lightning")


class MFUCallback(pl.Callback):  # type: ignore[name-defined]
    """Tracks every optimizer step; ``peak_tflops``, ``timing`` and ``summary`` (a markdown
    file written when the training ends) as in :func:`vitprof.track`;
    ``inputs(batch)``: the model's inputs in a batch (default: as the forward was called; a
    module without ``forward`` is counted as it runs, and ``inputs`` is not used)."""

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
        self.live: LiveCount | None = None  # for a module without forward: counts as it runs
        self._ran: RanStep | None = None  # the batch under way, for a module without forward

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        self._module = pl_module
        optimizers = trainer.optimizers
        self.tracker = track(pl_module, self.peak_tflops,
                             measure_dtype=precision_dtype(trainer.precision), on_step=self._log,
                             optimizer=optimizers[0] if len(optimizers) == 1 else None,
                             timing=self.timing, summary=self.summary)
        self.tracker.__enter__()
        self.forwards = ForwardInputs(pl_module, redirected)
        self.live = None if has_forward(pl_module) else LiveCount(pl_module)

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any,
                             batch_idx: int) -> None:
        if self.forwards is not None:
            self.forwards.take()  # forwards outside a batch (vitprof's own count) are in none
        if self.tracker is not None and self._steps_at_start is None:
            self._steps_at_start = trainer.global_step
            self.tracker.begin()
        if self.tracker is not None and self.live is not None:
            key = ("ran", signature(batch))
            self._ran = RanStep(key, here=not self.tracker.counts.known(key))
            if self._ran.here:
                self.live.start(batch)

    def on_before_optimizer_step(self, trainer: Any, pl_module: Any, optimizer: Any) -> None:
        self._stop_counting()  # the optimizer's step is counted apart

    def _stop_counting(self) -> None:
        """Keep the count of the batch counted as it ran, if one is under way."""
        if self.live is not None and self.live.running and self.tracker is not None:
            assert self._ran is not None
            self.tracker.counts.keep(self._ran.key, self.live.stop())

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        if self.tracker is None or self.forwards is None:
            return
        self._stop_counting()
        self._batches += self._fed(self.forwards.take(), batch)
        if trainer.global_step != self._steps_at_start:  # the optimizer stepped: a step ends
            self.tracker.step(*self._batches)
            self._batches, self._steps_at_start = [], None

    def _fed(self, caught: list[Any], batch: Any) -> list[Any]:
        """The inputs of this micro-batch's forwards (for a module without forward, its count
        made as it ran); none (one warning) where they cannot be read, so that the step has no
        FLOPs and the training goes on."""
        if self._ran is not None:
            return [self._ran]
        if self.inputs is None and caught:
            return caught
        try:
            return [(self.inputs or model_inputs)(batch)]
        except UserError as error:
            warnings.warn(f"vitprof: this step cannot be counted, no MFU for it: {error}",
                          stacklevel=2)
            return []

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        self._stop_counting()  # the counter's modes and hooks go with the failed step

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


def redirected(module: nn.Module) -> bool:
    """Whether this call of ``module`` is Lightning's forward redirection, not its forward: the
    DDP strategy (and FSDP's, DeepSpeed's) calls ``training_step`` through the wrapper's
    forward, with the module's ``forward`` patched to ``training_step`` for that one call
    (``lightning.pytorch.strategies.strategy._ForwardRedirection``)."""
    patched = module.__dict__.get("forward")
    return "_ForwardRedirection." in getattr(patched, "__qualname__", "")


def has_forward(module: nn.Module) -> bool:
    """Whether ``module``'s class defines a forward (LightningModule's own only passes the
    call on to ``nn.Module``'s, which raises)."""
    return type(module).forward not in (pl.LightningModule.forward, nn.Module.forward)
