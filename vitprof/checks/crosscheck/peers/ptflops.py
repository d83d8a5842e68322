"""``ptflops-pytorch`` and ``ptflops-aten``: ptflops's ``get_model_complexity_info`` (MACs,
"GMac") with its ``pytorch`` backend (module hooks and patched functions) or its ``aten``
backend (a dispatch mode), in eval mode with the grad mode it is given.

ptflops calls ``model(x)`` or, when its input constructor returns a dict, ``model(**inputs)``:
one positional tensor is passed as it is, any other inputs as keywords, positional ones bound
to their parameters' names; a forward whose inputs cannot all be named (``*args``,
positional-only parameters) is one ptflops cannot take, and its rows say so.

Rules, ptflops 0.7.5:

* ``aten`` backend (``ptflops/aten_ops.py``): ``mm``, ``matmul``, ``bmm`` count products;
  ``addmm`` and ``convolution`` add their bias elements as MACs; any other kernel counts 0
  (a :class:`~vitprof.checks.crosscheck.harness.KernelLog` below it notes which ran).
* ``pytorch`` backend (``ptflops/pytorch_ops.py``, ``pytorch_engine.py``): forward hooks on
  modules whose exact type it maps; a hooked module's count replaces its children's
  (``accumulate_flops`` does not descend into it). Linear and convolution: products plus bias
  elements; LayerNorm / BatchNorm / GroupNorm: input elements (x2 with a true ``affine``
  attribute, which LayerNorm lacks); GELU: output elements; ``nn.MultiheadAttention``: products
  plus query scaling, in-projection bias, softmax (L x S per head) and out-projection bias;
  timm's ``Attention``: QK^T, AV, query scaling and softmax. Hook counts are divided by the
  batch size its batch counter reads (the length of the first positional input, 1 when the
  model is called with keywords only); the patched functions (``F.gelu``, ``F.softmax``,
  ``torch.bmm``, ...) add their counts undivided, and ``nn.GELU`` calls the patched ``F.gelu``.
"""

from __future__ import annotations

import inspect
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from typing import Any

import torch
from torch import nn

from vitprof.checks.crosscheck.causes import (
    Cause,
    call_kernels,
    elements_normed,
    fused_modules,
    uncounted_causes,
    under,
    vitprof_macs_for,
)
from vitprof.checks.crosscheck.harness import (
    CannotTake,
    Hooked,
    PatchRun,
    not_installed,
    patch_run,
)
from vitprof.checks.crosscheck.subject import Peer, patch_peer
from vitprof.core.records import OpKind, OpRecord
from vitprof.count.formulas import GELU_COST, SOFTMAX_COST
from vitprof.count.result import Profile
from vitprof.count.session import Inputs

RANK = 50
UNIT = "MACs (ptflops GMac)"


def ptflops_batch(model: nn.Module, inputs: Inputs) -> Any:
    """What ptflops's input constructor returns for ``inputs``: the one positional tensor, or
    every input as a keyword; a :class:`CannotTake` when the forward cannot take them so."""
    args, kwargs = inputs
    if len(args) == 1 and not kwargs and isinstance(args[0], torch.Tensor):
        return args[0]
    try:
        bound = inspect.signature(model.forward).bind(*args, **kwargs)
    except (TypeError, ValueError) as error:
        raise CannotTake(f"ptflops calls model(x) or model(**inputs): {error}") from None
    named: dict[str, Any] = {}
    for name, value in bound.arguments.items():
        kind = bound.signature.parameters[name].kind
        if kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.POSITIONAL_ONLY):
            raise CannotTake(f"ptflops calls model(x) or model(**inputs), and this forward "
                             f"takes {name} positionally only")
        named.update(value if kind == inspect.Parameter.VAR_KEYWORD else {name: value})
    return named


