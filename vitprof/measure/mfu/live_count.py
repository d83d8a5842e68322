"""Counting the training step that runs: the user's own step, priced op by op as it runs.

Where the tracker cannot count a step by running a ``forward`` on meta (a LightningModule
whose ``training_step`` calls ``self.backbone(x)`` and has no ``forward``, a Trainer whose
``compute_loss`` is its own), a callback counts the first real step of each input signature
while it runs: :class:`LiveCount` puts vitprof's counter (:class:`vitprof.count.counter.OpCounter`
with ``real_step=True``) around the real forward and backward, from :meth:`LiveCount.start` to
:meth:`LiveCount.stop`. Whatever the step runs between the two is counted: every module of the
model or none, the loss, a second model, the backward of everything the loss depends on. The
backward starts with the first op the autograd engine runs.

Nothing of the step changes: each op runs as it is (nothing is decomposed, nothing drawn from
the random generators), and a failure of vitprof's pricing ends the count, never the step
(:meth:`stop` then gives None and one warning). FLOPs are ``2 x`` the MACs, as in
:mod:`vitprof.measure.mfu.flops`; the element-wise work of the loss is in the vector FLOPs,
which a meta count of ``forward`` leaves out. Components are placed by the one breakdown every
feature asks (:func:`vitprof.recognize.breakdown`: the graph read from the step's data flow, as
for a meta count); the count's cost is the counter's Python work on every op of that one step and
the breakdown's (docs/mfu.md gives a measure).
"""

from __future__ import annotations

import warnings
from contextlib import ExitStack
from typing import Any

import torch
from torch import nn
from torch.utils._pytree import tree_leaves

from vitprof.core.errors import one_line
from vitprof.core.records import OpRecord, Phase
from vitprof.count.counter import OpCounter
from vitprof.count.session import counted_run
from vitprof.count.training import phase_components
from vitprof.measure.mfu.flops import StepFlops
from vitprof.recognize.breakdown import breakdown


class LiveCount:
    """The count of ``model``'s step from :meth:`start` to :meth:`stop`."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.counter: OpCounter | None = None
        self._running = ExitStack()

    @property
    def running(self) -> bool:
        return self.counter is not None

    def start(self, data: Any = ()) -> None:
        """Count every op from now on (the step's first op must come after); ``data``: the
        step's batch as it was handed to it (any nesting of tensors), the model's input data
        (:meth:`vitprof.count.counter.OpCounter.feed`)."""
        counter = OpCounter(self.model, dict(self.model.named_parameters()), real_step=True)
        counter.feed(t for t in tree_leaves(data) if isinstance(t, torch.Tensor))
        counter.track_autograd()
        self._running.enter_context(counter.running())
        self.counter = counter

    def stop(self) -> StepFlops | None:
        """Stop counting; the counts of the step so far, or None (one warning) where the
        counter or the breakdown failed or the step had no backward."""
        counter, self.counter = self.counter, None
        if counter is None:
            return None
        self._running.close()
        failed, stage = counter.failed, "counter"
        records: tuple[OpRecord, ...] = ()
        if failed is None:
            try:  # after the step: a failure of the breakdown ends the count, never the training
                run = counted_run(counter, dict(self.model.named_parameters()), train=True)
                records = breakdown(run, self.model).ops
            except Exception as error:
                failed, stage = error, "breakdown"
        if failed is not None or not any(r.phase == Phase.BACKWARD for r in records):
            reason = ("it ran no backward while it was counted" if failed is None else
                      f"vitprof's {stage} failed on it ({one_line(failed)})")
            warnings.warn(f"vitprof: this step cannot be counted, no MFU for it: {reason}",
                          stacklevel=2)
            return None
        forward = sum(r.macs for r in records if r.phase == Phase.FORWARD)
        backward = sum(r.macs for r in records if r.phase == Phase.BACKWARD)
        components = {str(c): 2 * v.total.macs for c, v in phase_components(records).items()}
        return StepFlops(forward, backward, sum(r.vector_flops for r in records), components)
