"""Hugging Face ``Trainer``: ``Trainer(..., callbacks=[MFUCallback()])`` adds ``vitprof/mfu``
and ``vitprof/tflops`` to the Trainer's ``logs`` at each log (``on_log``).

A ``TrainerCallback`` never sees the batch: the inputs of each training forward are caught at
the model's forward (:class:`vitprof.integrations.feeding.ForwardInputs`), one per micro-batch,
and a step (``on_step_begin`` to ``on_step_end``, one optimizer step) is counted as all of them,
by the engine of :func:`vitprof.track`. The matmul dtype follows ``args.bf16`` / ``args.fp16``.
The values logged are those of the last step read, once (on CUDA, about one step late); every
step is in ``callback.tracker.history`` and ``callback.tracker.summary()``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from vitprof.integrations.feeding import KEYS, ForwardInputs, require
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

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None,
                       optimizer: Any = None, **kwargs: Any) -> None:
        dtype = "bf16" if args.bf16 else "fp16" if args.fp16 else None
        inner = getattr(optimizer, "optimizer", optimizer)  # accelerate wraps the optimizer
        self.tracker = track(model, self.peak_tflops, dtype=dtype, on_step=self._keep,
                             optimizer=inner if isinstance(inner, torch.optim.Optimizer)
                             else None, timing=self.timing, summary=self.summary)
        self.tracker.__enter__()
        self.forwards = ForwardInputs(model)

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.tracker is not None and self.forwards is not None:
            self.forwards.take()  # a forward before the step (an evaluation) is not in it
            self.tracker.begin()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.tracker is not None and self.forwards is not None:
            self.tracker.step(*self.forwards.take())

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

    def _keep(self, entry: StepEntry) -> None:
        self.last = entry