def run_ptflops(
    model: nn.Module, inputs: Inputs, backend: str = "pytorch", grad: bool = True
) -> PatchRun:
    """ptflops ``get_model_complexity_info(model, shape, backend=...)`` on ``inputs``."""
    try:
        from ptflops import get_model_complexity_info
        from ptflops.aten_ops import ATEN_OPS_MAPPING
        from ptflops.pytorch_ops import MODULES_MAPPING
    except ImportError:
        raise not_installed("ptflops", "peers") from None
    batch = ptflops_batch(model, inputs)
    first = next(v for v in [*inputs[0], *inputs[1].values()] if isinstance(v, torch.Tensor))
    hooked: Hooked = {} if backend == "aten" else {
        path: [] for path, module in model.named_modules() if type(module) in MODULES_MAPPING
    }

    def count() -> tuple[Any, Any]:
        return get_model_complexity_info(
            model, tuple(first.shape[1:]), print_per_layer_stat=False, as_strings=False,
            input_constructor=lambda _: batch, backend=backend,
        )

    registry = ATEN_OPS_MAPPING if backend == "aten" else frozenset()
    run = patch_run(model, grad, count, registry, hooked)
    # its batch counter reads the first positional input; called with keywords only, it has 1
    return replace(run, batch=len(batch) if isinstance(batch, torch.Tensor) else 1)


SOFTMAX_OPS = frozenset({"aten._softmax", "aten._safe_softmax"})


def ptflops_aten_causes(profile: Profile, model: nn.Module, run: PatchRun) -> list[Cause]:
    """ptflops's aten backend: kernels without a formula, and bias elements counted as MACs."""
    causes = uncounted_causes(profile, run.kernels, "has no formula for")
    fused = fused_modules(run.kernels)
    bias = sum(r.vector_flops for r in profile.ops
               if r.op in ("aten.addmm", "aten.convolution")
               and not any(under(r.module, f) for f in fused))
    causes.append(Cause("counts the bias elements of addmm and convolution as MACs", bias))
    return [c for c in causes if c.macs]


def _roots(hooked: Sequence[str]) -> list[str]:
    """Hooked modules with no hooked ancestor: the ones whose counts ptflops adds up."""
    return [p for p in hooked if not any(q != p and under(p, q) for q in hooked)]


def _own(profile: Profile, path: str) -> list[OpRecord]:
    return [r for r in profile.ops if r.module == path]


def _hook_extra(profile: Profile, module: nn.Module, path: str, calls: list) -> tuple[str, int]:
    """(kind, amount) a ptflops module hook adds beyond vitprof's MACs of that module.

    Only modules of a type ptflops maps reach here; the one mapped type with ``head_dim`` and
    ``num_heads`` is timm's ``Attention``. A mapped type with no rule here (ReLU, pooling)
    adds 0 and leaves its count in the residual.
    """
    own = _own(profile, path)
    if isinstance(module, nn.Linear):
        bias = sum(r.macs for r in own) // module.in_features if module.bias is not None else 0
        return "Linear bias elements (tokens x out_features)", bias
    if isinstance(module, nn.modules.conv._ConvNd):
        per_output = module.in_channels // module.groups * math.prod(module.kernel_size)
        bias = sum(r.macs for r in own) // per_output if module.bias is not None else 0
        return "convolution bias elements", bias
    if isinstance(module, nn.LayerNorm | nn.GroupNorm | nn.modules.batchnorm._BatchNorm):
        elements = sum(elements_normed(r, module) for r in own if r.kind is OpKind.NORM)
        factor = 2 if getattr(module, "affine", False) else 1
        return f"{type(module).__name__} input elements x{factor}", elements * factor
    if isinstance(module, nn.GELU):
        return "nn.GELU output elements", _gelu_elements(own)
    if isinstance(module, nn.MultiheadAttention):
        return ("nn.MultiheadAttention query scaling, in-projection bias, softmax and "
                "out-projection bias", sum(_mha_extra(module, shapes) for shapes in calls))
    if hasattr(module, "head_dim") and hasattr(module, "num_heads"):
        return (f"{type(module).__name__} (timm) query scaling and softmax",
                sum(_timm_attention_extra(module, shapes) for shapes in calls))
    return f"{type(module).__name__} (no rule here)", 0


