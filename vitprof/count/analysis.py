"""``analyze()``: build or take a model, run it once under the counter, return a Profile.

The default device is ``meta``: parameters and activations are meta tensors, so nothing is
allocated and nothing is computed. A model that already has weights is run on meta through
``torch.func.functional_call`` with meta stand-ins, which leaves the model untouched. A model that
cannot run on meta for a reason of the meta device (data-dependent shapes, ops without a meta
kernel) is counted again on real CPU tensors, and the Profile's ``fallback`` says why; any other
failure is reported at once (:mod:`vitprof.count.running`).

Every analysis runs the model in eval mode and restores its mode afterwards; the grad mode is the
caller's. Hooks are removed even when the model fails.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn
from torch.func import functional_call

from vitprof.core.choices import MODES
from vitprof.core.errors import UserError
from vitprof.core.records import OpRecord, ParamRecord
from vitprof.count.counter import OpCounter
from vitprof.count.families import ComponentMap, Rule, recognize
from vitprof.count.result import Profile
from vitprof.count.running import (
    CountFailed,
    check_input,
    meta_caused,
    on_device,
    on_meta,
    one_line,
    run_failed,
    unsupported_warning,
)
from vitprof.count.training import training_step
from vitprof.models.deploy import deployed
from vitprof.models.zoo import BuiltModel, build, infer_image_size, infer_in_chans

DEVICES = ("meta", "cpu", "cuda")


@dataclass(frozen=True)
class _Run:
    ops: list[OpRecord]
    unsupported: dict[str, int]


def _model_device(model: nn.Module) -> str:
    for tensor in [*model.parameters(), *model.buffers()]:
        return tensor.device.type
    return "cpu"


def count_ops(
    model: nn.Module, example: torch.Tensor, mapping: ComponentMap, mode: str = "inference"
) -> _Run:
    """Run ``model(example)`` once under the counter; meta input means meta stand-ins.

    ``mode="train"`` runs the forward in train mode and the backward to every parameter under
    the same counter (:func:`vitprof.count.training.training_step`). A failing model raises
    :class:`~vitprof.count.running.CountFailed` with its error and the bytes written until then.
    """
    stand_ins: dict[str, torch.Tensor] | None = None
    params: dict[str, torch.Tensor] = dict(model.named_parameters())
    if example.device.type == "meta" and not on_meta(model):
        stand_ins = {
            name: torch.empty_like(t, device="meta").requires_grad_(t.requires_grad)
            for name, t in [*model.named_parameters(), *model.named_buffers()]
        }
        params = {name: stand_ins[name] for name in params}
    counter = OpCounter(model, mapping, params)

    def forward() -> object:
        if stand_ins is not None:
            return functional_call(model, stand_ins, (example,))
        return model(example)

    was_training = model.training
    model.train(mode == "train")
    try:
        with counter.running():
            if mode == "train":
                training_step(counter, forward, params.values())
            else:
                forward()
    except UserError:
        raise
    except Exception as error:
        raise CountFailed(error, counter.bytes_written()) from error
    finally:
        model.train(was_training)
    return _Run(counter.records(), dict(counter.unsupported))


def _param_records(model: nn.Module, mapping: ComponentMap) -> tuple[ParamRecord, ...]:
    return tuple(
        ParamRecord(name, p.numel(), mapping.params[name], mapping.block_of(name), tuple(p.shape))
        for name, p in model.named_parameters()
    )


def _check_arguments(
    image_size: object, batch_size: object, num_classes: object, device: str, mode: str
) -> None:
    if mode not in MODES:
        raise UserError(f"unknown mode '{mode}'; choose from {', '.join(MODES)}")
    if device not in DEVICES:
        raise UserError(f"unknown device '{device}'; choose from {', '.join(DEVICES)}")
    check_input(image_size, batch_size, num_classes)
    if device == "cuda" and not torch.cuda.is_available():
        raise UserError("device cuda requested but no CUDA device is available")


def analyze(
    model: nn.Module | str,
    *,
    image_size: int | None = None,
    batch_size: int = 1,
    num_classes: int | None = None,
    device: str = "meta",
    overrides: Sequence[Rule] = (),
    name: str | None = None,
    mode: str = "inference",
    deploy: bool = False,
) -> Profile:
    """Count params, MACs and vector FLOPs of ``model`` per component and per block.

    ``model`` is an ``nn.Module`` or any name :func:`vitprof.models.zoo.build` accepts.
    ``image_size`` and ``batch_size`` are positive ints (square images only); ``num_classes=0``
    builds the model without a classification head (timm's convention). ``overrides`` are ``(regex,
    component)`` pairs that win over the recognizer. ``mode="train"`` counts a training step,
    forward and backward; each op record says its ``phase``. ``deploy=True`` counts the deploy
    form (:func:`vitprof.models.deploy.deploy_form`), a copy: re-parameterised, BatchNorm folded.

    Every model is counted on meta first. It is then run with real tensors when ``device`` is
    cpu or cuda, or when the meta run failed for a reason of the meta
    device (:func:`vitprof.count.running.meta_caused`; the fallback, on the CPU). A model built
    here is then materialised from its meta build (its factory runs once), after the memory guard
    (:func:`vitprof.count.running.ensure_fits`). Any other failure is a UserError naming the input.
    """
    _check_arguments(image_size, batch_size, num_classes, device, mode)
    built = deployed(_prepare(model, image_size, num_classes, device, name), deploy)
    rules = [*(built.entry.overrides if built.entry else ()), *overrides]
    mapping = recognize(built.module, rules)
    shape = (batch_size, built.in_chans, built.image_size, built.image_size)
    fallback = reason = None
    try:
        run: _Run | None = count_ops(built.module, torch.zeros(shape, device="meta"), mapping,
                                     mode)
        written = sum(op.bytes_written for op in run.ops)
    except CountFailed as failed:
        if not meta_caused(failed.error):
            raise run_failed(built.name, shape, "meta", failed.error) from None
        run, written, reason = None, failed.bytes_written, one_line(failed.error)
    run_device = "meta"
    if run is None or device != "meta":
        run_device = device if device != "meta" else _fallback_device(built.module)
        if reason is not None:
            fallback = f"meta device failed ({reason}); counted on {run_device} with real tensors"
        module = _real_module(built, isinstance(model, str), run_device, written, reason)
        try:
            run = count_ops(module, torch.zeros(shape, device=run_device), mapping, mode)
        except CountFailed as failed:
            raise run_failed(built.name, shape, run_device, failed.error) from None
    return Profile(
        model=built.name,
        input_shape=shape,
        device=run_device,
        torch_version=torch.__version__,
        family=mapping.family,
        params=_param_records(built.module, mapping),
        ops=tuple(run.ops),
        unsupported_ops=run.unsupported,
        fallback=fallback,
        warnings=built.warnings + mapping.warnings + unsupported_warning(run.unsupported),
        mode=mode,
    )


def _fallback_device(module: nn.Module) -> str:
    """Where a model that failed on meta runs: where its weights live, else the CPU."""
    return "cpu" if on_meta(module) else _model_device(module)


def _real_module(
    built: BuiltModel, owned: bool, device: str, activations: int, reason: str | None
) -> nn.Module:
    """``built.module`` with real tensors on ``device`` (:func:`vitprof.count.running.on_device`); a
    caller's module without weights cannot run."""
    if on_meta(built.module) and not owned:
        raise UserError(f"{built.name} failed on meta ({reason}) and has no weights to run on "
                        f"{device}")
    return on_device(built.name, built.module, device, activations)


def _prepare(
    model: nn.Module | str, image_size: int | None, classes: int | None, device: str,
    name: str | None,
) -> BuiltModel:
    if isinstance(model, str):
        return build(model, image_size=image_size, num_classes=classes, device="meta")
    if not isinstance(model, nn.Module):
        raise UserError(f"expected an nn.Module or a model name, got {type(model).__name__}")
    if classes is not None:
        raise UserError("num_classes applies to a model built by name; this nn.Module is "
                        "already built")
    if device != "meta" and _model_device(model) != device:
        raise UserError(
            f"the model lives on {_model_device(model)}; move it to {device} or use device meta"
        )
    size = image_size if image_size is not None else infer_image_size(model) or 224
    return BuiltModel(name or type(model).__name__, model, size, infer_in_chans(model), None)
