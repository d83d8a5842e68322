"""Hugging Face ``Trainer``: ``Trainer(..., callbacks=[MFUCallback()])`` adds ``vitprof/mfu``
and ``vitprof/tflops`` to the Trainer's ``logs`` at each log (``on_log``).

A ``TrainerCallback`` never sees the batch. With the Trainer's own ``compute_loss`` (the model
fed the batch, ``model(**inputs)``), the inputs of each training forward are caught at the
model's forward (:class:`vitprof.integrations.feeding.ForwardInputs`), one per micro-batch, and
counted on meta, which leaves the step's time alone; a step (``on_step_begin`` to
``on_step_end``, one optimizer step) is counted as all of them, by the engine of
:func:`vitprof.track`. A Trainer subclass with its own ``compute_loss`` or ``training_step``
runs what it likes (a subset of the inputs, a sub-module, a second model): there each
micro-batch's ``training_step`` (its forward, loss and backward) is counted as it runs
(:mod:`vitprof.measure.mfu.live_count`), once per signature of its inputs; that step has FLOPs
but no MFU (its time holds the count). The callback is not handed the Trainer: it finds it in
the frames that called ``on_train_begin`` (the Trainer's training loop) and wraps that
Trainer's ``training_step`` until the training ends; where it cannot, the forwards are caught,
and a step that ran no forward of the model is one warning and has no FLOPs. The matmul dtype
follows ``args.bf16`` / ``args.fp16``. The values logged are those of the last step read, once
(on CUDA, about one step late); every step is in ``callback.tracker.history`` and
``callback.tracker.summary()``.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import torch

from vitprof.integrations.feeding import KEYS, ForwardInputs, require
from vitprof.measure.mfu.flops import RanStep, signature
from vitprof.measure.mfu.live_count import LiveCount
from vitprof.measure.mfu.tracker import StepEntry, Tracker, track

hf = require("transformers", "transformers")


class MFUCallback(hf.TrainerCallback):  # type: ignore[name-defined]
    """Tracks every optimizer step; ``peak_tflops``, ``timing`` and ``summary`` (a markdown
    file written when the training ends) as in :func:`vitprof.track`."""

    def __init__(self, peak_tflops: float | None = None, *, timing: bool = False,
                 summary: str | Path | None = None) -> None:
        self.peak_tflops = peak_tflops
        self.timing = timing
        self.summary = summary
        self.tracker: Tracker | None = None
        self.forwards: ForwardInputs | None = None
        self.last: StepEntry | None = None
        self.logged = 0  # the step whose values were logged last
        self.trainer: Any = None  # a Trainer of its own compute_loss: its steps counted as run
        self._own: Any = None  # that Trainer's instance attribute training_step, if it had one
        self._ran: list[RanStep] = []  # the micro-batches of the step under way, so counted
        self._warned = False  # of a step that ran no forward of the model

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None,
                       optimizer: Any = None, **kwargs: Any) -> None:
        measure_dtype = "bf16" if args.bf16 else "fp16" if args.fp16 else None
        inner = getattr(optimizer, "optimizer", optimizer)  # accelerate wraps the optimizer
        self.tracker = track(model, self.peak_tflops, measure_dtype=measure_dtype,
                             on_step=self._keep,
                             optimizer=inner if isinstance(inner, torch.optim.Optimizer)
                             else None, timing=self.timing, summary=self.summary)
        self.tracker.__enter__()
        self.forwards = ForwardInputs(model)
        trainer = running_trainer()
        if trainer is not None and runs_its_own_step(trainer):
            self.trainer, self._own = trainer, vars(trainer).get("training_step")
            trainer.training_step = self._counted(trainer.training_step, LiveCount(model))

    def _counted(self, training_step: Callable[..., Any], live: LiveCount) -> Callable[..., Any]:
        """``training_step``, counted as it runs the first time its inputs' signature is
        seen."""

        def counted(model: Any, inputs: Any, *rest: Any, **keywords: Any) -> Any:
            assert self.tracker is not None
            key = ("ran", signature(inputs))
            ran = RanStep(key, here=not self.tracker.counts.known(key))
            self._ran.append(ran)
            if not ran.here:
                return training_step(model, inputs, *rest, **keywords)
            live.start(inputs)
            try:
                return training_step(model, inputs, *rest, **keywords)
            finally:
                self.tracker.counts.keep(ran.key, live.stop())

        return counted

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.tracker is not None and self.forwards is not None:
            self.forwards.take()  # a forward before the step (an evaluation) is not in it
            self._ran = []
            self.tracker.begin()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.tracker is None or self.forwards is None:
            return
        caught = self.forwards.take()
        if self.trainer is not None:
            self.tracker.step(*self._ran)
            return
        if not caught and not self._warned:
            self._warned = True
            warnings.warn("vitprof: a training step ran no forward of the Trainer's model, so "
                          "nothing can count it (a step is counted as it runs only for a Trainer "
                          "subclass with its own compute_loss or training_step, found in the "
                          "frames calling the callback): such steps have no FLOPs", stacklevel=2)
        self.tracker.step(*caught)

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None,
               **kwargs: Any) -> None:
        if self.last is None or logs is None or self.last["step"] == self.logged:
            return  # each step's values once (not again in the end-of-training summary)
        self.logged = self.last["step"]
        values = {key: self.last[name] for name, key in KEYS.items()
                  if self.last[name] is not None}
        logs.update(values)
        if state.log_history and state.log_history[-1].get("step") == state.global_step:
            state.log_history[-1].update(values)  # the Trainer stored a copy of logs

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.tracker is not None and self.forwards is not None:
            self.tracker.close()
            self.forwards.remove()
        if self.trainer is not None:  # its training_step as it was
            if self._own is None:
                del self.trainer.training_step
            else:
                self.trainer.training_step = self._own
            self.trainer = None

    def _keep(self, entry: StepEntry) -> None:
        self.last = entry


def running_trainer() -> Any:
    """The ``Trainer`` whose training loop called this callback: the nearest caller frame whose
    ``self`` is one; None if no frame holds one."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        candidate = frame.f_locals.get("self")
        if isinstance(candidate, hf.Trainer):
            return candidate
        frame = frame.f_back
    return None


def runs_its_own_step(trainer: Any) -> bool:
    """Whether ``trainer``'s class replaces the ``compute_loss`` or ``training_step`` that feeds
    the model its batch (``model(**inputs)``, then the backward)."""
    kind = type(trainer)
    return (kind.compute_loss is not hf.Trainer.compute_loss
            or kind.training_step is not hf.Trainer.training_step)
