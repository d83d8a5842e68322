"""The model's own input when its forward takes no image tensor (vitprof.models.forward_inputs):
built from the forward's parameter names and the config; totals held against FlopCounterMode
on the same input, computed here. Also: a missing optional package at build time, one line."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

import vitprof
from vitprof.cli.main import main
from vitprof.core.errors import UserError
from vitprof.workload import make_workload


def _flop_counter_macs(model: nn.Module, kwargs: dict[str, Any]) -> int:
    """FlopCounterMode over one eval forward; FLOPs = 2 x MACs."""
    model.eval().requires_grad_(False)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(**kwargs)
    return counter.get_total_flops() // 2


def test_token_ids_forward_gets_its_config_length_of_ids() -> None:
    """ImageGPT: ``forward(input_ids, ...)``, one id per pixel; fed to an image tensor it
    failed (an embedding wants Long ids)."""
    transformers = pytest.importorskip("transformers")
    config = transformers.ImageGPTConfig(n_embd=16, n_layer=2, n_head=2, n_positions=64,
                                         vocab_size=17)
    model = transformers.ImageGPTForImageClassification(config)  # CPU: its norms' weights are
    profile = vitprof.analyze(model)  # made by torch.Tensor(), which ignores a default device
    assert profile.input_shape == (1, 64)  # n_positions ids
    assert [(i.name, i.shape, i.dtype) for i in profile.inputs] == [("input_ids", (1, 64),
                                                                      "int64")]
    ids = torch.zeros(1, 64, dtype=torch.long, device="meta")
    assert profile.totals.macs == _flop_counter_macs(copy.deepcopy(model).to("meta"),
                                                     {"input_ids": ids})
    assert profile.self_checks == ()


def _siglip2(transformers: Any) -> nn.Module:
    config = transformers.Siglip2Config(
        vision_config={"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 2,
                       "num_attention_heads": 2, "num_patches": 16, "patch_size": 4},
        text_config={"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1,
                     "num_attention_heads": 2})
    return transformers.Siglip2ForImageClassification(config)


def test_patch_grid_forward_gets_patches_and_their_grid() -> None:
    """SigLIP 2 (NaFlex): ``forward(pixel_values, pixel_attention_mask, spatial_shapes)``, the
    pixels already cut into patches; an image tensor failed (a Linear met 32 columns)."""
    transformers = pytest.importorskip("transformers")
    model = _siglip2(transformers)  # on the CPU: the grid's sizes, made there, meet meta inputs
    profile = vitprof.analyze(model)
    # 16 patches of 3 x 4 x 4 = 48 values, on a 4 x 4 grid
    assert profile.input_shape == (1, 16, 48)
    assert [(i.name, i.shape, i.dtype) for i in profile.inputs] == [
        ("pixel_values", (1, 16, 48), "float32"), ("spatial_shapes", (1, 2), "int64")]
    oracle = copy.deepcopy(model).to("meta")
    grid = torch.full((1, 2), 4, dtype=torch.long)  # read by the forward: a real tensor
    assert profile.totals.macs == _flop_counter_macs(
        oracle, {"pixel_values": torch.empty(1, 16, 48, device="meta"), "spatial_shapes": grid})
    with torch.device("meta"):
        on_meta = _siglip2(transformers)
    assert vitprof.analyze(on_meta).totals == profile.totals


def test_a_config_num_frames_makes_a_video_only_for_a_video_model() -> None:
    """Perceiver's config has ``num_frames`` (16, for its multimodal autoencoder): its image
    classifier was fed 1x16x3xHxW and failed; it takes 1x3xHxW."""
    transformers = pytest.importorskip("transformers")
    config = transformers.PerceiverConfig(
        num_latents=8, d_latents=16, d_model=16, num_blocks=1, num_self_attends_per_block=1,
        num_self_attention_heads=2, num_cross_attention_heads=1, image_size=8, num_labels=5)
    assert config.num_frames == 16
    model = transformers.PerceiverForImageClassificationLearned(config)
    profile = vitprof.analyze(model)  # on meta its mask's .all() fails: the CPU fallback runs
    assert profile.input_shape == (1, 3, 8, 8)
    # on the CPU too: transformers tests a mask it builds for all ones, no value on meta
    assert profile.totals.macs == _flop_counter_macs(copy.deepcopy(model),
                                                     {"inputs": torch.zeros(1, 3, 8, 8)})


class Prompted(nn.Module):
    """A vision-language forward: a prompt of token ids with image tokens, and the pixels."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, input_ids: torch.Tensor, pixel_values: torch.Tensor) -> torch.Tensor:
        return self.proj(pixel_values)


