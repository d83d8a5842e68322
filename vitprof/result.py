"""The result of an analysis: records plus the views every renderer and check reads.

``Profile.to_dict()`` is the JSON interface (documented in the README): totals, every component
(zeros included), per-block components, unsupported ops and the fallback, with the units.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import pandas as pd

from vitprof.records import COMPONENTS, UNITS, Component, Counts, OpRecord, ParamRecord


@dataclass(frozen=True)
class BlockCounts:
    """One transformer block's counts, per component."""

    index: int
    components: dict[Component, Counts]

    @property
    def total(self) -> Counts:
        return sum(self.components.values(), Counts())


def _zero_components() -> dict[Component, Counts]:
    return {component: Counts() for component in COMPONENTS}


@dataclass(frozen=True)
class Profile:
    """Everything one analysis found. Immutable; views are computed once, on first use."""

    model: str
    input_shape: tuple[int, int, int, int]
    device: str
    torch_version: str
    family: str
    params: tuple[ParamRecord, ...]
    ops: tuple[OpRecord, ...]
    unsupported_ops: dict[str, int] = field(default_factory=dict)
    fallback: str | None = None
    warnings: tuple[str, ...] = ()
    mode: str = "inference"

    @cached_property
    def totals(self) -> Counts:
        return sum(self.components.values(), Counts())

    @cached_property
    def components(self) -> dict[Component, Counts]:
        """Counts per component, every component present (zeros included)."""
        totals = _zero_components()
        for p in self.params:
            totals[p.component] += Counts(params=p.numel)
        for op in self.ops:
            totals[op.component] += Counts(macs=op.macs, vector_flops=op.vector_flops)
        return totals

    @cached_property
    def blocks(self) -> list[BlockCounts]:
        """Counts per block and component, in block order."""
        per_block: dict[int, dict[Component, Counts]] = {}
        for p in self.params:
            if p.block is not None:
                per_block.setdefault(p.block, _zero_components())[p.component] += Counts(
                    params=p.numel
                )
        for op in self.ops:
            if op.block is not None:
                per_block.setdefault(op.block, _zero_components())[op.component] += Counts(
                    macs=op.macs, vector_flops=op.vector_flops
                )
        return [BlockCounts(i, per_block[i]) for i in sorted(per_block)]

    @property
    def attention(self) -> Counts:
        """The attention group: qkv + core + proj."""
        c = self.components
        return c[Component.ATTN_QKV] + c[Component.ATTN_CORE] + c[Component.ATTN_PROJ]

    @cached_property
    def attention_implementation(self) -> str:
        """How the attention core ran, read from the ops seen in ``attn_core``."""
        ops = {op.op for op in self.ops if op.component is Component.ATTN_CORE and op.macs}
        if "aten._native_multi_head_attention" in ops:
            return "nn.MultiheadAttention fast path (aten._native_multi_head_attention)"
        if "aten.scaled_dot_product_attention" in ops:
            return "fused scaled_dot_product_attention"
        if ops:
            return "explicit matmuls (" + ", ".join(sorted(ops)) + ")"
        return "none seen"

    def share(self, counts: Counts, key: str = "macs") -> float:
        """Fraction of the total ``key`` (params, macs, vector_flops) that ``counts`` holds."""
        total = getattr(self.totals, key)
        return getattr(counts, key) / total if total else 0.0

    # ------------------------------------------------------------------ DataFrame views

    def by_component(self) -> pd.DataFrame:
        return _frame(self.components.items(), "component", self.totals)

    def by_block(self) -> pd.DataFrame:
        rows = []
        for block in self.blocks:
            for component, counts in block.components.items():
                if counts != Counts():
                    rows.append({"block": block.index, "component": str(component),
                                 **counts.as_dict()})
        return pd.DataFrame(rows, columns=["block", "component", *Counts().as_dict()])

    def by_module(self) -> pd.DataFrame:
        grouped: dict[tuple[str, Component], Counts] = {}
        for p in self.params:
            key = (p.name.rpartition(".")[0], p.component)
            grouped[key] = grouped.get(key, Counts()) + Counts(params=p.numel)
        for op in self.ops:
            key = (op.module, op.component)
            grouped[key] = grouped.get(key, Counts()) + Counts(
                macs=op.macs, vector_flops=op.vector_flops
            )
        rows = [{"module": m or "(root)", "component": str(c), **v.as_dict()}
                for (m, c), v in grouped.items()]
        return pd.DataFrame(rows, columns=["module", "component", *Counts().as_dict()])

    def by_op(self) -> pd.DataFrame:
        calls: Counter[str] = Counter()
        grouped: dict[str, Counts] = {}
        for op in self.ops:
            calls[op.op] += 1
            grouped[op.op] = grouped.get(op.op, Counts()) + Counts(
                macs=op.macs, vector_flops=op.vector_flops
            )
        rows = [{"op": name, "calls": calls[name], **counts.as_dict()}
                for name, counts in sorted(grouped.items(), key=lambda kv: -kv[1].macs)]
        return pd.DataFrame(rows, columns=["op", "calls", *Counts().as_dict()])

    # ------------------------------------------------------------------ JSON

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "input_shape": list(self.input_shape),
            "device": self.device,
            "torch_version": self.torch_version,
            "family": self.family,
            "mode": self.mode,
            "attention_implementation": self.attention_implementation,
            "units": dict(UNITS),
            "totals": self.totals.as_dict(),
            "components": {str(c): v.as_dict() for c, v in self.components.items()},
            "attention": self.attention.as_dict(),
            "blocks": [
                {"index": b.index, "components": {str(c): v.as_dict()
                                                  for c, v in b.components.items()}}
                for b in self.blocks
            ],
            "unsupported_ops": dict(self.unsupported_ops),
            "fallback": self.fallback,
            "warnings": list(self.warnings),
        }


def _frame(items: Any, key: str, totals: Counts) -> pd.DataFrame:
    rows = []
    for name, counts in items:
        row = {key: str(name), **counts.as_dict()}
        row["macs_share"] = counts.macs / totals.macs if totals.macs else 0.0
        row["params_share"] = counts.params / totals.params if totals.params else 0.0
        rows.append(row)
    return pd.DataFrame(rows)
