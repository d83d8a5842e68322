"""Plain data: the component taxonomy, cost tuples and what the counter records.

Conventions, used by every part of vitprof:

* **MACs** are the primary unit: one multiply-accumulate of a matmul, linear, convolution or
  attention product. Bias additions are *not* MACs.
* **FLOPs** = 2 x MACs, always derived, never counted separately.
* **vector FLOPs** are the cheap element-wise work (LayerNorm, softmax, GELU, residual and bias
  adds, scaling) charged per element with the costs in :mod:`vitprof.count.formulas`. They are never
  folded into MACs or FLOPs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum


class Component(StrEnum):
    """Where an operation or a parameter belongs in a Vision Transformer."""

    PATCH_EMBED = "patch_embed"
    CONV = "conv"  # convolutional blocks and stages of hybrids (MBConv, RepMixer, conv mixers)
    TOKENS = "tokens"  # class / distillation / register tokens and the position embedding
    ATTN_QKV = "attn_qkv"
    ATTN_CORE = "attn_core"  # QK^T, softmax, AV, or one fused scaled-dot-product attention
    ATTN_PROJ = "attn_proj"
    MLP = "mlp"
    NORM = "norm"
    HEAD = "head"
    OTHER = "other"


COMPONENTS: tuple[Component, ...] = tuple(Component)


class Phase(StrEnum):
    """Which pass an operation ran in: the forward, or the backward of a training step."""

    FORWARD = "forward"
    BACKWARD = "backward"


class OpKind(StrEnum):
    """What an aten operation is, as its formula's registration says
    (:func:`vitprof.count.formulas.register`): the recognizer, the self-checks and the peers ask
    a record for its kind, never its op name. A gradient operation has the kind of its forward
    (``convolution_backward`` is a convolution); an operation registered without a kind is
    ``other``."""

    PRODUCT = "product"  # a matrix product: mm, bmm, addmm... (MACs)
    CONV = "conv"  # a convolution, transposed or grouped
    ATTENTION = "attention"  # one fused attention core: scaled-dot-product kernels, flex_attention
    MULTI_HEAD_ATTENTION = "multi_head_attention"  # a whole attention module: projections, core
    NORM = "norm"  # a normalisation by the data's statistics: layer, group, batch, RMS norm
    VECTOR_NORM = "vector_norm"  # the norm of a vector (F.normalize's denominator)
    POOL = "pool"  # a pooling window: max or average, fixed or adaptive
    ELEMENTWISE = "elementwise"  # per-element work: arithmetic, activations, reductions, resampling
    OTHER = "other"  # registered without a kind


class Mode(StrEnum):
    """What is counted: one inference forward, or a training step (forward and backward)."""

    INFERENCE = "inference"
    TRAIN = "train"


MODES: tuple[str, ...] = tuple(m.value for m in Mode)  # plain strings: argparse shows repr()


class Recognizer(StrEnum):
    """Who names the components: ``auto`` (the graph, compared with the table that detects the
    model if one does), ``graph`` (roles read from the data flow), ``tables`` (a table, else
    the graph: to compare)."""

    AUTO = "auto"
    GRAPH = "graph"
    TABLES = "tables"


class EventKind(StrEnum):
    """A module event of a counted run: the module is entered, or left."""

    ENTER = "enter"
    LEAVE = "leave"


class Device(StrEnum):
    """Where a model runs: ``meta`` counts without allocating weights; the others are real."""

    META = "meta"
    CPU = "cpu"
    CUDA = "cuda"


DEVICES: tuple[str, ...] = tuple(d.value for d in Device)
REAL_DEVICES: tuple[str, ...] = (Device.CPU.value, Device.CUDA.value)  # where timing runs

UNITS: dict[str, str] = {
    "params": "number of parameter elements, each shared tensor counted once",
    "macs": "multiply-accumulates of matmul, linear, convolution and attention products",
    "flops": "2 x macs",
    "vector_flops": (
        "element-wise work, per-element costs listed in vitprof.count.formulas.VECTOR_COSTS"
    ),
}


@dataclass(frozen=True, slots=True)
class Cost:
    """Compute charged for one operation (or one part of a fused operation)."""

    macs: int = 0
    vector_flops: int = 0

    def __add__(self, other: Cost) -> Cost:
        return Cost(self.macs + other.macs, self.vector_flops + other.vector_flops)


@dataclass(frozen=True, slots=True)
class Counts:
    """Params, MACs and vector FLOPs of a group of records; FLOPs are derived."""

    params: int = 0
    macs: int = 0
    vector_flops: int = 0

    @property
    def flops(self) -> int:
        return 2 * self.macs

    def __add__(self, other: Counts) -> Counts:
        return Counts(
            self.params + other.params,
            self.macs + other.macs,
            self.vector_flops + other.vector_flops,
        )

    def __sub__(self, other: Counts) -> Counts:
        return Counts(
            self.params - other.params,
            self.macs - other.macs,
            self.vector_flops - other.vector_flops,
        )

    def as_dict(self) -> dict[str, int]:
        return {
            "params": self.params,
            "macs": self.macs,
            "flops": self.flops,
            "vector_flops": self.vector_flops,
        }


def op_calls(calls: Mapping[str, int]) -> str:
    """Ops and their call counts, by name: ``aten.foo x2, aten.bar x1`` (how every warning and
    note lists ops without a formula)."""
    return ", ".join(f"{op} x{n}" for op, n in sorted(calls.items()))


@dataclass(frozen=True, slots=True)
class OpRecord:
    """One aten operation (or one component's share of a fused one) as the counter saw it."""

    op: str  # e.g. "aten.addmm"
    module: str  # path of the innermost module running when the op ran ("" is the root)
    component: Component
    block: int | None
    macs: int
    vector_flops: int
    phase: Phase = Phase.FORWARD
    bytes_read: int = 0  # input tensors, parameters included, at their dtype's element size
    bytes_written: int = 0  # output tensors
    placed_by: str = ""  # the recognition rule that placed it (vitprof.recognize.rules.registry)
    kind: OpKind = OpKind.OTHER  # what the op is, from its formula's registration


@dataclass(frozen=True, slots=True)
class ParamRecord:
    """One parameter tensor, under the first name that reaches it, or one component's share of
    its elements: a fused projection's weight is one record per share of its rows, each of the
    tensor's name with the share's ``numel`` and ``shape``."""

    name: str
    numel: int
    component: Component
    block: int | None
    shape: tuple[int, ...] = ()
    placed_by: str = ""  # the recognition rule that placed it (vitprof.recognize.rules.registry)


@dataclass(frozen=True, slots=True)
class InputRecord:
    """One tensor a forward was fed: its argument name (``args[0]`` for a positional one, the
    keyword otherwise), shape and dtype (``float32``, ``bool``, ...)."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    def describe(self) -> str:
        """``pixel_values 1x3x224x224 float32``."""
        return f"{self.name} {'x'.join(map(str, self.shape))} {self.dtype}"
