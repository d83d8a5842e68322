"""The one counting session: run a model once under the counter and return what it did.

:func:`count` owns the whole run: meta stand-ins for a model with weights fed meta inputs, the
module stack, the :class:`~vitprof.count.counter.OpCounter` modes, the forward (and, for a
training step, the backward), and the op records. Timing, memory and anything else that needs
to see the run plug in through ``on_event`` (module enter and leave, with the number of ops
counted by then) instead of driving the counter themselves.

Inputs are ready-made: ``(args, kwargs)``, fed as ``model(*args, **kwargs)``. The run happens
where the inputs live; inputs on meta with a model that has weights means meta stand-ins of its
parameters and buffers through ``torch.func.functional_call``, which leaves the model untouched.
The model runs in train mode for a training step and in eval mode otherwise; afterwards it is as
it was, each module's mode, attributes and buffers, and so are the random number generators
(:func:`vitprof.count.state.untouched`); the grad mode of an inference count is the caller's.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import torch
from torch import nn
from torch.func import functional_call
from torch.utils._pytree import tree_leaves, tree_map

from vitprof.core.errors import UserError
from vitprof.core.records import OpRecord, Phase
from vitprof.core.vocab import EventKind
from vitprof.count.counter import OpCounter
from vitprof.count.flooring import Floor
from vitprof.count.formulas import Formula
from vitprof.count.liveness import Liveness
from vitprof.count.module_stack import ModuleStack
from vitprof.count.running import CountFailed, Footprint, on_meta, traced, untraced
from vitprof.count.state import in_place_warning, untouched
from vitprof.count.trace import Trace, Whereabouts
from vitprof.count.training import first_output

Inputs = tuple[tuple[Any, ...], dict[str, Any]]  # (args, kwargs) of one forward
# a training step's backward: (output, leaves) -> the gradient of each leaf, by its id
Backward = Callable[[torch.Tensor, Sequence[torch.Tensor]], dict[int, torch.Tensor]]


def image_inputs(image: torch.Tensor) -> Inputs:
    """The inputs of a model called as ``model(image)``."""
    return (image,), {}


def as_inputs(example: torch.Tensor | Inputs) -> Inputs:
    """``example`` as ``(args, kwargs)``: a tensor is the forward's one positional argument,
    a pair ``(args, kwargs)`` (a workload's whole example) is taken as it is."""
    return image_inputs(example) if isinstance(example, torch.Tensor) else example


def meta_twins(inputs: Inputs) -> Inputs:
    """``inputs`` with every tensor replaced by an empty meta tensor of its shape and dtype."""
    return tree_map(
        lambda v: torch.empty_like(v, device="meta") if isinstance(v, torch.Tensor) else v,
        inputs,
    )


def _on_meta(inputs: Inputs) -> bool:
    """Whether the inputs are on meta: any of them (a CPU tensor beside meta ones holds values
    the forward reads, such as the sizes of a patch grid)."""
    return any(v.is_meta for v in tree_leaves(inputs) if isinstance(v, torch.Tensor))


def stand_ins(model: nn.Module) -> dict[str, torch.Tensor]:
    """Meta tensors for every parameter and buffer of ``model`` (same shape, dtype and
    ``requires_grad``). A DTensor (``fully_shard``'s shard of a parameter) stands in as a plain
    tensor of its whole shape: the tensor its rank all-gathers and computes with."""
    return {
        name: _stand_in(t).requires_grad_(t.requires_grad)
        for name, t in [*model.named_parameters(), *model.named_buffers()]
    }


def _stand_in(tensor: torch.Tensor) -> torch.Tensor:
    if is_dtensor(tensor):
        return torch.empty(tensor.shape, dtype=tensor.dtype, device="meta")
    return torch.empty_like(tensor, device="meta")


def is_dtensor(tensor: torch.Tensor) -> bool:
    """Whether ``tensor`` is a ``torch.distributed.tensor.DTensor``; where that module was never
    imported no tensor is one, and it is not imported here (it costs a count time)."""
    module = sys.modules.get("torch.distributed.tensor")
    return module is not None and isinstance(tensor, module.DTensor)


def _substitutes(model: nn.Module, inputs: Inputs) -> dict[str, torch.Tensor] | None:
    """The stand-ins a run of ``model`` on ``inputs`` needs: for meta inputs and a model with
    weights; None when the model runs as it is."""
    return stand_ins(model) if _on_meta(inputs) and not on_meta(model) else None


def _forward(
    model: nn.Module, inputs: Inputs, substitutes: dict[str, torch.Tensor] | None
) -> Any:
    args, kwargs = inputs
    if substitutes is not None:
        return functional_call(model, substitutes, args, kwargs)
    return model(*args, **kwargs)


def call(model: nn.Module, inputs: Inputs) -> Any:
    """``model(*args, **kwargs)``; a model with weights meets meta inputs through stand-ins."""
    return _forward(model, inputs, _substitutes(model, inputs))


@dataclass(frozen=True, slots=True)
class Event:
    """A module entered or left during a counted run.

    ``kind``: entered or left; ``path`` the module's path (``""`` the root);
    ``phase`` ``"forward"`` or ``"backward"``; ``ops`` the number of op records counted before
    it, so the records between two events are ``run.ops[a.ops:b.ops]``.
    """

    kind: EventKind
    path: str
    phase: Phase
    ops: int


@dataclass(frozen=True)
class Run:
    """What one counted run did, placing nothing: the recognize layer places the records
    afterwards (:func:`vitprof.recognize.breakdown`).

    ``ops``: the op records in the order they ran, not placed (component ``other`` but where
    a fused op named its parts', block None); ``whereabouts``: where each of them ran
    (:class:`~vitprof.count.trace.Whereabouts`); ``unsupported``: ``{op name: calls}`` of the
    ops that ran without a formula; ``nodes``: autograd node -> index in ``ops`` of the forward
    op it belongs to (filled for a training count only; the nodes, and what autograd saved for
    them, stay alive as long as the Run); ``params``: the tensors that stood for the parameters
    (the meta stand-ins, or the model's own), by name; ``trace``: the data flow of the forward
    records, for the graph recognizer; ``footprint``: the peak of the tensors it held at once,
    for the memory guard (:func:`vitprof.count.running.traced`); ``floors``: the forward's
    convolutions that left input positions unread (:mod:`vitprof.count.flooring`);
    ``gradients``: the gradient of each trainable parameter, by name, when the count was asked
    to keep them (``keep_gradients``); ``warnings``: a line naming the parameters the run changed
    in place (:func:`vitprof.count.state.in_place_warning`), if any.
    """

    ops: tuple[OpRecord, ...]
    unsupported: dict[str, int]
    nodes: dict[Any, int]
    params: dict[str, torch.Tensor]
    footprint: Footprint
    trace: Trace | None = None
    floors: tuple[Floor, ...] = ()
    gradients: dict[str, torch.Tensor] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()  # the parameters the run changed in place, named
    whereabouts: tuple[Whereabouts, ...] = ()  # per record of ``ops``: where it ran


def count(
    model: nn.Module, inputs: Inputs, *, train: bool = False,
    backward: bool = True, on_event: Callable[[Event], None] | None = None,
    formulas: Mapping[Any, Formula] | None = None, live: Liveness | None = None,
    substitutes: dict[str, torch.Tensor] | None = None, keep_gradients: bool = False,
    attention: Callable[..., Any] | None = None, backward_of: Backward | None = None,
) -> Run:
    """Run ``model`` on ``inputs`` once under the counter and return the :class:`Run`; no
    component map is read: the records are placed afterwards (:mod:`vitprof.recognize`).

    ``train=True`` counts a training step (:func:`training_step`); with ``backward=False`` it
    stops after the train-mode forward, with the autograd graph kept in ``Run.nodes``.
    ``on_event`` is called at each module :class:`Event` (backward ones too in a training step).
    ``formulas`` (``{op: formula}``) win over the registered formulas for this run only.
    ``live`` tracks the tensors the run holds (:class:`~vitprof.count.liveness.Liveness`, made
    if not given). ``substitutes`` (every parameter and buffer by name) stand in for the
    model's own tensors, instead of meta stand-ins (fake tensors, for autocast); with
    ``keep_gradients`` the backward's gradients stay alive in ``Run.gradients``. ``attention``
    runs instead of every ``scaled_dot_product_attention`` call (a kernel chosen for a memory
    step), at any depth; None: torch's own choice. ``backward_of`` runs the backward instead of
    :func:`ones_backward` (:func:`training_step`).
    A failing model raises :class:`~vitprof.count.running.CountFailed` with its error and the
    footprint the memory guard can know of it (:func:`vitprof.count.running.untraced`); a
    :class:`UserError` passes as it is.
    """
    own: dict[str, torch.Tensor] = dict(model.named_parameters())
    params = own
    if substitutes is None:
        substitutes = _substitutes(model, inputs)
    if substitutes is not None:
        params = {name: substitutes[name] for name in params}
    counter: OpCounter
    modules: ModuleStack

    def notify(kind: EventKind) -> Callable[[str, nn.Module], None] | None:
        if on_event is None:
            return None
        return lambda path, _module: on_event(Event(
            kind, path, Phase.BACKWARD if modules.in_backward else Phase.FORWARD, counter.recorded
        ))

    modules = ModuleStack(model, on_enter=notify(EventKind.ENTER),
                          on_leave=notify(EventKind.LEAVE),
                          backward=train and backward and on_event is not None)
    counter = OpCounter(model, params, formulas=formulas, modules=modules, live=live,
                        attention=attention)
    forward = partial(_forward, model, inputs, substitutes)
    counter.live.hold(inputs)
    counter.feed(v for v in tree_leaves(inputs) if isinstance(v, torch.Tensor))
    gradients: dict[str, torch.Tensor] = {}
    changed: list[str] = []
    with untouched(model, changed):
        try:
            with counter.running():
                with counter.mode_switch(own):
                    model.train(train)
                if train:
                    found = training_step(counter, forward, params.values(), backward=backward,
                                          backward_of=backward_of)
                    if keep_gradients:
                        gradients = _named(params, found)
                else:
                    forward()
        except UserError:
            raise
        except Exception as error:
            footprint = untraced(model, counter.live, counter.recorded, train)
            raise CountFailed(error, footprint) from error
    warnings = (in_place_warning(changed, on_meta(model)),) if changed else ()
    return counted_run(counter, params, train, gradients, warnings)


def counted_run(counter: OpCounter, params: dict[str, torch.Tensor], train: bool,
                gradients: dict[str, torch.Tensor] | None = None, warnings: tuple[str, ...] = ()
                ) -> Run:
    """The :class:`Run` of what ``counter`` counted, ``params`` the tensors that stood for the
    parameters, ``train`` whether it counted a training step (the footprint says so)."""
    return Run(tuple(counter.records()), dict(counter.unsupported), counter.nodes(), params,
               traced(counter.live, train), counter.trace(), tuple(counter.floors),
               gradients or {}, warnings, counter.whereabouts())


def _named(params: dict[str, torch.Tensor], gradients: dict[int, torch.Tensor]
           ) -> dict[str, torch.Tensor]:
    """``gradients`` (by ``id`` of the leaf) by the name of the parameter."""
    return {name: gradients[id(t)] for name, t in params.items() if id(t) in gradients}


def training_step(
    counter: OpCounter, forward: Callable[[], Any], leaves: Iterable[torch.Tensor],
    *, backward: bool = True, backward_of: Backward | None = None,
) -> dict[int, torch.Tensor]:
    """Run ``forward()`` and the backward to ``leaves`` under ``counter`` (already running);
    return the gradients (by ``id`` of the leaf; none without the backward, or for a leaf the
    output does not depend on).

    The forward runs with gradients enabled; the backward is the gradient of a ones gradient
    on the output (no loss function is charged) to every leaf that requires one, by
    ``torch.autograd.grad``, so that no ``.grad`` of the user's model is written
    (:func:`ones_backward`; ``backward_of(out, leaves)`` instead, when given). The ratio of
    backward to forward is measured, not assumed (see :mod:`vitprof.count.training`).
    """
    leaves = [t for t in leaves if t.requires_grad]
    if not leaves:
        raise UserError("no parameter requires a gradient: there is no training step to count")
    counter.track_autograd()
    with torch.enable_grad():
        out = first_output(forward())
        counter.settle()
        if out.grad_fn is None:
            raise UserError("the model's output does not depend on any trainable parameter")
        if not backward:
            return {}
        counter.begin_backward()
        return (backward_of or ones_backward)(out, leaves)


def ones_backward(out: torch.Tensor, leaves: Sequence[torch.Tensor]) -> dict[int, torch.Tensor]:
    """The gradients of a ones gradient on ``out`` to ``leaves`` (``torch.autograd.grad``: no
    ``.grad`` is written), by ``id`` of the leaf; none for a leaf ``out`` does not depend on."""
    found = torch.autograd.grad(out, leaves, torch.ones_like(out), allow_unused=True)
    return {id(leaf): g for leaf, g in zip(leaves, found, strict=True) if g is not None}
