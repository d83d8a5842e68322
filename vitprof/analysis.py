"""``analyze()``: build or take a model, run it once under the counter, return a Profile.

The default device is ``meta``: parameters and activations are meta tensors, so nothing is
allocated and nothing is computed. A model that already has weights is run on meta through
``torch.func.functional_call`` with meta stand-ins, which leaves the model untouched. A model that
cannot run on meta for a reason of the meta device (data-dependent shapes, ops without a meta
kernel) is counted again on real CPU tensors, and the Profile's ``fallback`` says why; any other
failure is reported at once (:mod:`vitprof.count.running`).

Every analysis runs the model in eval mode (train mode for ``mode="train"``); afterwards the model
is as it was, each module's mode, attributes and buffers, and so are the random number generators
(:func:`vitprof.count.state.untouched`); the grad mode is the caller's. Hooks are removed even
when the model fails.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn

from vitprof.core.collector import collector_paused
from vitprof.core.errors import UserError
from vitprof.core.overrides import Override
from vitprof.core.validate import check_word
from vitprof.core.vocab import Device, Mode, Recognizer
from vitprof.count.flooring import floor_warnings
from vitprof.count.formulas import Formula
from vitprof.count.result import Profile
from vitprof.count.running import (
    CountFailed,
    Footprint,
    MetaFailure,
    first_on_meta,
    on_device,
    on_meta,
    run_failed,
    unsupported_warning,
)
from vitprof.count.session import Run, count
from vitprof.recognize import Found, breakdown
from vitprof.recognize.self_checks import self_checks
from vitprof.workload import ImageSize, InputRequest, Workload, deployed, make_workload


def _model_device(model: nn.Module) -> str:
    for tensor in [*model.parameters(), *model.buffers()]:
        return tensor.device.type
    return Device.CPU


def _check_arguments(device: str, mode: str, recognizer: str = Recognizer.AUTO) -> None:
    check_word("recognizer", recognizer, Recognizer)
    check_word("mode", mode, Mode)
    if check_word("device", device, Device) is Device.CUDA and not torch.cuda.is_available():
        raise UserError("device cuda requested but no CUDA device is available")


def workload_of(
    model: nn.Module | str | Workload, request: InputRequest | None, *,
    name: str | None = None, overrides: Sequence[Override] = (), **keywords: Any,
) -> Workload:
    """``model`` if it is a :class:`~vitprof.workload.Workload` already (which carries its input,
    name and rules: none may be given beside it), else its workload at ``request`` or at the
    request ``keywords`` make (:meth:`vitprof.workload.InputRequest.of`)."""
    if not isinstance(model, Workload):
        return make_workload(model, InputRequest.of(request, **keywords), name=name,
                             overrides=overrides)
    if request is not None or name is not None or overrides or InputRequest.asked(**keywords):
        raise UserError("a Workload carries its input, name and rules: give none of them "
                        "beside it")
    return model


def analyze(
    model: nn.Module | str | Workload,
    *,
    image_size: ImageSize | None = None,
    batch_size: int = 1,
    num_classes: int | None = None,
    device: str = Device.META,
    overrides: Sequence[Override] = (),
    name: str | None = None,
    mode: str = Mode.INFERENCE,
    deploy: bool = False,
    formulas: Mapping[Any, Formula] | None = None,
    frames: int | None = None,
    in_chans: int | None = None,
    dtype: torch.dtype | str | None = None,
    input_shape: Sequence[int] | None = None,
    inputs: Any = None,
    recognizer: str = Recognizer.AUTO,
    request: InputRequest | None = None,
) -> Profile:
    """Count params, MACs and vector FLOPs of ``model`` per component and per block.

    ``model`` is an ``nn.Module`` (a ``torch.compile``'d one is unwrapped, with a warning), any
    name :func:`vitprof.models.zoo.build` accepts, or a :class:`vitprof.workload.Workload`.
    The input is ``request`` (:class:`vitprof.workload.InputRequest`), else the one its fields
    given here as keywords make (this signature is a wrapper kept for them): ``image_size`` is a
    positive int (a square) or ``(H, W)``; ``frames`` makes a video input; ``in_chans`` sets the
    channels; a model built by name is built at these sizes. ``dtype`` (``torch.bfloat16`` or
    ``"bfloat16"``, float16, float32) is the model's and the input's: MACs do not change,
    bytes do. ``input_shape`` is the whole input tensor, ``inputs`` the arguments themselves
    (a tensor, a tuple of them, a dict of keyword arguments, or a callable ``(device, dtype) ->
    args | (args, kwargs)``; tensors on any device are re-made on meta). ``batch_size`` is a
    positive int; ``num_classes=0`` builds the model without a classification head (timm's
    convention). ``overrides`` are ``(regex, component)`` pairs that win over the recognizer.
    ``mode="train"`` counts a training step, forward and backward; each op record says its
    ``phase``. ``deploy=True`` counts the deploy form (:func:`vitprof.models.deploy.deploy_form`),
    a copy: re-parameterised, BatchNorm folded. ``formulas`` (``{torch.ops.aten.OP: formula}``)
    price those ops for this call only, over the registered formulas (signature and conventions
    in :mod:`vitprof.count.formulas`). ``recognizer`` picks who names the components
    (:func:`vitprof.recognize.breakdown`): ``"auto"``, ``"graph"`` or ``"tables"``;
    ``overrides`` win over either.

    Every model is counted on meta first. It is then run with real tensors when ``device`` is
    cpu or cuda, or when the meta run failed for a reason of the meta
    device (:func:`vitprof.count.running.meta_caused`; the fallback, on the CPU). A model built
    here is then materialised from its meta build (its factory runs once), after the memory guard
    (:func:`vitprof.count.running.ensure_fits`). Any other failure is a UserError naming the input.
    """
    _check_arguments(device, mode, recognizer)
    work = workload_of(model, request, name=name, overrides=overrides, image_size=image_size,
                       batch_size=batch_size, num_classes=num_classes, frames=frames,
                       in_chans=in_chans, dtype=dtype, input_shape=input_shape, inputs=inputs)
    return _analyze(work, device, mode, deploy, formulas, recognizer)


def _analyze(
    work: Workload, device: str, mode: str, deploy: bool,
    formulas: Mapping[Any, Formula] | None, recognizer: str,
) -> Profile:
    """One analysis of ``work`` (see :func:`analyze`)."""
    built = deployed(_on_its_device(work, device), deploy)
    shape = built.inputs.shape
    train = mode == Mode.TRAIN
    run: Run | MetaFailure = first_on_meta(built.name, shape, lambda: count(
        built.module, built.inputs.example(Device.META), train=train, formulas=formulas
    ))
    run_device: str = Device.META
    fallback: str | None = None
    if isinstance(run, MetaFailure) or device != Device.META:
        run_device = device if device != Device.META else _fallback_device(built.module)
        failure = run if isinstance(run, MetaFailure) else None
        if failure is not None:
            fallback = failure.note(run_device)
        module = _real_module(built, run_device, run.footprint, failure)
        try:
            run = count(module, built.inputs.example(run_device), train=train,
                        formulas=formulas)
        except CountFailed as failed:
            raise run_failed(built.name, shape, run_device, failed.error) from None
    with collector_paused():  # a breakdown reads records and makes no cycles
        found = breakdown(run, built.module, recognizer, built.rules)
    return profile_of(built, run, found, run_device, mode=Mode(mode), fallback=fallback)


def profile_of(
    work: Workload, run: Run, found: Found, device: str, *, mode: Mode = Mode.INFERENCE,
    fallback: str | None = None,
) -> Profile:
    """The :class:`Profile` of ``found``, a breakdown of ``run`` (a count of ``work`` on
    ``device``). Its warnings: the workload's, the run's (parameters it changed in place), the
    convolutions' unread input (floors), the breakdown's, the ops without a formula and the
    failed self-checks, in that order."""
    checks = tuple(self_checks(found.ops, found.params, run.trace, found.origins))
    return Profile(
        model=work.name,
        input_shape=work.inputs.shape,
        device=device,
        torch_version=torch.__version__,
        recognizer=found.family,
        params=found.params,
        ops=found.ops,
        unsupported_ops=run.unsupported,
        fallback=fallback,
        warnings=work.warnings + run.warnings + floor_warnings(run.floors) + found.warnings
        + unsupported_warning(run.unsupported) + checks,
        mode=mode,
        input_source=work.input_source,
        self_checks=checks,
        inputs=work.inputs.records(),
    )


def _fallback_device(module: nn.Module) -> str:
    """Where a model that failed on meta runs: where its weights live, else the CPU."""
    return Device.CPU if on_meta(module) else _model_device(module)


def _real_module(
    built: Workload, device: str, footprint: Footprint, failure: MetaFailure | None
) -> nn.Module:
    """``built.module`` with real tensors on ``device`` (:func:`vitprof.count.running.on_device`); a
    caller's module without weights cannot run."""
    if on_meta(built.module) and not built.owned:
        reason = failure.reason if failure is not None else None
        raise UserError(f"{built.name} failed on meta ({reason}) and has no weights to run on "
                        f"{device}")
    return on_device(built.name, built.module, device, footprint)


def _on_its_device(work: Workload, device: str) -> Workload:
    """``work`` (:func:`vitprof.workload.make_workload`, built on meta); a caller's module must
    live on ``device`` unless that is meta."""
    if not work.owned and device != Device.META and _model_device(work.module) != device:
        raise UserError(f"the model lives on {_model_device(work.module)}; move it to {device} "
                        f"or use device meta")
    return work
