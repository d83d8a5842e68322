"""A new input kind, further positional tensors beside the image (issue 25: a new input kind is
``workload.py`` + the closed form): timm's ``VisionTransformer.forward(x, attn_mask)`` fed an
additive attention mask, ``--input-shape B,C,H,W --input-shape B,1,N,N``, through analyze,
profile, crosscheck and budgets; the closed form adds the mask's one add per score."""

from __future__ import annotations

import argparse
from dataclasses import replace

import pytest

import vitprof
from vitprof.checks.budget import at_input, evaluate, parse_budget
from vitprof.checks.crosscheck import run_crosscheck
from vitprof.cli.commands.common import input_request
from vitprof.core.errors import UserError
from vitprof.measure.profile import profile_model
from vitprof.models.closed_form import closed_form
from vitprof.models.spec_inference import spec_from_model
from vitprof.workload import InputRequest, make_workload

pytest.importorskip("timm")

NAME = "timm:vit_tiny_patch16_224"  # patch 16, width 192, depth 12, 3 heads
BATCH = 2
IMAGE = (BATCH, 3, 64, 64)  # built for 64 px (timm's img_size)
TOKENS = 1 + (64 // 16) ** 2  # the class token and 4 x 4 patches = 17
MASK = (BATCH, 1, TOKENS, TOKENS)  # added to every head's scores
MASKED = InputRequest(input_shape=IMAGE, extra_shapes=(MASK,))
# one add per score: BATCH x depth x heads x N^2 = 2 x 12 x 3 x 17^2 = 20_808
MASK_FLOPS = BATCH * 12 * 3 * TOKENS**2


def test_an_extra_shape_is_checked_in_the_request() -> None:
    with pytest.raises(UserError, match="extra input shape size must be at least 1, got 0"):
        InputRequest(extra_shapes=((2, 0),))
    with pytest.raises(UserError, match="an extra input shape needs at least the batch"):
        InputRequest(extra_shapes=((),))
    with pytest.raises(UserError, match="inputs are given: they exclude extra_shapes"):
        InputRequest(inputs={"x": None}, extra_shapes=((2, 4),))


def test_a_second_input_shape_on_the_command_line_is_an_extra_tensor() -> None:
    args = argparse.Namespace(image_size=None, frames=None, in_chans=None, dtype=None,
                              input_shape=[IMAGE, MASK], batch_size=1, num_classes=None)
    assert input_request(args) == MASKED


def test_analyze_feeds_the_mask_after_the_image_and_the_closed_form_agrees() -> None:
    work = make_workload(NAME, MASKED)
    args, _ = work.inputs.example("meta")
    assert [tuple(a.shape) for a in args] == [IMAGE, MASK]
    assert work.input_source == "input shape given; extra tensors 2x1x17x17 given"
    plain = vitprof.analyze(NAME, input_shape=IMAGE)
    masked = vitprof.analyze(work)
    assert masked.totals.macs == plain.totals.macs
    assert masked.totals.vector_flops - plain.totals.vector_flops == MASK_FLOPS
    spec = replace(spec_from_model(work.module), attention_mask=True)
    assert closed_form(spec, BATCH).totals == masked.totals


@pytest.mark.slow
def test_profile_feeds_the_mask() -> None:
    result = profile_model(NAME, request=MASKED, warmup=0, iters=1, threads=1)
    masked = vitprof.analyze(NAME, request=MASKED)
    assert sum(op.vector_flops for op in result.ops) == masked.totals.vector_flops


@pytest.mark.slow
def test_crosscheck_counts_the_masked_forward() -> None:
    check = run_crosscheck(NAME, peers=["flopcounter-meta", "closed-form"], request=MASKED)
    assert check.vitprof.vector_flops - vitprof.analyze(
        NAME, input_shape=IMAGE).totals.vector_flops == MASK_FLOPS
    rows = {row.peer: row for row in check.rows}
    assert rows["flopcounter-meta"].macs == check.vitprof.macs


def test_a_budget_checked_at_the_masked_input() -> None:
    budget = parse_budget("tiny", {"model": NAME, "max_macs": 10**12})
    masked = at_input(budget, MASKED)
    assert masked.input_override == "input_shape 2x3x64x64, extra_shapes 2x1x17x17"
    outcome = evaluate(masked)
    assert outcome.profile.inputs[1].shape == MASK