def _gelu_elements(records: Sequence[OpRecord]) -> int:
    return sum(r.vector_flops for r in records if r.op == "aten.gelu") // GELU_COST


def _called_elements(
    profile: Profile, run: PatchRun, call: str, ops: frozenset[str], cost: int
) -> int:
    """Elements of vitprof's ``ops`` records (vector FLOPs over ``cost``) in the modules that
    made the logged ``call``: what a patched element-wise function counts."""
    callers = {module for name, module in run.calls if name == call}
    return sum(r.vector_flops for r in profile.ops if r.op in ops and r.module in callers) // cost


def _mha_extra(module: nn.MultiheadAttention, shapes: tuple[tuple[int, ...], ...]) -> int:
    q, k = shapes[0], shapes[1]
    batch_dim, length_dim = (0, 1) if module.batch_first else (1, 0)
    batch, embed, heads = q[batch_dim], module.embed_dim, module.num_heads
    queries, keys = q[length_dim], k[length_dim]
    bias = (queries + 2 * keys) * embed if module.in_proj_bias is not None else 0
    return batch * (queries * embed + bias + heads * queries * keys + queries * embed)


def _timm_attention_extra(module: Any, shapes: tuple[tuple[int, ...], ...]) -> int:
    batch, tokens, _ = shapes[0]
    heads = int(module.num_heads)
    return batch * (tokens * int(module.head_dim) * heads + heads * tokens * tokens)


def ptflops_pytorch_causes(profile: Profile, model: nn.Module, run: PatchRun) -> list[Cause]:
    """ptflops's pytorch backend, rule by rule, against vitprof's records."""
    roots = _roots(list(run.hooked))

    def hooked(module: str) -> bool:
        return any(under(module, p) for p in roots)

    hidden = sum(r.macs for r in profile.ops
                 if any(under(r.module, p) and r.module != p for p in roots))
    unhooked = sum(r.macs for r in profile.ops if not hooked(r.module))
    bmm = {True: 0, False: 0}  # vitprof's MACs of torch.bmm calls, inside and outside hooks
    for op, module in call_kernels(run, "torch.bmm"):
        bmm[hooked(module)] += vitprof_macs_for(profile, op, module)
    softmax = _called_elements(profile, run, "F.softmax", SOFTMAX_OPS, SOFTMAX_COST)
    gelu = _called_elements(profile, run, "F.gelu", frozenset({"aten.gelu"}), GELU_COST)
    extras: Counter[str] = Counter()
    for path in roots:
        kind, amount = _hook_extra(profile, model.get_submodule(path), path, run.hooked[path])
        extras[kind] += amount
    counted = sum(r.macs for p in roots for r in _own(profile, p)) + sum(extras.values())
    batch = run.batch
    causes = [Cause(f"counts {kind} as MACs (module hook)", amount)
              for kind, amount in sorted(extras.items())]
    causes += [
        Cause("a hooked module's count replaces its children's: their MACs are lost "
              "(timm Attention's qkv and proj)", -hidden),
        Cause("MACs outside every hooked module, in functions it does not patch "
              "(F.linear, the @ operator, F.scaled_dot_product_attention)", bmm[False] - unhooked),
        Cause("the patched torch.bmm counts again products its module's hook already counts "
              "(nn.MultiheadAttention with need_weights)", bmm[True]),
        Cause("counts F.softmax's input elements as MACs (patched F.softmax)", softmax),
        Cause(f"divides module-hook counts by the batch size {batch} (per-image average); "
              f"patched functions stay per batch", counted // batch - counted),
        Cause("counts F.gelu's input elements as MACs (patched F.gelu; nn.GELU calls it, so its "
              "elements count twice)", gelu),
    ]
    return [c for c in causes if c.macs]


PEERS = (
    Peer("ptflops-pytorch", UNIT, patch_peer(partial(run_ptflops, backend="pytorch"),
                                             ptflops_pytorch_causes, fast_path_blind=False),
         ("peers", "test")),
    Peer("ptflops-aten", UNIT, patch_peer(partial(run_ptflops, backend="aten"),
                                          ptflops_aten_causes), ("peers", "test")),
)
