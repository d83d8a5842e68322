"""The request as one value (issue 25, item 1): :class:`vitprof.workload.InputRequest` holds the
shape options, batch, dtype and classes, is checked once in its constructor, and is what
``analyze``, ``profile_model``, ``run_crosscheck``, the sweep, the budgets and the pages take;
every consumer runs the workload's whole example, keyword inputs included."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from types import FrameType
from typing import Any

import pytest
import torch
from torch import nn

import vitprof
from vitprof.checks.budget import at_input, parse_budget
from vitprof.checks.crosscheck import run_crosscheck
from vitprof.cli.commands.common import input_request
from vitprof.core.errors import UserError
from vitprof.core.vocab import MemoryTarget
from vitprof.count import running
from vitprof.measure.memory.by_kind import saved_for_backward
from vitprof.measure.profile import profile_model
from vitprof.models import zoo
from vitprof.recognize.tables import recognize
from vitprof.sweep import sweep
from vitprof.workload import InputRequest, make_workload

NAME = "note002_cifar_vit"  # a zoo ViT of 32 px images


class Masked(nn.Module):
    """4 px patches of 3 channels into 8 wide tokens, each multiplied by its ``mask`` value
    (a keyword input), then one Linear(8, 8)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Conv2d(3, 8, kernel_size=4, stride=4)
        self.proj = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor, *, mask: torch.Tensor) -> torch.Tensor:
        tokens = self.embed(x).flatten(2).transpose(1, 2)  # (B, Np, 8)
        return self.proj(tokens * mask.unsqueeze(-1))


BATCH = 2
# an 8 x 8 image: Np = (8 / 4)^2 = 4 patches
EMBED_MACS = 4 * 3 * 4 * 4 * 8  # Np x C x P^2 x D = 1_536 per image
PROJ_MACS = 4 * 8 * 8  # Np x D x D = 256 per image
MASKED_MACS = BATCH * (EMBED_MACS + PROJ_MACS)  # 2 x 1_792 = 3_584


def masked_inputs() -> dict[str, torch.Tensor]:
    return {"x": torch.randn(BATCH, 3, 8, 8), "mask": torch.ones(BATCH, 4)}


# ------------------------------------------------------------------ the request, checked once


@pytest.mark.parametrize(("fields", "message"), [
    ({"image_size": 0}, "image size must be at least 1, got 0"),
    ({"image_size": (32, 32, 3)}, "image size must be one int or (height, width)"),
    ({"batch_size": 0}, "batch size must be at least 1, got 0"),
    ({"num_classes": -1}, "number of classes must be at least 0, got -1"),
    ({"frames": 0}, "number of frames must be at least 1, got 0"),
    ({"dtype": "int8"}, "unknown dtype 'int8'"),
    ({"input_shape": (1, 3)}, "an input shape needs batch, channels and at least one size"),
    ({"input_shape": (2, 3, 32, 32), "batch_size": 2}, "it excludes batch_size"),
    ({"input_shape": (1, 3, 32, 32), "in_chans": 3}, "it excludes in_chans"),
    ({"inputs": torch.zeros(1, 3, 8, 8), "image_size": 8}, "they exclude image_size"),
])
def test_the_request_refuses_each_bad_value_in_one_line(fields: dict[str, Any],
                                                        message: str) -> None:
    with pytest.raises(UserError) as refused:
        InputRequest(**fields)
    assert message in str(refused.value) and "\n" not in str(refused.value)


def test_the_request_normalises_what_it_is_given() -> None:
    request = InputRequest(image_size=[24, 32], dtype="bfloat16", input_shape=None)
    assert (request.image_size, request.dtype) == ((24, 32), torch.bfloat16)
    assert InputRequest(input_shape=[1, 3, 8, 8]).input_shape == (1, 3, 8, 8)
    assert request.given() == ["image_size", "dtype"]


def test_validation_has_left_running() -> None:
    # running.py runs models for real (meta fallback, memory guard); it checks no input
    assert not [name for name in ("check_input", "check_image_size") if hasattr(running, name)]


def _image_size_checks(call: Any) -> list[str]:
    """The callers of every check of an image size while ``call()`` runs."""
    found: list[str] = []

    def watch(frame: FrameType, event: str, _arg: object) -> None:
        if event == "call" and frame.f_code.co_name == "check_image_size":
            assert frame.f_back is not None
            found.append(frame.f_back.f_code.co_name)

    sys.setprofile(watch)
    try:
        call()
    finally:
        sys.setprofile(None)
    return found


def test_one_analyze_checks_the_image_size_in_the_request_alone() -> None:
    """Before, one analyze() checked it 4 times (analyze's and make_workload's check_input,
    the request, zoo.build), then twice (the request, zoo.build); now the request alone: the
    workload builds through zoo.build_sized, which takes the request's checked sizes."""
    found = _image_size_checks(lambda: vitprof.analyze(NAME, image_size=32))
    assert found == ["__post_init__"]


def test_zoo_build_called_alone_still_checks_the_image_size() -> None:
    # zoo.build is public (docs/api.md): a caller without a request is checked there
    found = _image_size_checks(lambda: zoo.build(NAME, image_size=32))
    assert found == ["build"]
    with pytest.raises(UserError, match="image size must be at least 1, got 0"):
        zoo.build(NAME, image_size=0)


# ------------------------------------------------------------------ the consumers take it


def test_analyze_takes_a_request_or_a_workload_as_its_keywords_do() -> None:
    keywords = vitprof.analyze(NAME, image_size=48, batch_size=2)
    request = InputRequest(image_size=48, batch_size=2)
    by_request = vitprof.analyze(NAME, request=request)
    by_workload = vitprof.analyze(make_workload(NAME, request))
    assert keywords.input_shape == by_request.input_shape == (2, 3, 48, 48)
    assert keywords.totals == by_request.totals == by_workload.totals


