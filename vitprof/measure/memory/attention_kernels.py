"""The kernel ``scaled_dot_product_attention`` runs in a predicted step, chosen or named.

``vitprof.memory``'s ``attention`` setting is a path (``math``, ``efficient``, ``flash``) or
``auto`` (the default): the kernel torch would dispatch to on the target for each call's dtype,
shapes, mask and dropout. :class:`AttentionChoice` stands in for every SDPA call of the step
(the counter routes each call to it, at any depth: :mod:`vitprof.count.counter`) and keeps what
it chose and why.

What a path keeps for the backward: the math path (``_scaled_dot_product_attention_math``, a
decomposition) the softmax probabilities, batch x heads x L x S; the fused kernels the output
and a float32 log-sum-exp, O(L) per head. The CPU has one fused kernel,
``_scaled_dot_product_flash_attention_for_cpu``, which both fused paths run there.

``auto``'s rules, per call:

* **cpu** (torch 2.14's ``sdp_utils_cpp``, ``use_flash_attention_cpp``; measured: the tests hold
  :func:`cpu_rule` to ``torch._fused_sdp_choice`` on real CPU tensors): the fused kernel where
  flash SDP is enabled (``torch.backends.cuda.flash_sdp_enabled()``, which
  ``torch.nn.attention.sdpa_kernel`` sets), the dtype is float32, float64, bfloat16 or float16,
  the dropout is 0, query, key and value have one head dim, each has a last-dim stride of 1 and
  no sequence is empty; a mask, causal or not, is taken. The math path otherwise.
* **cuda** (modelled, not measured: torch's ``sdp_utils.cpp`` for sm80 and later, cuDNN's
  attention left out): flash for float16 or bfloat16 with one head dim of at most 256 and no
  mask; else the memory-efficient kernel for float32, float16 or bfloat16 with equal query and
  key head dims and as many key heads as query heads; the math path last.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from vitprof.core.vocab import AttentionPath, MemoryTarget
from vitprof.measure.memory.spelling import SettingError
from vitprof.workload import dtype_name

NO_CALL = "math (explicit softmax attention, no SDPA call)"  # auto, where no SDPA ran
CPU_FUSED_DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16)
CUDA_FLASH_DTYPES = (torch.float16, torch.bfloat16)
CUDA_EFFICIENT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
CUDA_FLASH_HEAD_DIM = 256  # the largest head dim torch's CUDA flash kernel takes

Kernel = Callable[..., Any]


def _math(q: Any, k: Any, v: Any, attn_mask: Any = None, dropout_p: float = 0.0,
          is_causal: bool = False, scale: Any = None, enable_gqa: bool = False) -> Any:
    return torch.ops.aten._scaled_dot_product_attention_math(
        q, k, v, attn_mask, dropout_p, is_causal, None, scale=scale, enable_gqa=enable_gqa)[0]


def _cpu_fused(q: Any, k: Any, v: Any, attn_mask: Any = None, dropout_p: float = 0.0,
               is_causal: bool = False, scale: Any = None, enable_gqa: bool = False) -> Any:
    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
        q, k, v, dropout_p, is_causal, attn_mask=attn_mask, scale=scale)[0]


def _cuda_efficient(q: Any, k: Any, v: Any, attn_mask: Any = None, dropout_p: float = 0.0,
                    is_causal: bool = False, scale: Any = None, enable_gqa: bool = False) -> Any:
    keep = q.requires_grad or k.requires_grad or v.requires_grad
    return torch.ops.aten._scaled_dot_product_efficient_attention(
        q, k, v, attn_mask, keep, dropout_p, is_causal, scale=scale)[0]


def _cuda_flash(q: Any, k: Any, v: Any, attn_mask: Any = None, dropout_p: float = 0.0,
                is_causal: bool = False, scale: Any = None, enable_gqa: bool = False) -> Any:
    if attn_mask is not None:
        raise SettingError(lambda s: "the flash attention kernel takes no attention mask: this "
                           f"model needs {s.setting('attention', 'efficient')} or "
                           f"{s.setting('attention', 'math')}")
    return torch.ops.aten._scaled_dot_product_flash_attention(
        q, k, v, dropout_p, is_causal, scale=scale)[0]


# (target, path) -> the kernel F.scaled_dot_product_attention runs: the CPU has one fused
# kernel (a flash attention) for both fused paths
KERNELS: dict[tuple[str, str], Kernel] = {
    (MemoryTarget.CPU, AttentionPath.MATH): _math,
    (MemoryTarget.CPU, AttentionPath.EFFICIENT): _cpu_fused,
    (MemoryTarget.CPU, AttentionPath.FLASH): _cpu_fused,
    (MemoryTarget.CUDA, AttentionPath.MATH): _math,
    (MemoryTarget.CUDA, AttentionPath.EFFICIENT): _cuda_efficient,
    (MemoryTarget.CUDA, AttentionPath.FLASH): _cuda_flash,
}


def cpu_rule(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: Any = None,
             dropout_p: float = 0.0) -> tuple[AttentionPath, str]:
    """The path torch's CPU dispatch takes for this call, and why (see the module)."""
    dtype = dtype_name(q.dtype)
    if not torch.backends.cuda.flash_sdp_enabled():
        return AttentionPath.MATH, "flash SDP is disabled (torch.backends / sdpa_kernel)"
    if q.dtype not in CPU_FUSED_DTYPES:
        return AttentionPath.MATH, f"the CPU's fused kernel takes no {dtype}"
    if dropout_p > 0:
        return AttentionPath.MATH, f"the CPU's fused kernel takes no dropout (p={dropout_p:g})"
    if not q.shape[-1] == k.shape[-1] == v.shape[-1]:
        return AttentionPath.MATH, ("the CPU's fused kernel needs one head dim for query, key "
                                    "and value")
    if any(t.stride(-1) != 1 for t in (q, k, v)):
        return AttentionPath.MATH, "the CPU's fused kernel needs a last-dim stride of 1"
    if 0 in (q.shape[-2], k.shape[-2]):
        return AttentionPath.MATH, "an empty sequence"
    mask = "no mask" if attn_mask is None else "a mask"
    return AttentionPath.FLASH, f"the CPU's fused kernel applies to {dtype}, {mask}"


