"""The fused optimizers' kernels, priced as the unfused steps they replace.

A fused optimizer (``torch.optim.AdamW(fused=True)``; the Hugging Face Trainer's default,
``adamw_torch_fused``) runs its whole update as one kernel, ``aten._fused_adamw_``, which no
formula of the registry prices. Each kernel here costs what the single-tensor (for-loop) step of
``torch.optim`` it replaces costs with vitprof's per-element costs (:data:`VECTOR_COSTS` and
:data:`ADDCMUL_COST`, the registry's own): the operations that step runs on each element of each
parameter, with the flags of the call that change them (weight decay, momentum, amsgrad,
maximize...). So a fused step counts what the ``foreach`` and for-loop steps count. Not in the
kernels: the step counters' increments (a ``_foreach_add_`` before the kernel, priced as such)
and the first step's momentum buffer (a copy, free). Nor is the unscaling a ``GradScaler`` leaves
to a fused kernel (``grad_scale``) counted: an unfused step does not do it either.
"""

from __future__ import annotations

from typing import Any

from vitprof.core.records import Cost
from vitprof.count.formulas import VECTOR_COSTS, Arguments, Formula, numel
from vitprof.count.formulas.forward import ADDCMUL_COST


def _addc(value: Any) -> int:
    """``addcmul_`` / ``addcdiv_`` per element, with its scaling by ``value`` unless 1."""
    return ADDCMUL_COST + int(value != 1)


def _gradient(inputs: Arguments) -> int:
    """Per element: ``grad = -grad`` with maximize."""
    return VECTOR_COSTS["neg"] if inputs["maximize"] else 0


def _adam(decoupled: bool) -> Formula:
    """``torch.optim.adam._single_tensor_adam`` per element: AdamW's weight decay
    (``decoupled``) scales the parameter, Adam's adds it to the gradient."""

    def formula(inputs: Arguments, out: Any) -> Cost:
        per_element = _gradient(inputs)
        if inputs["weight_decay"] != 0:  # param.mul_(1 - lr * wd) | grad.add(param, alpha=wd)
            per_element += VECTOR_COSTS["mul" if decoupled else "add"]
        per_element += VECTOR_COSTS["lerp"]  # exp_avg.lerp_(grad, 1 - beta1)
        # exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        per_element += VECTOR_COSTS["mul"] + _addc(1 - inputs["beta2"])
        if inputs["amsgrad"]:  # torch.maximum(max_exp_avg_sq, exp_avg_sq, out=...)
            per_element += VECTOR_COSTS["maximum"]
        # denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
        per_element += VECTOR_COSTS["sqrt"] + VECTOR_COSTS["div"] + VECTOR_COSTS["add"]
        per_element += ADDCMUL_COST + 1  # param.addcdiv_(exp_avg, denom, value=-step_size < 0)
        return _over_parameters(inputs, per_element)

    return formula


def _sgd(inputs: Arguments, out: Any) -> Cost:
    """``torch.optim.sgd._single_tensor_sgd`` per element."""
    per_element = _gradient(inputs)
    if inputs["weight_decay"] != 0:  # grad.add(param, alpha=weight_decay)
        per_element += VECTOR_COSTS["add"]
    if inputs["momentum"] != 0:
        if not inputs["is_first_step"]:  # buf.mul_(momentum).add_(grad, alpha=1 - dampening)
            per_element += VECTOR_COSTS["mul"] + VECTOR_COSTS["add"]
        if inputs["nesterov"]:  # grad.add(buf, alpha=momentum)
            per_element += VECTOR_COSTS["add"]
    per_element += VECTOR_COSTS["add"]  # param.add_(grad, alpha=-lr)
    return _over_parameters(inputs, per_element)


def _adagrad(inputs: Arguments, out: Any) -> Cost:
    """``torch.optim.adagrad._single_tensor_adagrad`` per element (dense gradients)."""
    per_element = _gradient(inputs)
    if inputs["weight_decay"] != 0:  # grad.add(param, alpha=weight_decay)
        per_element += VECTOR_COSTS["add"]
    per_element += _addc(1)  # state_sum.addcmul_(grad, grad, value=1)
    per_element += VECTOR_COSTS["sqrt"] + VECTOR_COSTS["add"]  # state_sum.sqrt().add_(eps)
    per_element += ADDCMUL_COST + 1  # param.addcdiv_(grad, std, value=-clr < 0)
    return _over_parameters(inputs, per_element)


def _over_parameters(inputs: Arguments, per_element: int) -> Cost:
    return Cost(vector_flops=per_element * sum(numel(p) for p in inputs["self"]))


FUSED_STEPS: dict[str, Formula] = {
    "_fused_adamw_": _adam(decoupled=True), "_fused_adam_": _adam(decoupled=False),
    "_fused_sgd_": _sgd, "_fused_adagrad_": _adagrad,
}
"""The formula of each fused optimizer kernel, by the name of its aten operation."""
