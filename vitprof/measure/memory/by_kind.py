"""Memory by kind: parameters by dtype, activations per component, what a backward keeps.

* **Parameters**: ``numel x element_size`` of every parameter, by dtype and by component; each
  shared tensor once.
* **Inference activations** of a component: the bytes its counted operations write (their
  outputs), from the counter's records. It is the activation traffic of one forward, not a
  peak: a runtime frees and reuses buffers.
* **Saved for backward** of a component: what the memory step keeps for the backward (one
  implementation: :mod:`vitprof.measure.memory.step`, read by :func:`saved_for_backward`). Each
  saved storage counts once, whole (a view keeps its base alive), under the component of the
  op that allocated it (the inputs under the first op's); parameters are not counted. Attention
  runs the kernel torch would dispatch to on the target
  (:mod:`vitprof.measure.memory.attention_kernels`).
* **Peak device memory**: ``torch.cuda.max_memory_allocated`` over the timed run on a GPU; the
  CPU allocator reports none.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from torch import nn

from vitprof.core.records import COMPONENTS, Component, OpRecord, ParamRecord, Phase
from vitprof.core.vocab import MemoryTarget, Optimizer
from vitprof.measure.memory.estimate import predict, step_settings
from vitprof.measure.memory.settings import MemorySettings
from vitprof.recognize.tables import ComponentMap
from vitprof.workload import Workload, dtype_name


def param_bytes_by_dtype(model: nn.Module) -> dict[str, int]:
    """Parameter bytes per dtype name, each shared tensor once."""
    totals: dict[str, int] = defaultdict(int)
    for p in model.parameters():
        totals[dtype_name(p.dtype)] += p.numel() * p.element_size()
    return dict(totals)


def param_bytes_by_component(model: nn.Module, params: Iterable[ParamRecord]
                             ) -> dict[Component, int]:
    """Parameter bytes per component (every component present), of a breakdown's parameter
    records (a fused projection's weight is two records, one per share of its rows), each
    element at the dtype of ``model``'s parameter of its name."""
    sizes = {name: p.element_size() for name, p in model.named_parameters()}
    totals = dict.fromkeys(COMPONENTS, 0)
    for record in params:
        totals[record.component] += record.numel * sizes[record.name]
    return totals


def activation_bytes(records: Iterable[OpRecord]) -> dict[Component, int]:
    """Bytes written by each component's forward operations (every component present)."""
    totals = dict.fromkeys(COMPONENTS, 0)
    for op in records:
        if op.phase == Phase.FORWARD:
            totals[op.component] += op.bytes_written
    return totals


def saved_for_backward(work: Workload, mapping: ComponentMap, target: MemoryTarget
                       ) -> dict[Component, int]:
    """Bytes autograd saves for the backward, per component (every component present): the
    ``activations`` of the memory step's estimate (:func:`vitprof.measure.memory.estimate.predict`:
    a training step of ``work`` at its batch on fake tensors, sgd, the default loop, on
    ``target``), each storage once, under the component of the op that made it. ``mapping``:
    the step's (its blocks and head; nothing is checkpointed)."""
    settings = step_settings(MemorySettings(Optimizer.SGD, target=target))
    estimate = predict(work, mapping, settings, work.inputs.batch, names={})
    return {Component(name): part.activations for name, part in estimate.by_component.items()}
