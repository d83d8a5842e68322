"""The result of an analysis: records plus the views every renderer and check reads.

``Profile.to_dict()`` is the JSON interface (documented in the README): totals, every component
(zeros included), what lies outside the blocks, per-block components, unsupported ops and the
fallback, with the units.
"""

from __future__ import annotations

import re
import warnings as _warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from vitprof.core.display import Shown
from vitprof.core.errors import UserError, VitprofDeprecationWarning
from vitprof.core.records import (
    COMPONENTS,
    UNITS,
    Component,
    Counts,
    InputRecord,
    OpRecord,
    ParamRecord,
)
from vitprof.core.vocab import Mode, OpKind, Phase
from vitprof.count.training import training_dict

if TYPE_CHECKING:
    import pandas as pd

_COUNTS = tuple(Counts().as_dict())


def _data_frame(rows: list[dict[str, Any]], columns: list[str] | None = None) -> pd.DataFrame:
    """``rows`` as a pandas DataFrame; pandas is imported here, when a DataFrame is asked for
    (counting, tables and JSON never need it)."""
    import pandas as pd

    return pd.DataFrame(rows, columns=columns)


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


@dataclass(frozen=True, repr=False)
class Profile(Shown):
    """Everything one analysis found. Immutable; views are computed once, on first use. Shown
    (``repr()``, a notebook's markdown and HTML) as the renderer registered
    (:mod:`vitprof.core.display`)."""

    model: str
    input_shape: tuple[int, ...]  # (batch, channels, *spatial): the input tensor's shape
    device: str
    torch_version: str
    recognizer: str  # who made the breakdown: a table's name or ``graph``
    params: tuple[ParamRecord, ...]
    ops: tuple[OpRecord, ...]
    unsupported_ops: dict[str, int] = field(default_factory=dict)
    fallback: str | None = None
    warnings: tuple[str, ...] = ()  # every warning, the failed self-checks included
    mode: Mode = Mode.INFERENCE
    input_source: str = ""  # where the input's size and channels came from (Workload)
    self_checks: tuple[str, ...] = ()  # the breakdown's failed self-checks (recognize.self_checks)
    inputs: tuple[InputRecord, ...] = ()  # every tensor of the forward (input_shape's among them)

    @property
    def family(self) -> str:
        """Deprecated: :attr:`recognizer` (a model library is a family; this names who made
        the breakdown)."""
        _warnings.warn("Profile.family is deprecated; use Profile.recognizer",
                       VitprofDeprecationWarning, stacklevel=2)
        return self.recognizer

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
        """Counts per block and component, in block order: blocks 0 to the last one that
        holds anything, a block that holds nothing as zeros (indices are contiguous)."""
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
        last = max(per_block, default=-1)
        return [BlockCounts(i, per_block.get(i, _zero_components())) for i in range(last + 1)]

    @cached_property
    def outside(self) -> dict[Component, Counts]:
        """Counts per component outside every block (the totals less the blocks'), every
        component present (zeros included)."""
        outside = dict(self.components)
        for block in self.blocks:
            for component, counts in block.components.items():
                outside[component] = outside[component] - counts
        return outside

    @property
    def input_dtype(self) -> str:
        """The dtype of the input tensor (the forward's first tensor of shape ``input_shape``,
        ``float32``, ``bfloat16``, ...); "" when the forward's tensors were not recorded."""
        return next((i.dtype for i in self.inputs if i.shape == self.input_shape), "")

    @property
    def attention(self) -> Counts:
        """The attention group: qkv + core + proj."""
        c = self.components
        return c[Component.ATTN_QKV] + c[Component.ATTN_CORE] + c[Component.ATTN_PROJ]

    @cached_property
    def attention_implementation(self) -> str:
        """How the attention core ran, read from the kinds of the ops seen in ``attn_core``
        (:class:`~vitprof.core.vocab.OpKind`): a whole attention module's fused op, a fused
        kernel (named by the forward's ops: ``fused scaled_dot_product_attention``, ``fused
        torch.nn.attention.flex_attention``), products of activations, or element-wise work
        only (SwiftFormer's additive attention, MobileViTv2's separable attention: a core
        without products, found by its module)."""
        core = [op for op in self.ops if op.component is Component.ATTN_CORE and op.macs]
        if any(op.kind == OpKind.MULTI_HEAD_ATTENTION for op in core):
            return "nn.MultiheadAttention fast path (aten._native_multi_head_attention)"
        fused = sorted({op.op.removeprefix("aten.") for op in core
                        if op.kind == OpKind.ATTENTION and op.phase == Phase.FORWARD})
        if fused:
            return "fused " + ", ".join(fused)
        ops = {op.op for op in core}
        if ops:
            return "explicit matmuls (" + ", ".join(sorted(ops)) + ")"
        if any(op.component is Component.ATTN_CORE and op.vector_flops for op in self.ops):
            return "element-wise only, no product of activations"
        return "none seen"

    def share(self, counts: Counts, key: str = "macs") -> float:
        """Fraction of the total ``key`` (params, macs, vector_flops) that ``counts`` holds."""
        total = getattr(self.totals, key)
        return getattr(counts, key) / total if total else 0.0

    # ------------------------------------------------------------------ rows and DataFrame views
    # The ``*_rows`` methods hold Python ints (exact at any size); the ``by_*`` DataFrames are
    # the same rows for analysis in pandas.

    def component_rows(self) -> list[dict[str, Any]]:
        """One row per component, every component (zeros included), in the taxonomy's order."""
        return [{"component": str(c), **v.as_dict()} for c, v in self.components.items()]

    def block_rows(self) -> list[dict[str, Any]]:
        """One row per (block, component) with nonzero counts, in block order."""
        return [{"block": block.index, "component": str(component), **counts.as_dict()}
                for block in self.blocks for component, counts in block.components.items()
                if counts != Counts()]

    @cached_property
    def _module_cells(self) -> dict[str, dict[Component, Counts]]:
        """Counts per module and component, the module's own records only: the parameters it
        owns, the ops run while it was the innermost module; modules in the order first
        reached (first op run, then first parameter for modules that never run)."""
        grouped: dict[str, dict[Component, Counts]] = {}
        for op in self.ops:
            cell = grouped.setdefault(op.module, {})
            cell[op.component] = cell.get(op.component, Counts()) + Counts(
                macs=op.macs, vector_flops=op.vector_flops
            )
        for p in self.params:
            cell = grouped.setdefault(p.name.rpartition(".")[0], {})
            cell[p.component] = cell.get(p.component, Counts()) + Counts(params=p.numel)
        return grouped

    @cached_property
    def _subtrees(self) -> dict[str, Counts]:
        """Counts of every module path a record reaches (``""`` the model), each with
        everything under it."""
        totals: dict[str, Counts] = {}
        for module, cell in self._module_cells.items():
            own = sum(cell.values(), Counts())
            for path in ["", *_prefixes(module)]:
                totals[path] = totals.get(path, Counts()) + own
        return totals

    def total(self, module: str = "") -> Counts:
        """Params, MACs and vector FLOPs of ``module`` (a dotted path, ``""`` the whole model)
        and everything under it, as fvcore's ``FlopCountAnalysis.total(module)``: the
        parameters it and its submodules own, the ops run in it or in them. A path no record
        reaches is a UserError, never a zero (a misspelt path would read as one)."""
        if module not in self._subtrees:
            raise UserError(f"no parameter or op of {self.model} lies under the module "
                            f"'{module}'")
        return self._subtrees[module]

    def module_tree_rows(self, depth: int) -> list[dict[str, Any]]:
        """One row per module down to ``depth`` levels under the model (the model, ``(root)``,
        is level 0), with everything under it (:meth:`total`), in the model's tree order, as
        fvcore's ``flop_count_table(max_depth=depth)``: a module whose only child has the same
        counts is folded into that child, one row under the child's path, one level."""
        if depth < 0:
            raise UserError(f"depth must be at least 0, got {depth}")
        totals = self._subtrees
        children: dict[str, list[str]] = {}
        for path in sorted(totals, key=_tree_order(totals)):
            if path:
                children.setdefault(path.rpartition(".")[0], []).append(path)
        rows: list[dict[str, Any]] = []

        def visit(path: str, level: int) -> None:
            while len(only := children.get(path, [])) == 1 and totals[only[0]] == totals[path]:
                path = only[0]
            rows.append({"module": path or "(root)", "depth": level, **totals[path].as_dict()})
            for child in children.get(path, []) if level < depth else []:
                visit(child, level + 1)

        visit("", 0)
        return rows

    def module_rows(self) -> list[dict[str, Any]]:
        """One row per (module, component), grouped by module in the model's tree order.

        A module comes right after its parent, siblings in the order they first appear (first
        op run, then first parameter for modules that never run); a module's components in the
        order they first appear in it. Parameters belong to the module that owns them, ops to
        the innermost module running.
        """
        grouped = self._module_cells
        order = _tree_order(grouped)
        return [{"module": m or "(root)", "component": str(c), **v.as_dict()}
                for m in sorted(grouped, key=order) for c, v in grouped[m].items()]

    def op_rows(self) -> list[dict[str, Any]]:
        """One row per aten op: calls and counts, the most MACs first."""
        calls: Counter[str] = Counter()
        grouped: dict[str, Counts] = {}
        for op in self.ops:
            calls[op.op] += 1
            grouped[op.op] = grouped.get(op.op, Counts()) + Counts(
                macs=op.macs, vector_flops=op.vector_flops
            )
        return [{"op": name, "calls": calls[name], **counts.as_dict()}
                for name, counts in sorted(grouped.items(), key=lambda kv: -kv[1].macs)]

    def explain_rows(self) -> list[dict[str, Any]]:
        """One row per (module, component, block, rule) in the model's tree order
        (:meth:`module_rows`): what placed the module's parameters and ops there (``placed_by``,
        a rule of :mod:`vitprof.recognize.rules`, a table's name or ``override``), its block
        (``outside`` for none) and, as ``evidence``, the warnings that name the module or one of
        its parameters ("" when none does)."""
        grouped: dict[str, dict[tuple[Component, int | None, str], Counts]] = {}
        for op in self.ops:
            cell = grouped.setdefault(op.module, {})
            key = (op.component, op.block, op.placed_by)
            cell[key] = cell.get(key, Counts()) + Counts(macs=op.macs,
                                                         vector_flops=op.vector_flops)
        for p in self.params:
            cell = grouped.setdefault(p.name.rpartition(".")[0], {})
            key = (p.component, p.block, p.placed_by)
            cell[key] = cell.get(key, Counts()) + Counts(params=p.numel)
        order = _tree_order(grouped)
        return [{"module": m or "(root)", "component": str(c),
                 "block": "outside" if block is None else block, "placed_by": rule,
                 **v.as_dict(), "evidence": "; ".join(_naming(self.warnings, m))}
                for m in sorted(grouped, key=order) for (c, block, rule), v in grouped[m].items()]

    def op_rule_rows(self) -> list[dict[str, Any]]:
        """:meth:`op_rows` split by the rule that placed the records (``placed_by``)."""
        calls: Counter[tuple[str, str]] = Counter()
        grouped: dict[tuple[str, str], Counts] = {}
        for op in self.ops:
            key = (op.op, op.placed_by)
            calls[key] += 1
            grouped[key] = grouped.get(key, Counts()) + Counts(
                macs=op.macs, vector_flops=op.vector_flops
            )
        return [{"op": name, "placed_by": rule, "calls": calls[name, rule], **counts.as_dict()}
                for (name, rule), counts in sorted(grouped.items(), key=lambda kv: -kv[1].macs)]

    def explain(self) -> pd.DataFrame:
        """:meth:`explain_rows` as a DataFrame: per module, its component, block and rule."""
        return _data_frame(self.explain_rows(),
                           columns=["module", "component", "block", "placed_by", *_COUNTS,
                                    "evidence"])

    def by_component(self) -> pd.DataFrame:
        """``component_rows`` with each row's share of the total MACs and params."""
        rows = [{**row, "macs_share": self.share(counts),
                 "params_share": self.share(counts, "params")}
                for row, counts in zip(self.component_rows(), self.components.values(),
                                       strict=True)]
        return _data_frame(rows)

    def by_block(self) -> pd.DataFrame:
        return _data_frame(self.block_rows(), columns=["block", "component", *_COUNTS])

    def by_module(self, depth: int | None = None) -> pd.DataFrame:
        """:meth:`module_rows` (per module and component); with ``depth``,
        :meth:`module_tree_rows` (per module, everything under it, single-child chains
        folded, as fvcore's table)."""
        if depth is None:
            return _data_frame(self.module_rows(), columns=["module", "component", *_COUNTS])
        return _data_frame(self.module_tree_rows(depth), columns=["module", "depth", *_COUNTS])

    def by_op(self) -> pd.DataFrame:
        return _data_frame(self.op_rows(), columns=["op", "calls", *_COUNTS])

    # ------------------------------------------------------------------ JSON

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "input_shape": list(self.input_shape),
            "device": self.device,
            "torch_version": self.torch_version,
            "recognizer": self.recognizer,
            "family": self.recognizer,  # deprecated: the same as "recognizer"
            "mode": self.mode,
            "attention_implementation": self.attention_implementation,
            "units": dict(UNITS),
            "totals": self.totals.as_dict(),
            "components": {str(c): v.as_dict() for c, v in self.components.items()},
            "attention": self.attention.as_dict(),
            "outside": {str(c): v.as_dict() for c, v in self.outside.items()},
            "blocks": [
                {"index": b.index, "components": {str(c): v.as_dict()
                                                  for c, v in b.components.items()}}
                for b in self.blocks
            ],
            "unsupported_ops": dict(self.unsupported_ops),
            "fallback": self.fallback,
            "warnings": list(self.warnings),
            "input_source": self.input_source,
            "self_checks": list(self.self_checks),
            **({"inputs": [{"name": i.name, "shape": list(i.shape), "dtype": i.dtype}
                           for i in self.inputs]} if self.inputs else {}),
            **({"training": training_dict(self.ops)} if self.mode == Mode.TRAIN else {}),
        }


def _naming(warnings: tuple[str, ...], module: str) -> list[str]:
    """The ``warnings`` that name ``module`` (a dotted path, whole) or a parameter of it."""
    if not module:
        return []
    pattern = re.compile(rf"(?<![\w.]){re.escape(module)}(\.\w+)?(?![\w.])")
    return [w for w in warnings if pattern.search(w)]


def _prefixes(module: str) -> list[str]:
    """``a.b.c`` -> ``a``, ``a.b``, ``a.b.c``; the root ``""`` has none."""
    parts = module.split(".") if module else []
    return [".".join(parts[:depth]) for depth in range(1, len(parts) + 1)]


def _tree_order(modules: dict[str, Any]) -> Callable[[str], tuple[int, ...]]:
    """A sort key putting each module right after its parent (depth-first), siblings in the
    order of ``modules`` (the first record reaching anything under them)."""
    rank: dict[str, int] = {}
    for module in modules:
        for prefix in _prefixes(module):
            rank.setdefault(prefix, len(rank))
    return lambda module: tuple(rank[prefix] for prefix in _prefixes(module))
