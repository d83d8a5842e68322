"""What an op is lives in the formula registry: ``register(op, kind=..., row=...)`` holds the
formula, the op's kind and its documented row; records carry the kind, and the recognizer, the
self-checks and the peers ask for it, never for a substring of the op's name."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import torch
from recognition_fixtures import IMAGE, Blk, D, L, N, Net, net
from torch import nn

from vitprof import analyze
from vitprof.core.records import Component as C
from vitprof.core.records import Cost, OpKind
from vitprof.count.formulas import FORMULAS, kind_named, kind_of, register, shape
from vitprof.count.formulas.registry import CostRow, packet
from vitprof.count.formulas.table import documented_rows
from vitprof.recognize.self_checks import attention_outside_core

ROOT = Path(__file__).resolve().parents[1]


@torch.library.custom_op("vitprof_kinds::attend", mutates_args=())
def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """A made-up attention kernel: softmax(q k^T) v, which vitprof has no formula for."""
    return (q @ k.transpose(-2, -1)).softmax(-1) @ v


@attend.register_fake
def _(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return q.new_empty((*q.shape[:-1], v.shape[-1]))


class KernelBlk(Blk):
    """The standard block whose core is the made-up kernel."""

    def core(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return torch.ops.vitprof_kinds.attend(q, k, v)


KERNEL_ROW = CostRow("L S (E + Ev) MACs", "QK^T and AV, the softmax left out")


def test_a_new_attention_kernel_is_one_decorated_function() -> None:
    op = torch.ops.vitprof_kinds.attend
    try:
        @register(op, kind=OpKind.ATTENTION, row=KERNEL_ROW)
        def attend_cost(inputs, out) -> Cost:
            (*_, length, e), source, ev = shape(inputs["q"]), shape(inputs["k"])[-2], out.shape[-1]
            return Cost(macs=length * source * (e + ev))

        profile = analyze(Net(KernelBlk), image_size=IMAGE)
        kernel = [r for r in profile.ops if r.op == "vitprof_kinds.attend"]
        # one call per block, each N x N scores x (D + D): 4 * 4 * 16 = 256 MACs
        assert [(r.kind, r.component, r.macs) for r in kernel] == [
            (OpKind.ATTENTION, C.ATTN_CORE, N * N * (D + D))] * L
        # the graph finds it as a core on its own: the standard net's closed form, every block
        assert {r.placed_by for r in kernel} == {"fused-attention-op"}
        got = {c: (profile.components[c].params, profile.components[c].macs)
               for c in C if profile.components[c].params or profile.components[c].macs}
        assert got == net()
        assert not [w for w in profile.warnings if "self-check" in w]
        # the header's attention line names it as a fused kernel, by its kind
        assert profile.attention_implementation == "fused vitprof_kinds.attend"
        # the self-checks treat it as attention: placed in mlp, it is attention outside the core
        astray = [replace(r, component=C.MLP) if r in kernel else r for r in profile.ops]
        assert attention_outside_core(astray) == [
            f"self-check failed (attention outside attn_core): {L * N * N * 2 * D:,} MACs of "
            "attention products counted as mlp, in m.0, m.1"]
        # the peers ask by the name they log; the cost table lists it in its own row
        assert kind_named("vitprof_kinds::attend") is OpKind.ATTENTION
        assert documented_rows()[KERNEL_ROW] == ["vitprof_kinds.attend"]
    finally:
        FORMULAS.pop(packet(op), None)
    assert kind_of(op) is OpKind.OTHER


def test_every_formula_of_vitprof_has_a_kind_and_a_documented_row() -> None:
    undeclared = [str(op) for op, r in FORMULAS.items()
                  if r.kind is OpKind.OTHER or r.row is None]
    assert not undeclared


def test_a_gradient_has_the_kind_of_its_forward() -> None:
    aten = torch.ops.aten
    assert kind_of(aten.convolution_backward) is kind_of(aten.convolution) is OpKind.CONV
    assert kind_of(aten.native_layer_norm_backward) is OpKind.NORM
    assert kind_of(aten._scaled_dot_product_flash_attention_for_cpu_backward) is OpKind.ATTENTION


def test_records_of_a_training_step_carry_their_kinds() -> None:
    # 8 x 8 -> 6 x 6 (3 x 3 kernel) -> 3 x 3 (pool of 2): 4 * 9 = 36 features
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.AvgPool2d(2), nn.Flatten(), nn.LayerNorm(36),
                          nn.Linear(36, 2))
    profile = analyze(model, image_size=IMAGE, mode="train")
    kinds = {r.op: r.kind for r in profile.ops}
    assert kinds["aten.convolution"] is kinds["aten.convolution_backward"] is OpKind.CONV
    assert kinds["aten.native_layer_norm"] is kinds["aten.native_layer_norm_backward"] \
        is OpKind.NORM
    assert kinds["aten.addmm"] is OpKind.PRODUCT
    assert kinds["aten.avg_pool2d"] is OpKind.POOL


# a string tested against an op's name: ``"conv" in step.op``, ``name in op.op`` (for each name
# of a list), ``op.op.startswith("aten.div")``
_SUBSTRING = re.compile(r'("[^"]*"|\w+)\s+(not\s+)?in\s+[\w.\[\]]*\.op\b'
                        r'|\.op\.(startswith|endswith)\(')


def test_no_op_name_is_read_by_substring_outside_the_formulas() -> None:
    formulas = ROOT / "vitprof" / "count" / "formulas"
    found = [f"{path.relative_to(ROOT)}:{n}" for path in sorted((ROOT / "vitprof").rglob("*.py"))
             if formulas not in path.parents
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if _SUBSTRING.search(line)]
    assert not found, "ask the record's kind (OpKind) instead: " + ", ".join(found)
