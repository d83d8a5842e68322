"""A new input kind, a boolean mask beside ``pixel_values`` (issue 25: a new input kind is
``workload.py`` + the closed form): ``InputRequest(patch_mask=(B, Np))``, ``--input
patch_mask=B,Np``, fed as Hugging Face's ``bool_masked_pos``, through analyze, profile,
crosscheck and budgets. ``ViTModel(use_mask_token=True)`` blends every patch embedding with its
mask token, ``e (1 - w) + t w``, masked or not; ``ViTForMaskedImageModeling`` also computes its
masked reconstruction loss."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch

import vitprof
from vitprof.checks.budget import at_input, evaluate, parse_budget
from vitprof.checks.crosscheck import run_crosscheck
from vitprof.cli.main import main
from vitprof.core.errors import UserError
from vitprof.core.records import Component
from vitprof.measure.profile import profile_model
from vitprof.models.closed_form import closed_form
from vitprof.models.spec_inference import spec_from_model
from vitprof.study.page_inputs import image_size_sweep, not_swept
from vitprof.workload import InputRequest, make_workload

transformers = pytest.importorskip("transformers")

BATCH, WIDTH, PIXELS, PATCH = 2, 64, 32, 8
PATCHES = (PIXELS // PATCH) ** 2  # 4 x 4 = 16
MASK = (BATCH, PATCHES)
MASKED = InputRequest(patch_mask=MASK, batch_size=BATCH, image_size=PIXELS)
PLAIN = InputRequest(batch_size=BATCH, image_size=PIXELS)
# per patch: 1 - w (1 sub); per element: e * (1 - w), t * w, their sum (3): 2 x 16 x (1 + 3 x 64)
BLEND_FLOPS = BATCH * PATCHES * (1 + 3 * WIDTH)  # = 6_176
FACTORY = f"""
import transformers

CONFIG = transformers.ViTConfig(hidden_size={WIDTH}, num_hidden_layers=2, num_attention_heads=2,
                                intermediate_size=128, image_size={PIXELS}, patch_size={PATCH},
                                encoder_stride={PATCH})


def masked(image_size=None):
    return transformers.ViTModel(CONFIG, add_pooling_layer=False, use_mask_token=True)
"""


def _config() -> object:
    return transformers.ViTConfig(hidden_size=WIDTH, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=128, image_size=PIXELS, patch_size=PATCH,
                                  encoder_stride=PATCH)


def _vit(mask_token: bool) -> torch.nn.Module:
    return transformers.ViTModel(_config(), add_pooling_layer=False, use_mask_token=mask_token)


@pytest.fixture
def factory(tmp_path: Path) -> str:
    path = tmp_path / "masked_vit.py"
    path.write_text(FACTORY)
    return f"{path}:masked"


def test_the_request_checks_the_patch_mask() -> None:
    with pytest.raises(UserError, match="a patch mask is \\(batch, patches\\)"):
        InputRequest(patch_mask=(2, 4, 4))
    with pytest.raises(UserError, match="patch mask size must be at least 1, got 0"):
        InputRequest(patch_mask=(2, 0))
    with pytest.raises(UserError, match="inputs are given: they exclude patch_mask"):
        InputRequest(inputs={"x": None}, patch_mask=MASK)
    assert InputRequest.from_text([("patch_mask", "2,16")]) == {"patch_mask": MASK}


def test_analyze_feeds_the_mask_and_the_closed_form_agrees() -> None:
    model = _vit(mask_token=True)
    work = make_workload(model, MASKED)
    (image,), kwargs = work.inputs.example("meta")
    assert image.shape == (BATCH, 3, PIXELS, PIXELS)
    assert kwargs["bool_masked_pos"].shape == MASK
    assert kwargs["bool_masked_pos"].dtype == torch.bool
    assert work.input_source.endswith("; patch mask 2x16 given")
    masked, plain = vitprof.analyze(work), vitprof.analyze(model, request=PLAIN)
    assert masked.totals.macs == plain.totals.macs
    # the graph places the product that reads the mask token, t * w, in tokens (2 x 16 x 64 =
    # 2_048) and the rest of the blend on the patch embeddings, 1 - w, e * (1 - w) and the sum,
    # in patch_embed (2 x 16 x (1 + 2 x 64) = 4_128)
    added = {c: masked.components[c].vector_flops - plain.components[c].vector_flops
             for c in (Component.TOKENS, Component.PATCH_EMBED)}
    assert added == {Component.TOKENS: BATCH * PATCHES * WIDTH,
                     Component.PATCH_EMBED: BATCH * PATCHES * (1 + 2 * WIDTH)}
    assert masked.totals.vector_flops - plain.totals.vector_flops == BLEND_FLOPS
    # the closed form of the spec read from the same ViT (its mask token), fed the mask
    spec = replace(spec_from_model(model), patch_mask=True)
    form = closed_form(spec, BATCH)
    assert form.totals == masked.totals
    assert all(form.components[c] == masked.components[c]
               for c in (Component.TOKENS, Component.PATCH_EMBED))


def test_the_mask_token_alone_changes_no_count_without_a_mask() -> None:
    # unfed, the mask token is a parameter only: D params more, the same work
    with_token, without = (vitprof.analyze(_vit(t), request=PLAIN) for t in (True, False))
    assert with_token.totals.params - without.totals.params == WIDTH
    assert (with_token.totals.macs, with_token.totals.vector_flops) == (
        without.totals.macs, without.totals.vector_flops)


def test_the_spec_reads_the_mask_token_and_a_mask_needs_one() -> None:
    # HF ViTModel(use_mask_token=True): the spec has the token; unfed, D params more, no work
    spec = spec_from_model(_vit(mask_token=True))
    assert spec.mask_token and not spec.patch_mask
    without = closed_form(replace(spec, mask_token=False))
    assert closed_form(spec).totals.params - without.totals.params == WIDTH
    assert closed_form(spec).totals.vector_flops == without.totals.vector_flops
    with pytest.raises(UserError, match="patch_mask needs mask_token"):
        replace(spec, mask_token=False, patch_mask=True)


def test_masked_image_modeling_also_counts_its_loss() -> None:
    """ViTForMaskedImageModeling fed the mask blends the patches as ViTModel does and computes
    its loss over the B x C x H x W reconstruction: L1 (sub, abs), times the mask, summed (4 per
    value); the mask's sum over B x H x W pixels (1 each); ``+ 1e-5`` and two divisions (3)."""
    model = transformers.ViTForMaskedImageModeling(_config())
    plain, masked = (vitprof.analyze(model, request=r) for r in (PLAIN, MASKED))
    values, pixels = BATCH * 3 * PIXELS**2, BATCH * PIXELS**2  # 6_144 and 2_048
    loss = 4 * values + pixels + 3  # 26_627
    assert masked.totals.macs == plain.totals.macs
    assert masked.totals.vector_flops - plain.totals.vector_flops == BLEND_FLOPS + loss