def test_a_vision_language_forward_is_refused_in_one_line() -> None:
    """ShieldGemma 2's layout: ``forward(input_ids, pixel_values, ...)``."""
    with pytest.raises(UserError, match="Prompted is a vision-language model") as refused:
        make_workload(Prompted())
    assert "\n" not in str(refused.value)
    given = {"input_ids": torch.zeros(1, 4, dtype=torch.long),
             "pixel_values": torch.zeros(1, 3, 4, 4)}
    assert make_workload(Prompted(), inputs=given).inputs.position == "pixel_values"


def test_a_size_asked_of_a_forward_without_an_image_is_refused() -> None:
    transformers = pytest.importorskip("transformers")
    with torch.device("meta"):
        model = _siglip2(transformers)
    with pytest.raises(UserError, match=r"takes pixel_values of config: 16 patches.*image_size"):
        make_workload(model, image_size=64)


MISSING = '''
def build(image_size=224, num_classes=1000):
    raise ImportError("\\nFancyNet requires the natten library but it was not found in your "
                      "environment. You can install it by referring to:\\nshi-labs.com/natten")
'''


def test_a_build_missing_an_optional_package_is_one_line(tmp_path: Path, capsys) -> None:
    """transformers' requires_backends text (DiNAT without natten): its first line stopped
    mid-sentence ("... referring to") and did not say a package was missing."""
    factory = tmp_path / "fancy.py"
    factory.write_text(MISSING)
    assert main(["analyze", f"{factory}:build"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == (
        f"vitprof: error: building {factory}:build failed: a missing optional package: "
        "FancyNet requires the natten library but it was not found in your environment\n")


def test_dinat_without_natten_is_a_missing_package(tmp_path: Path, capsys) -> None:
    pytest.importorskip("transformers")
    try:
        import natten  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("natten is installed")
    config = tmp_path / "dinat.json"
    config.write_text(json.dumps({"model_type": "dinat"}))
    assert main(["analyze", f"hf:{config}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "a missing optional package" in err
    assert "requires the natten library" in err


def test_token_ids_given_as_inputs_are_the_input() -> None:
    """Integer ``(batch, length)`` ids given are the input (no channel axis); refused before."""
    transformers = pytest.importorskip("transformers")
    config = transformers.ImageGPTConfig(n_embd=16, n_layer=1, n_head=2, n_positions=64,
                                         vocab_size=17)
    model = transformers.ImageGPTForImageClassification(config)
    given = vitprof.analyze(model, inputs={"input_ids": torch.zeros(1, 32, dtype=torch.long)})
    assert given.input_shape == (1, 32)
    ids = torch.zeros(1, 32, dtype=torch.long, device="meta")
    assert given.totals.macs == _flop_counter_macs(copy.deepcopy(model).to("meta"),
                                                   {"input_ids": ids})


IMAGE_GPT = """
import transformers


def build(image_size=None, num_classes=None):
    config = transformers.ImageGPTConfig(n_embd=16, n_layer=1, n_head=2, n_positions=64,
                                         vocab_size=17)
    return transformers.ImageGPTForImageClassification(config)
"""


def test_token_ids_in_the_json(tmp_path: Path, capsys) -> None:
    """The JSON's input_shape is (batch, length): the schema took 3 or more sizes only."""
    pytest.importorskip("transformers")
    factory = tmp_path / "image_gpt.py"
    factory.write_text(IMAGE_GPT)
    assert main(["analyze", f"{factory}:build", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["input_shape"] == [1, 64]
    assert data["inputs"] == [{"name": "input_ids", "shape": [1, 64], "dtype": "int64"}]
    assert data["input_source"] == "config: 64 token ids"


def test_crosscheck_names_a_token_input(tmp_path: Path, capsys) -> None:
    """Its header unpacked four sizes (batch, channels, height, width): a traceback on ids."""
    pytest.importorskip("transformers")
    factory = tmp_path / "image_gpt.py"
    factory.write_text(IMAGE_GPT)
    assert main(["crosscheck", f"{factory}:build", "--peers", "flopcounter-meta"]) == 0
    assert "input: batch 1, 64, int64;" in capsys.readouterr().out  # token ids, dtype stated