def cuda_rule(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: Any = None
              ) -> tuple[AttentionPath, str]:
    """The path torch's CUDA dispatch takes for this call on sm80 or later, and why (see the
    module; modelled, not measured)."""
    dtype, dim = dtype_name(q.dtype), q.shape[-1]
    same = q.shape[-1] == k.shape[-1] == v.shape[-1]
    if q.dtype in CUDA_FLASH_DTYPES and same and dim <= CUDA_FLASH_HEAD_DIM \
            and attn_mask is None:
        return AttentionPath.FLASH, f"{dtype}, head dim {dim} <= {CUDA_FLASH_HEAD_DIM}, no mask"
    if q.dtype not in CUDA_FLASH_DTYPES:
        why_not_flash = f"flash takes float16 or bfloat16, not {dtype}"
    elif attn_mask is not None:
        why_not_flash = "flash takes no mask"
    else:
        why_not_flash = f"flash takes one head dim of at most {CUDA_FLASH_HEAD_DIM}"
    if q.dtype in CUDA_EFFICIENT_DTYPES and q.shape[-1] == k.shape[-1] \
            and q.shape[:-2] == k.shape[:-2]:
        return AttentionPath.EFFICIENT, why_not_flash
    return AttentionPath.MATH, f"{why_not_flash}, and the efficient kernel does not apply"


class AttentionChoice:
    """The stand-in for ``scaled_dot_product_attention`` in a step on ``target``: each call runs
    the kernel of ``path`` (or, for ``auto``, of the rule of the target), and :attr:`chosen`
    keeps each path that ran, in order, with why (``""`` where the user named it)."""

    def __init__(self, target: str, path: str) -> None:
        self.target = target
        self.path = path
        self.chosen: dict[str, str] = {}

    def __call__(self, q: Any, k: Any, v: Any, attn_mask: Any = None, dropout_p: float = 0.0,
                 is_causal: bool = False, scale: Any = None, enable_gqa: bool = False) -> Any:
        if self.path != AttentionPath.AUTO:
            path, why = self.path, ""
        elif self.target == MemoryTarget.CPU:
            path, why = cpu_rule(q, k, v, attn_mask, dropout_p)
        else:
            path, why = cuda_rule(q, k, v, attn_mask)
        self.chosen.setdefault(path, why)
        return KERNELS[self.target, path](q, k, v, attn_mask, dropout_p, is_causal, scale,
                                          enable_gqa)

    @property
    def ran(self) -> bool:
        """Whether any SDPA call ran."""
        return bool(self.chosen)

    def describe(self) -> str:
        """The attention setting as reports print it: the path named, or what ``auto`` chose
        and why (``flash (auto: the CPU's fused kernel applies to float32, no mask)``; several
        paths joined by ``; ``), or :data:`NO_CALL` where ``auto`` had no call to choose for."""
        if self.path != AttentionPath.AUTO:
            return self.path
        if not self.chosen:
            return NO_CALL
        return "; ".join(f"{path} (auto: {why})" for path, why in self.chosen.items())

    def unused_warning(self) -> str | None:
        """One line where a path was named and no SDPA call ran for it to act on."""
        if self.path == AttentionPath.AUTO or self.ran:
            return None
        return (f"attention {self.path} changed nothing: this model calls no "
                "scaled_dot_product_attention (it computes its attention itself, e.g. "
                "softmax(QK^T)V), so its attention runs as written")