def test_the_command_line_feeds_the_mask(factory: str, capsys: pytest.CaptureFixture) -> None:
    argv = ["analyze", factory, "--batch-size", "2", "--format", "json"]
    assert main(argv) == 0
    plain = json.loads(capsys.readouterr().out)
    assert main([*argv, "--input", f"patch_mask={BATCH},{PATCHES}"]) == 0
    masked = json.loads(capsys.readouterr().out)
    extra = masked["totals"]["vector_flops"] - plain["totals"]["vector_flops"]
    assert extra == BLEND_FLOPS
    assert main([*argv, "--input", "patch_mask=2,x"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_profile_feeds_the_mask() -> None:
    result = profile_model(_vit(mask_token=True), request=MASKED, warmup=0, iters=1, threads=1)
    masked = vitprof.analyze(_vit(mask_token=True), request=MASKED)
    assert sum(op.vector_flops for op in result.ops) == masked.totals.vector_flops


def test_crosscheck_counts_the_masked_forward() -> None:
    check = run_crosscheck(_vit(mask_token=True), peers=["flopcounter-meta"], request=MASKED)
    plain = vitprof.analyze(_vit(mask_token=True), request=PLAIN)
    assert check.vitprof.vector_flops - plain.totals.vector_flops == BLEND_FLOPS
    rows = {row.peer: row for row in check.rows}
    assert rows["flopcounter-meta"].macs == check.vitprof.macs


def test_a_budget_checked_with_the_mask(factory: str) -> None:
    budget = parse_budget("masked", {"model": factory, "max_macs": 10**12})
    masked = at_input(budget, InputRequest(patch_mask=(1, PATCHES)))
    assert masked.input_override == "patch_mask 1x16"
    outcome = evaluate(masked)
    assert [(i.name, i.shape, i.dtype) for i in outcome.profile.inputs][-1] == (
        "bool_masked_pos", (1, PATCHES), "bool")


SIZED_FACTORY = f"""
import transformers


def masked(image_size={PIXELS}):
    config = transformers.ViTConfig(hidden_size={WIDTH}, num_hidden_layers=2,
                                    num_attention_heads=2, intermediate_size=128,
                                    image_size=image_size, patch_size={PATCH},
                                    encoder_stride={PATCH})
    return transformers.ViTModel(config, add_pooling_layer=False, use_mask_token=True)
"""


def test_the_report_sweep_rebuilds_the_mask_at_each_size(tmp_path: Path) -> None:
    path = tmp_path / "sized_vit.py"
    path.write_text(SIZED_FACTORY)
    name, masked = f"{path}:masked", InputRequest(patch_mask=(1, PATCHES))
    assert not_swept(masked, vitprof.analyze(name, request=masked), PATCH) == ""
    sweeps = [image_size_sweep(vitprof.analyze(name, request=r), PATCH, r)
              for r in (masked, InputRequest())]
    assert [p.value for p in sweeps[0].points] == [p.value for p in sweeps[1].points]
    assert sweeps[0].points[1].value > PIXELS  # a size other than the mask's own
    # at each size s the mask covers its (s / 8)^2 patches: 1 x (s / 8)^2 x (3 x 64 + 1) more
    for with_mask, without in zip(*(s.points for s in sweeps), strict=True):
        patches = (with_mask.value // PATCH) ** 2
        assert with_mask.totals.vector_flops - without.totals.vector_flops == \
            patches * (3 * WIDTH + 1)


def test_a_mask_over_other_patches_is_not_swept_and_says_why(factory: str) -> None:
    request = InputRequest(patch_mask=(1, PATCHES))
    profile = vitprof.analyze(factory, request=request)
    # the mask is over 16 patches of 8 pixels: at 4 pixels the 32 x 32 image has 8 x 8 = 64
    assert not_swept(request, profile, 4) == (
        "not swept: the patch mask covers 16 patches, not the 64 of the 32x32 input in 4-pixel "
        "patches, so it cannot be rebuilt at other sizes")


@pytest.mark.parametrize("model", ["vit_b_16", "hf:vit-base-patch16-224"])
def test_a_mask_for_a_model_without_a_mask_token_is_one_line(
    model: str, capsys: pytest.CaptureFixture
) -> None:
    assert main(["analyze", model, "--input", "patch_mask=1,196"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("vitprof: error: a patch mask needs a model with a mask token")
    with pytest.raises(UserError, match="ViTModel has none"):
        make_workload(_vit(mask_token=False), MASKED)
