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

from vitprof.core.vocab import Component, OpKind, Phase

COMPONENTS: tuple[Component, ...] = tuple(Component)

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