def test_the_input_is_asked_for_once() -> None:
    request = InputRequest(image_size=32)
    with pytest.raises(UserError, match="it excludes batch_size"):
        vitprof.analyze(NAME, request=request, batch_size=2)
    with pytest.raises(UserError, match="a Workload carries its input"):
        vitprof.analyze(make_workload(NAME, request), image_size=64)


def test_the_command_line_builds_one_request() -> None:
    args = argparse.Namespace(image_size=(24, 32), frames=None, in_chans=1, dtype="float16",
                              input_shape=None, batch_size=4, num_classes=0)
    assert input_request(args) == InputRequest(image_size=(24, 32), in_chans=1,
                                               dtype=torch.float16, batch_size=4, num_classes=0)
    # a command without --batch-size nor --num-classes (check, report) gets the defaults
    shape_only = argparse.Namespace(image_size=None, frames=None, in_chans=None, dtype=None,
                                    input_shape=[(1, 3, 16, 16)])
    assert input_request(shape_only) == InputRequest(input_shape=(1, 3, 16, 16))


def test_a_budget_holds_its_request_and_at_input_replaces_its_sizes() -> None:
    budget = parse_budget("small", {"model": NAME, "image_size": 32, "batch_size": 2,
                                    "dtype": "bfloat16", "max_macs": 10**12})
    assert budget.request == InputRequest(image_size=32, batch_size=2, dtype=torch.bfloat16)
    whole = at_input(budget, InputRequest(input_shape=(1, 3, 48, 48)))
    # the whole shape replaces the image size and the batch; the dtype stays the entry's
    assert whole.request == InputRequest(input_shape=(1, 3, 48, 48), dtype=torch.bfloat16)
    assert whole.input_override == "input_shape 1x3x48x48"


def test_the_sweep_holds_the_request_at_every_point() -> None:
    held = InputRequest(batch_size=2, dtype="bfloat16")
    swept = sweep(NAME, "image_size", [32, 64], request=held, progress=False)
    assert [p.input_shape for p in swept.points] == [(2, 3, 32, 32), (2, 3, 64, 64)]
    assert {p.input_dtype for p in swept.points} == {"bfloat16"}
    one = vitprof.analyze(NAME, request=replace(held, image_size=64))
    assert swept.points[1].components == dict(one.components)


# ------------------------------------------------------------------ the whole example


def test_profile_runs_a_keyword_input() -> None:
    """Before, profile fed the input tensor alone: a forward taking ``mask=`` failed."""
    result = profile_model(Masked(), request=InputRequest(inputs=masked_inputs()),
                           warmup=0, iters=1, threads=1)
    assert result.input_shape == (BATCH, 3, 8, 8)
    assert sum(op.macs for op in result.ops) == MASKED_MACS
    # the mask multiply: BATCH x Np x D = 2 x 4 x 8 = 64 element-wise products
    assert [op.vector_flops for op in result.ops if op.op.startswith("aten.mul")] == [64]


def test_saved_for_backward_takes_the_whole_example() -> None:
    model = Masked()
    work = make_workload(model, inputs=masked_inputs())
    saved = saved_for_backward(work, recognize(model), MemoryTarget.CPU)
    assert sum(saved.values()) > 0


def test_crosscheck_takes_a_request() -> None:
    check = run_crosscheck(Masked(), peers=["closed-form"],
                           request=InputRequest(inputs=masked_inputs()))
    assert check.vitprof.macs == MASKED_MACS


# ------------------------------------------------------- --input NAME=VALUE, from the request


def _parsed(*argv: str) -> argparse.Namespace:
    from vitprof.cli.main import build_parser

    return build_parser("analyze").parse_args(["analyze", NAME, *argv])


def test_input_gives_a_field_by_its_text_form() -> None:
    # --input extra_shapes=... is --input-shape given again: the field declares its text form
    args = _parsed("--input-shape", "2,3,32,32", "--input", "extra_shapes=2,1,65,65")
    assert input_request(args) == InputRequest(input_shape=(2, 3, 32, 32),
                                               extra_shapes=((2, 1, 65, 65),))
    assert InputRequest.from_text([("extra_shapes", "2,4"), ("extra_shapes", "2,5")]) == {
        "extra_shapes": ((2, 4), (2, 5))}


@pytest.mark.parametrize(("text", "error"), [
    ("bogus=1", "unknown input 'bogus' in --input; choose from extra_shapes"),
    ("extra_shapes=2,x", "expected integers B,SIZE"),
    ("extra_shapes=2,0", "extra input shape size must be at least 1, got 0"),
])
def test_a_bad_input_is_one_line(text: str, error: str) -> None:
    with pytest.raises(UserError, match=error):
        input_request(_parsed("--input", text))


def test_a_new_field_with_a_text_form_is_on_the_command_line_unchanged(monkeypatch) -> None:
    """The command line reads the names from the request's fields: a field a new input kind
    declares in workload.py is given by --input with no change to the CLI."""
    from dataclasses import dataclass, field

    from vitprof import workload

    @dataclass(frozen=True)
    class Wider(InputRequest):
        toy: int | None = field(default=None, metadata={workload.TEXT: lambda t: int(t[-1])})

    monkeypatch.setattr(workload, "InputRequest", Wider)
    assert input_request(_parsed("--input", "toy=7", "--image-size", "32")) == Wider(
        image_size=32, toy=7)
