"""``analyze()``: build or take a model, run it once under the counter, return a Profile.

The default device is ``meta``: parameters and activations are meta tensors, so nothing is
allocated and nothing is computed. A model that already has weights is run on meta through
``torch.func.functional_call`` with meta stand-ins, which leaves the model untouched. A model that
cannot run on meta (data-dependent shapes) is counted again on real CPU tensors, and the
Profile's ``fallback`` says why.

Every analysis runs the model in eval mode and restores its mode afterwards; the grad mode is the
caller's. Hooks are removed even when the model fails.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn
from torch.func import functional_call

from vitprof.counter import OpCounter
from vitprof.deploy import deployed
from vitprof.errors import UserError
from vitprof.families import ComponentMap, Rule, recognize
from vitprof.profiling.training import MODES, training_step
from vitprof.records import OpRecord, ParamRecord
from vitprof.result import Profile
from vitprof.zoo import BuiltModel, build, infer_image_size, infer_in_chans

DEVICES = ("meta", "cpu", "cuda")


@dataclass(frozen=True)
class _Run:
    ops: list[OpRecord]
    unsupported: dict[str, int]


def _on_meta(model: nn.Module) -> bool:
    tensors = [*model.parameters(), *model.buffers()]
    return bool(tensors) and all(t.device.type == "meta" for t in tensors)


def _model_device(model: nn.Module) -> str:
    for tensor in [*model.parameters(), *model.buffers()]:
        return tensor.device.type
    return "cpu"


def count_ops(
    model: nn.Module, example: torch.Tensor, mapping: ComponentMap, mode: str = "inference"
) -> _Run:
    """Run ``model(example)`` once under the counter; meta input means meta stand-ins.

    ``mode="train"`` runs the forward in train mode and the backward to every parameter under
    the same counter (:func:`vitprof.profiling.training.training_step`).
    """
    stand_ins: dict[str, torch.Tensor] | None = None
    params: dict[str, torch.Tensor] = dict(model.named_parameters())
    if example.device.type == "meta" and not _on_meta(model):
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
    finally:
        model.train(was_training)
    return _Run(counter.records(), dict(counter.unsupported))


def _param_records(model: nn.Module, mapping: ComponentMap) -> tuple[ParamRecord, ...]:
    return tuple(
        ParamRecord(name, p.numel(), mapping.params[name], mapping.block_of(name), tuple(p.shape))
        for name, p in model.named_parameters()
    )


def _one_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}"


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

    ``model`` is an ``nn.Module`` or any name :func:`vitprof.zoo.build` accepts. ``overrides``
    are ``(regex, component)`` pairs that win over the recognizer. ``mode="train"`` counts a
    training step, forward and backward; each op record says its ``phase``. ``deploy=True``
    counts the deploy form (:func:`vitprof.deploy.deploy_form`), a copy: BatchNorm folded.
    """
    if mode not in MODES:
        raise UserError(f"unknown mode '{mode}'; choose from {', '.join(MODES)}")
    if device not in DEVICES:
        raise UserError(f"unknown device '{device}'; choose from {', '.join(DEVICES)}")
    if batch_size < 1:
        raise UserError(f"batch size must be at least 1, got {batch_size}")
    if device == "cuda" and not torch.cuda.is_available():
        raise UserError("device cuda requested but no CUDA device is available")
    built = deployed(_prepare(model, image_size, num_classes, device, name), deploy)
    rules = [*(built.entry.overrides if built.entry else ()), *overrides]
    mapping = recognize(built.module, rules)
    shape = (batch_size, built.in_chans, built.image_size, built.image_size)
    run_device = "meta" if device == "meta" else device
    fallback = None
    try:
        run = count_ops(built.module, torch.zeros(shape, device=run_device), mapping, mode)
    except UserError:
        raise
    except Exception as error:
        if device != "meta":
            message = f"running {built.name} on {device} failed: {_one_line(error)}"
            raise UserError(message) from None
        reason = _one_line(error)
        fallback = f"meta device failed ({reason}); counted on cpu with real tensors"
        # a rebuilt named model needs its deploy form again; a module is reused as it was
        built = deployed(_cpu_copy(built, model, image_size, num_classes, reason),
                         deploy and isinstance(model, str))
        mapping = recognize(built.module, rules)
        run_device = "cpu"
        try:
            run = count_ops(built.module, torch.zeros(shape), mapping, mode)
        except Exception as cpu_error:
            raise UserError(f"running {built.name} failed: {_one_line(cpu_error)}") from None
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
        warnings=mapping.warnings + _unsupported_warning(run.unsupported),
        mode=mode,
    )


def _unsupported_warning(unsupported: dict[str, int]) -> tuple[str, ...]:
    if not unsupported:
        return ()
    listed = ", ".join(f"{op} x{n}" for op, n in sorted(unsupported.items()))
    return (f"ops without a formula, not counted: {listed}",)


def _prepare(
    model: nn.Module | str, image_size: int | None, classes: int | None, device: str,
    name: str | None,
) -> BuiltModel:
    if isinstance(model, str):
        build_device = "meta" if device == "meta" else device
        return build(model, image_size=image_size, num_classes=classes, device=build_device)
    if not isinstance(model, nn.Module):
        raise UserError(f"expected an nn.Module or a model name, got {type(model).__name__}")
    if device != "meta" and _model_device(model) != device:
        raise UserError(
            f"the model lives on {_model_device(model)}; move it to {device} or use device meta"
        )
    size = image_size or infer_image_size(model) or 224
    return BuiltModel(name or type(model).__name__, model, size, infer_in_chans(model), None)


def _cpu_copy(
    built: BuiltModel, model: nn.Module | str, image_size: int | None, classes: int | None,
    reason: str,
) -> BuiltModel:
    if isinstance(model, str):
        return build(model, image_size=image_size, num_classes=classes, device="cpu")
    if _on_meta(built.module):
        raise UserError(
            f"{built.name} failed on meta ({reason}) and has no weights to run on cpu"
        )
    return built
