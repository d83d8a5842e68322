"""``torchprofile``: torchprofile's ``profile_macs(model, args)`` (0.1.0), its MACs; no params.

It traces one forward with ``torch.jit`` (``torchprofile/trace.py``), here in eval mode with the
cross-check's grad mode, and sums one handler per traced operator (``torchprofile/handlers.py``):
``aten::linear``, ``matmul``, ``addmm``, ``bmm``, ``baddbmm``, ``einsum``, ``_convolution`` and
``scaled_dot_product_attention`` count the products, bias excluded, as vitprof's MACs do;
``aten::mul`` one MAC per output element; ``layer_norm``, ``group_norm``, ``batch_norm`` and
``instance_norm`` one per output element when affine; means and average pools one per output
element, bilinear upsampling four; about a hundred other operators (``add``, ``gelu``,
``softmax``, ...) 0; an operator without a handler is skipped with a warning ("No handlers
found"). Its ``trace`` refuses keyword arguments. Under ``torch.no_grad()`` the
``nn.MultiheadAttention`` fast path traces to a value without a dtype, on which it fails: the row
then names the operator (:func:`untyped_outputs`) instead of the raw ``AttributeError``.

Causes, from vitprof's records and the operators it traced: minus vitprof's MACs of every
operator it skipped; plus one per element of every affine LayerNorm and GroupNorm and of every
``mul`` (vector FLOPs in vitprof's records); plus one per multiplication of 0-dim tensors, the
shape arithmetic on Python ints that ``jit.trace`` records (``bsz * num_heads`` in
``F.multi_head_attention_forward``) and an eager run never dispatches.
"""

from __future__ import annotations

import re
import warnings
from collections import Counter
from dataclasses import dataclass

import torch
from torch import nn

from vitprof.checks.crosscheck.causes import Cause, elements_normed
from vitprof.checks.crosscheck.harness import CannotTake, evaluating, not_installed, quiet
from vitprof.checks.crosscheck.subject import Peer, Subject, grad_note
from vitprof.checks.crosscheck.table import PeerRow, peer_row
from vitprof.count.result import Profile
from vitprof.count.session import Inputs

RANK = 77
PACKAGE = "torchprofile"
NORMS = ("aten.native_layer_norm", "aten.native_group_norm")  # affine: 1 MAC per element
SKIPPED = re.compile(r'No handlers found: "([\w:.]+)"')


@dataclass(frozen=True)
class TorchprofileRun:
    """Its total, its MACs per traced operator, its 0-dim multiplications and the operators it
    skipped (``aten::name``: calls)."""

    macs: int
    by_operator: dict[str, int]
    scalar_muls: int
    skipped: Counter[str]


def run_torchprofile(model: nn.Module, inputs: Inputs, grad: bool = True) -> TorchprofileRun:
    """torchprofile ``profile_macs(model, args, reduction=None)``: MACs per traced node."""
    try:
        from torchprofile import profile_macs  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        raise not_installed(PACKAGE) from None
    args, kwargs = inputs
    if kwargs:
        raise CannotTake(f"torchprofile traces positional arguments only, and this forward "
                         f"takes {', '.join(kwargs)} by keyword")
    with quiet(), evaluating(model), torch.set_grad_enabled(grad), \
            warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            nodes = profile_macs(model, tuple(args), reduction=None)
        except AttributeError as error:
            untyped = untyped_outputs(model, tuple(args))
            if not untyped:
                raise
            raise CannotTake(f"its trace reader needs a dtype on every traced tensor, and "
                             f"{', '.join(sorted(untyped))} returns one without "
                             f"(an undefined optional output): {error}") from None
    assert isinstance(nodes, dict)  # reduction=None: MACs per node
    by_operator: Counter[str] = Counter()
    for node, macs in nodes.items():
        by_operator[node.operator] += macs
    scalar = sum(1 for node in nodes if node.operator == "aten::mul"
                 and node.outputs and node.outputs[0].shape == [])
    skipped = Counter(m[1] for w in caught if (m := SKIPPED.search(str(w.message))))
    return TorchprofileRun(sum(by_operator.values()), dict(by_operator), scalar, skipped)


def untyped_outputs(model: nn.Module, args: tuple[object, ...]) -> set[str]:
    """The operators of ``model``'s ``torch.jit`` trace (the trace torchprofile reads) with a
    tensor output that has no dtype, such as ``aten::_native_multi_head_attention``'s attention
    weights when they are not asked for."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph, _ = torch.jit._get_trace_graph(model, args)
    return {node.kind() for node in graph.nodes() for value in node.outputs()
            if isinstance(value.type(), torch._C.TensorType)
            and value.type().scalarType() is None}


def skipped_causes(profile: Profile, run: TorchprofileRun) -> list[Cause]:
    """Minus vitprof's MACs of each operator it skipped without a handler."""
    causes = []
    for operator, calls in sorted(run.skipped.items()):
        op = operator.replace("::", ".", 1)
        macs = sum(r.macs for r in profile.ops if r.op == op)
        if macs:
            causes.append(Cause(f"has no handler for {operator} ({calls} calls): skipped",
                                -macs))
    return causes


def element_causes(profile: Profile, model: nn.Module, run: TorchprofileRun) -> list[Cause]:
    """What its element rules add: affine norms and ``mul`` one MAC per element (from
    vitprof's records), and the 0-dim multiplications of the trace (from its own)."""
    normed = sum(elements_normed(r, module) for r in profile.ops if r.op in NORMS
                 and getattr(module := model.get_submodule(r.module), "weight", None) is not None)
    muls = [r for r in profile.ops if r.op in ("aten.mul", "aten.mul_")]
    return [c for c in (
        Cause(f"counts affine layer_norm / group_norm as 1 MAC per element ({normed:,})",
              normed),
        Cause(f"counts mul as 1 MAC per output element ({len(muls)} calls)",
              sum(r.vector_flops for r in muls)),
        Cause(f"counts {run.scalar_muls} multiplications of 0-dim tensors, the shape arithmetic "
              "jit.trace records and an eager run never dispatches", run.scalar_muls),
    ) if c.macs]


def _row(subject: Subject, peer: Peer) -> PeerRow:
    def run(model: nn.Module, inputs: Inputs) -> TorchprofileRun:
        return run_torchprofile(model, inputs, grad=subject.grad)

    model, result = subject.run_real(run)
    causes = skipped_causes(subject.profile, result) + element_causes(subject.profile, model,
                                                                        result)
    note = grad_note(subject, peer, model, fast_path_blind=False).replace("run", "traced", 1)
    if result.skipped:
        note += f"; no handler (skipped): {', '.join(sorted(result.skipped))}"
    return peer_row(peer.name, result.macs, peer.unit, result.macs, None,
                    subject.profile.totals, causes, note)


PEERS = (Peer("torchprofile", "MACs (torchprofile profile_macs)", _row, package=PACKAGE),)
