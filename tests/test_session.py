"""The counting session, the module stack and the meta fallback rule, on tiny models."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from vitprof import UserError
from vitprof.core.records import Component as C
from vitprof.count.module_stack import ModuleStack
from vitprof.count.running import CountFailed, Footprint, MetaFailure, first_on_meta
from vitprof.count.session import Event, count, image_inputs


class Inner(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.act = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.fc(x))


class Outer(nn.Module):
    """``head(inner(x))`` with ``inner = act(fc(x))``: modules nested two deep."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = Inner()
        self.head = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.inner(x))


FORWARD = [  # (kind, path) in call order: each module is left before its parent
    ("enter", ""), ("enter", "inner"), ("enter", "inner.fc"), ("leave", "inner.fc"),
    ("enter", "inner.act"), ("leave", "inner.act"), ("leave", "inner"),
    ("enter", "head"), ("leave", "head"), ("leave", ""),
]


def test_module_stack_enters_and_leaves_in_call_order() -> None:
    model = Outer()
    seen: list[tuple[str, str]] = []
    innermost: list[str] = []
    with ModuleStack(model, on_enter=lambda path, _m: seen.append(("enter", path)),
                     on_leave=lambda path, _m: seen.append(("leave", path))) as stack:
        probe = model.inner.act.register_forward_pre_hook(  # runs after the stack's own
            lambda *_: innermost.append(stack.current)
        )
        model(torch.zeros(3, 4))
        probe.remove()
        assert stack.paths == []
    assert seen == FORWARD
    assert innermost == ["inner.act"]  # read inside act's call: the innermost path
    model(torch.zeros(3, 4))
    assert len(seen) == len(FORWARD)  # unhooked on exit
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())


def test_module_stack_leaves_a_module_that_raises() -> None:
    model = Outer()
    model.head.forward = lambda x: (_ for _ in ()).throw(ValueError("boom"))
    left: list[str] = []
    with ModuleStack(model, on_leave=lambda path, _m: left.append(path)) as stack:
        with pytest.raises(ValueError, match="boom"):
            model(torch.zeros(3, 4))
        assert stack.current == ""  # nothing left running
    assert left == ["inner.fc", "inner.act", "inner", "head", ""]


def test_count_gives_the_macs_of_a_tiny_model_by_arithmetic() -> None:
    model = Outer()
    before = {name: t.clone() for name, t in model.state_dict().items()}
    x = torch.zeros(3, 4, device="meta")  # meta input, model with weights: meta stand-ins
    run = count(model, image_inputs(x))
    # fc: 3 rows x 4 in x 4 out = 48 MACs; head: 3 x 4 x 2 = 24 MACs; relu is free of MACs
    assert [(op.op, op.module, op.macs) for op in run.ops] == [
        ("aten.addmm", "inner.fc", 48), ("aten.relu", "inner.act", 0), ("aten.addmm", "head", 24),
    ]
    # the bias adds are vector work: 3 x 4 + 3 x 2 = 18; relu 3 x 4 = 12
    assert sum(op.vector_flops for op in run.ops) == 18 + 12
    assert run.nodes == {} and run.unsupported == {}
    assert all(torch.equal(before[n], t) for n, t in model.state_dict().items())
    assert model.training  # counted in eval mode, its train mode (the default) given back


def test_count_a_training_step_with_backward_module_events() -> None:
    model = Outer()
    events: list[Event] = []
    run = count(model, image_inputs(torch.zeros(3, 4, device="meta")),
                train=True, on_event=events.append)
    forward = [op for op in run.ops if op.phase == "forward"]
    backward = [op for op in run.ops if op.phase == "backward"]
    assert sum(op.macs for op in forward) == 48 + 24
    # head: input gradient 3x2 @ 2x4 = 24 and weight gradient 2x3 @ 3x4 = 24 MACs;
    # fc: weight gradient only (the input needs none), 4x3 @ 3x4 = 48 MACs
    assert sum(op.macs for op in backward) == 24 + 24 + 48
    assert [(e.kind, e.path) for e in events if e.phase == "forward"] == FORWARD
    # backward: a gradient reaching a module's output enters it; the gradients of all its
    # inputs that need one leave it (fc and inner take x, which needs none: never left)
    steps = {(e.kind, e.path): e.ops for e in events if e.phase == "backward"}
    assert set(steps) == {
        ("enter", ""), ("enter", "head"), ("leave", "head"), ("enter", "inner"),
        ("enter", "inner.act"), ("leave", "inner.act"), ("enter", "inner.fc"),
    }
    head = run.ops[steps[("enter", "head")]:steps[("leave", "head")]]
    assert sum(op.macs for op in head) == 24 + 24 and all(op.phase == "backward" for op in head)
    assert steps[("enter", "head")] == len(forward)  # the backward starts at the head


class ReadsAValue(nn.Module):
    """Reads a value of its input, which a meta tensor does not have."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum().item() < 0:
            raise AssertionError("unreachable")
        return self.fc(x)


def test_a_meta_only_failure_falls_back_with_a_note() -> None:
    model = ReadsAValue()
    attempt = first_on_meta("m", (3, 4), lambda: count(
        model, image_inputs(torch.zeros(3, 4, device="meta"))
    ))
    assert isinstance(attempt, MetaFailure)
    assert attempt.note("cpu") == ("meta device failed (RuntimeError: Tensor.item() cannot be "
                                   "called on meta tensors); counted on cpu with real tensors")


def test_any_other_failure_is_a_user_error_not_a_fallback() -> None:
    def fails() -> None:
        raise CountFailed(ValueError("wrong shape"), Footprint(0, "nothing"))

    with pytest.raises(UserError, match=r"running m failed: ValueError: wrong shape \(input of "
                                        r"shape 3x4, on meta\)"):
        first_on_meta("m", (3, 4), fails)


def test_an_op_without_a_component_looks_through_norms_to_its_producer() -> None:
    from vitprof.recognize.rules.positions import Pending, resolve_positions_by

    # a post-norm branch: proj -> norm -> residual add (x + norm(proj(...))) is attn_proj
    ops = [Pending(C.ATTN_PROJ, 0, ()), Pending(C.NORM, 0, (0,)), Pending(None, 0, (1,))]
    assert resolve_positions_by(ops, has_blocks=True)[2] == (C.ATTN_PROJ, "producer")
