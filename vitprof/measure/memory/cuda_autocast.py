"""CUDA autocast's float32 policy, emulated under CPU autocast for a step on fake CPU tensors.

A ``target="cuda"`` step cannot run on fake CUDA tensors without a GPU: the forward can (fake
tensors say any device), but the backward cannot (the autograd engine's CUDA device thread asks
for a CUDA context), and ``torch.autocast("cuda")`` disables itself where CUDA is not
available. So the step runs on fake CPU tensors under ``torch.autocast("cpu")``, and
:func:`cuda_policy` gives CPU autocast the casts CUDA autocast makes and CPU autocast lacks, by
registering kernels for the ``AutocastCPU`` dispatch key of the ops below, for as long as the
context is entered (``aten/src/ATen/autocast_mode.cpp`` is the reference):

* :data:`FP32_OPS` (CUDA's ``fp32`` list: layer and group norm, the unary math functions,
  ``pow``, ``logsumexp``, ...): every floating-point tensor argument below float64 is cast to
  float32, and the op runs in float32 (CPU autocast leaves them in the input's precision);
* :data:`FP32_DTYPE_OPS` (CUDA's ``fp32_set_opt_dtype`` list: softmax, log_softmax, sum, prod,
  cumsum, cumprod): run with ``dtype=float32`` unless a dtype is given, when the input is a
  floating-point tensor below float64.

An op CPU autocast has a kernel for already (its own loss functions in float32, say) keeps it.
The casts are autocast's: made with the autocast key excluded, by ``Tensor.to``, so autograd
records them and an op saves its float32 copy, as on CUDA. The lower-precision lists (matmuls,
convolutions, attention) agree on both devices for the ops a ViT runs and stay CPU autocast's.
One difference remains: CUDA's float16 softmax converts inside the kernel (``half_to_float``)
where this one makes a float32 copy first, freed at once (a bfloat16 softmax copies on CUDA
too).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

KEY = "AutocastCPU"
FP32_OPS = (
    "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p",
    "reciprocal", "rsqrt", "sinh", "tan", "pow.Tensor_Scalar", "pow.Tensor_Tensor", "pow.Scalar",
    "softplus", "layer_norm", "native_layer_norm", "group_norm", "rms_norm", "frobenius_norm.dim",
    "nuclear_norm", "nuclear_norm.dim", "cosine_similarity", "dist", "pdist", "cdist", "renorm",
    "logsumexp",
)
FP32_DTYPE_OPS = (
    "softmax.int", "log_softmax.int", "sum", "sum.dim_IntList", "prod", "prod.dim_int", "cumsum",
    "cumprod", "linalg_vector_norm", "linalg_matrix_norm",
)


def _op(name: str) -> Any:
    """The aten overload ``name`` (``"softmax.int"``; no dot: the default overload), or None
    where this torch has no such op."""
    packet, _, overload = name.partition(".")
    try:
        return getattr(getattr(torch.ops.aten, packet), overload or "default")
    except AttributeError:
        return None


def _eligible(value: Any) -> bool:
    """A tensor autocast casts: floating point, below float64."""
    return isinstance(value, torch.Tensor) and value.is_floating_point() \
        and value.dtype != torch.float64


def _no_autocast() -> Any:
    """CPU autocast off, as autocast's own kernels turn it off around the op they call."""
    return torch._C._ExcludeDispatchKeyGuard(
        torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCPU))


def _fp32(op: Any) -> Callable[..., Any]:
    """The kernel of a float32 op: its floating arguments cast to float32."""
    def kernel(*args: Any, **kwargs: Any) -> Any:
        with _no_autocast():
            return op(*_to(args, torch.float32),
                      **{k: _to(v, torch.float32) for k, v in kwargs.items()})

    return kernel


def _fp32_dtype(op: Any) -> Callable[..., Any]:
    """The kernel of an op run with ``dtype=float32`` unless a dtype is given."""
    names = [a.name for a in op._schema.arguments]
    position = names.index("dtype")
    keyword = op._schema.arguments[position].kwarg_only

    def kernel(*args: Any, **kwargs: Any) -> Any:
        with _no_autocast():
            given = kwargs.get("dtype") if keyword or len(args) <= position else args[position]
            if given is not None or not (args and _eligible(args[0])):
                return op(*args, **kwargs)
            if keyword or len(args) <= position:
                return op(*args, **{**kwargs, "dtype": torch.float32})
            return op(*args[:position], torch.float32, *args[position + 1:], **kwargs)

    return kernel


def _to(value: Any, dtype: torch.dtype) -> Any:
    if _eligible(value):
        return value.to(dtype)
    if isinstance(value, list | tuple):
        return type(value)(_to(v, dtype) for v in value)
    return value


def lower_precision_call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` as autocast runs an op of its lower-precision list (both
    devices list ``scaled_dot_product_attention``): under CPU autocast, its floating arguments
    cast to the autocast dtype and ``fn`` run with autocast off, so that what it runs inside
    (the math attention's softmax) is not cast again; without autocast, as it is."""
    if not torch.is_autocast_enabled("cpu"):
        return fn(*args, **kwargs)
    dtype = torch.get_autocast_dtype("cpu")
    with _no_autocast():
        return fn(*_to(args, dtype), **{k: _to(v, dtype) for k, v in kwargs.items()})


def _has_cpu_kernel(name: str) -> bool:
    packet, _, overload = name.partition(".")
    qualified = f"aten::{packet}" + (f".{overload}" if overload else "")
    return torch._C._dispatch_has_kernel_for_dispatch_key(qualified, KEY)


@contextmanager
def cuda_policy() -> Iterator[None]:
    """While entered, CPU autocast casts as CUDA autocast does (see the module)."""
    library = torch.library.Library("aten", "IMPL")
    try:
        for names, make in ((FP32_OPS, _fp32), (FP32_DTYPE_OPS, _fp32_dtype)):
            for name in names:
                op = _op(name)
                if op is not None and not _has_cpu_kernel(name):
                    library.impl(name, make(op), KEY)
        yield
    finally:
        library._destroy()
