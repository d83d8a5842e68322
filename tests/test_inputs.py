"""Inputs of any kind: non-square images, videos, channels, dtypes, the inputs themselves,
flex_attention, compiled models, torchvision's Swin and MaxViT by name."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from vitprof import Component, Counts, UserError, analyze
from vitprof.cli.main import main
from vitprof.core.records import InputRecord
from vitprof.models.closed_form import ViTSpec, closed_form
from vitprof.render.formats import render
from vitprof.render.tables import profile_document


def _cli_json(argv: list[str], capsys) -> dict[str, Any]:
    code = main([*argv, "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def _flop_counter_macs(model: nn.Module, args: tuple, kwargs: dict) -> int:
    """torch's own count of the same forward on meta: FLOPs = 2 x MACs."""
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model.eval()(*args, **kwargs)
    return counter.get_total_flops() // 2


# ------------------------------------------------------------------ a non-square image


VIT_S_16_224x320 = ViTSpec(image_size=(224, 320), patch_size=16, width=384, depth=12, heads=6,
                          mlp_width=1536)
"""timm's vit_small_patch16_224 at 224 x 320: 224 / 16 = 14 rows x 320 / 16 = 20 columns = 280
patches, + 1 class token = 281 tokens."""


def _assert_the_closed_form(data: dict[str, Any], spec: ViTSpec) -> None:
    """Per component and per block, the JSON of ``analyze`` equals ``closed_form(spec)``."""
    form = closed_form(spec)
    assert {c: Counts(**{k: v[k] for k in ("params", "macs", "vector_flops")})
            for c, v in data["components"].items()} == {str(c): v
                                                         for c, v in form.components.items()}
    assert [{c: v["macs"] for c, v in b["components"].items()} for b in data["blocks"]] == [
        {str(c): v.macs for c, v in block.items()} for block in form.blocks]


def test_timm_at_224x320_equals_the_closed_form_with_281_tokens(capsys) -> None:
    pytest.importorskip("timm")
    data = _cli_json(["analyze", "timm:vit_small_patch16_224", "--image-size", "224x320"],
                     capsys)
    assert data["input_shape"] == [1, 3, 224, 320]
    assert VIT_S_16_224x320.num_patches + 1 == 14 * 20 + 1 == 281
    _assert_the_closed_form(data, VIT_S_16_224x320)
    # the attention core of 281 tokens: QK^T and AV, 2 x 281^2 x 384 MACs in each of 12 blocks
    assert data["components"]["attn_core"]["macs"] == 12 * 2 * 281 * 281 * 384


def test_an_input_shape_builds_timm_at_its_size_the_closed_form_of_281_tokens(capsys) -> None:
    pytest.importorskip("timm")
    data = _cli_json(["analyze", "timm:vit_small_patch16_224", "--input-shape", "1,3,224,320"],
                     capsys)
    assert data["input_shape"] == [1, 3, 224, 320] and data["warnings"] == []
    _assert_the_closed_form(data, VIT_S_16_224x320)  # 14 x 20 + 1 = 281 tokens


def test_an_input_shape_builds_a_zoo_model_at_its_size() -> None:
    # vit_b_16 is built for 384: 24 x 24 = 576 patches + 1 position rows (the same as asking
    # for image_size 384), two images
    shaped = analyze("vit_b_16", input_shape=(2, 3, 384, 384))
    sized = analyze("vit_b_16", image_size=384, batch_size=2)
    assert shaped.input_shape == (2, 3, 384, 384)
    assert shaped.components == sized.components
    assert shaped.components[Component.TOKENS].params == (1 + 24 * 24 + 1) * 768


def test_an_input_shape_a_square_only_model_cannot_be_built_for_is_fed_as_it_is(
    capsys
) -> None:
    # torchvision's vit_b_16 takes one int: built at 224, it rejects 224 x 320 in one line
    code = main(["analyze", "vit_b_16", "--input-shape", "1,3,224,320"])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "Wrong image width! Expected 224 but got 320!" in err
    assert "(input of shape 1x3x224x320, on meta)" in err


def test_an_input_shape_the_builder_refuses_is_fed_to_the_own_size_with_a_warning(
    tmp_path: Path
) -> None:
    # a factory that raises at any other size: built at its own 32 x 32, the model (a 1x1 conv,
    # any size) is fed 1 x 3 x 40 x 40, and a warning names the refusal
    source = tmp_path / "fixed.py"
    source.write_text(
        "import torch\n"
        "def make(image_size=32):\n"
        "    if image_size not in (32, (32, 32)):\n"
        "        raise ValueError(f'only 32, not {image_size}')\n"
        "    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 1), torch.nn.Flatten(2))\n")
    profile = analyze(f"{source}:make", input_shape=(1, 3, 40, 40))
    assert profile.input_shape == (1, 3, 40, 40)
    assert profile.totals.macs == 40 * 40 * 3 * 4  # the 1x1 conv on every pixel
    assert any("built at its own size, fed the input shape 1x3x40x40 as it is: building it "
               "for that shape failed" in w and "only 32, not 40" in w
               for w in profile.warnings)


def test_a_square_pair_is_the_square_image() -> None:
    # note002_cifar_vit_tiny takes one int; (32, 32) is that int, not a non-square size
    assert analyze("note002_cifar_vit_tiny", image_size=(32, 32)).totals == analyze(
        "note002_cifar_vit_tiny", image_size=32).totals


# ------------------------------------------------------------------ video


def _video_config(model_type: str, path: Path) -> str:
    """A small config: 32 x 32 frames of 8 x 8 patches, width 32, 2 blocks, 4 frames."""
    shared = {"image_size": 32, "num_channels": 3, "num_frames": 4, "hidden_size": 32,
              "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64,
              "num_labels": 5}
    own = {"videomae": {"patch_size": 8, "tubelet_size": 2},
           "vivit": {"tubelet_size": [2, 8, 8]},
           "timesformer": {"patch_size": 8}}[model_type]
    path.write_text(json.dumps({"model_type": model_type, **shared, **own}))
    return f"hf:{path}"


@pytest.mark.parametrize("model_type", ["videomae", "vivit", "timesformer"])
def test_video_transformers_count_at_16_frames_like_flopcounter(
    model_type: str, tmp_path: Path, capsys
) -> None:
    transformers = pytest.importorskip("transformers")
    name = _video_config(model_type, tmp_path / "config.json")
    own = _cli_json(["analyze", name], capsys)
    assert own["input_shape"] == [1, 4, 3, 32, 32]  # the config's num_frames, frames first
    data = _cli_json(["analyze", name, "--frames", "16"], capsys)
    assert data["input_shape"] == [1, 16, 3, 32, 32]
    assert data["inputs"] == [{"name": "args[0]", "shape": [1, 16, 3, 32, 32],
                               "dtype": "float32"}]
    config = transformers.AutoConfig.for_model(**json.loads((tmp_path / "config.json")
                                                            .read_text()))
    config.num_frames = 16
    with torch.device("meta"):
        oracle = transformers.AutoModelForVideoClassification.from_config(config)
    x = torch.empty(1, 16, 3, 32, 32, device="meta")
    assert data["totals"]["macs"] == _flop_counter_macs(oracle, (x,), {})
    assert data["totals"]["params"] == sum(p.numel() for p in oracle.parameters())
    # the patch or tubelet embedding: 16 frames x 16 patches of 8 x 8 x 3 pixels, width 32,
    # whatever the tubelet depth (2 frames x half the tubelets is the same product)
    assert data["components"]["patch_embed"]["macs"] == 16 * 16 * 32 * (3 * 8 * 8) == 1_572_864


def test_a_video_input_shape_builds_the_model_for_its_frames(tmp_path: Path, capsys) -> None:
    pytest.importorskip("transformers")
    name = _video_config("videomae", tmp_path / "config.json")
    framed = _cli_json(["analyze", name, "--frames", "16"], capsys)
    # B, T, C, H, W: the layout transformers' video models declare; 16 frames, not the config's 4
    shaped = _cli_json(["analyze", name, "--input-shape", "1,16,3,32,32"], capsys)
    assert shaped["input_shape"] == [1, 16, 3, 32, 32] and shaped["warnings"] == []
    assert shaped["components"] == framed["components"]


def test_frames_given_to_an_image_model_is_one_line_naming_the_shape(capsys) -> None:
    code = main(["analyze", "note002_cifar_vit_tiny", "--frames", "16"])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "(input of shape 1x3x16x32x32, on meta)" in err


class TimeAxisOfOne(nn.Module):
    """A video-language model's vision tower: images of B, 3, H, W get a time axis of 1 and a
    Conv3d over 1 x 4 x 4 tubes, 8 channels; it declares nothing of its input."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Conv3d(3, 8, kernel_size=(1, 4, 4), stride=(1, 4, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x.unsqueeze(2)).flatten(2).transpose(1, 2)


def test_a_conv3d_over_a_time_axis_of_one_is_fed_the_image_size_given() -> None:
    profile = analyze(TimeAxisOfOne(), image_size=32)
    assert profile.input_shape == (1, 3, 32, 32)  # an image: the size given wins
    # 3 x 1 x 4 x 4 x 8 weights + 8 biases = 392 params; (32 / 4)^2 = 64 tubes x 8 channels x
    # 48 values = 24,576 MACs
    assert profile.totals.params == 3 * 1 * 4 * 4 * 8 + 8 == 392
    assert profile.totals.macs == 64 * 8 * 48 == 24_576
    assert "frames" not in profile.input_source


def test_a_declared_video_keeps_its_frames_at_an_image_size_given(
    tmp_path: Path, capsys
) -> None:
    pytest.importorskip("transformers")
    name = _video_config("videomae", tmp_path / "config.json")
    data = _cli_json(["analyze", name, "--image-size", "16"], capsys)
    assert data["input_shape"] == [1, 4, 3, 16, 16]  # the config's 4 frames, frames first


class PositionsFor64(nn.Module):
    """8 x 8-pixel patches and a position table of 64 = 8 x 8 patches: a 64 x 64 image by its
    length, though nothing declares a size."""

    def __init__(self) -> None:
        super().__init__()
        self.patch = nn.Conv2d(3, 8, kernel_size=8, stride=8)
        self.pos_embed = nn.Parameter(torch.zeros(1, 64, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.patch(x).flatten(2).transpose(1, 2)


def test_the_input_line_names_the_position_guess_only_where_it_decided() -> None:
    given = analyze(PositionsFor64(), image_size=(32, 128))
    assert given.input_shape == (1, 3, 32, 128)
    assert given.input_source == ("image size given; guessed 3 channels from the first "
                                  "convolution the image reaches")
    guessed = analyze(PositionsFor64())
    assert guessed.input_shape == (1, 3, 64, 64)
    assert guessed.input_source.startswith(
        "nothing declared; guessed 64x64 from the position embedding's length")


# ------------------------------------------------------------------ dtypes


def test_bfloat16_keeps_the_macs_and_halves_the_bytes() -> None:
    single = analyze("note002_cifar_vit_tiny")
    half = analyze("note002_cifar_vit_tiny", dtype=torch.bfloat16)
    assert analyze("note002_cifar_vit_tiny", dtype="bfloat16").totals == half.totals
    assert half.totals == single.totals
    assert half.inputs == (InputRecord("args[0]", (1, 3, 32, 32), "bfloat16"),)
    assert len(half.ops) == len(single.ops)
    for a, b in zip(single.ops, half.ops, strict=True):
        assert a.bytes_read == 2 * b.bytes_read, a
        if a.op != "aten.native_layer_norm":  # its mean and rstd stay float32
            assert a.bytes_written == 2 * b.bytes_written, a


def test_a_model_in_bfloat16_runs_in_bfloat16() -> None:
    model = nn.Sequential(nn.Conv2d(3, 8, 4, stride=4), nn.Flatten(2)).to(torch.bfloat16)
    profile = analyze(model, image_size=8)
    assert profile.inputs == (InputRecord("args[0]", (1, 3, 8, 8), "bfloat16"),)
    assert profile.totals.macs == 2 * 2 * 8 * (3 * 4 * 4)  # 2 x 2 patches x 8 x 48 inputs
    with pytest.raises(UserError, match="the model's parameters are bfloat16; convert it"):
        analyze(model, image_size=8, dtype="float16")


# ------------------------------------------------------------------ the inputs themselves


class TwoInputs(nn.Module):
    """A patch conv on an image, plus a learned scale times a second tensor."""

    def __init__(self) -> None:
        super().__init__()
        self.patch_embed = nn.Conv2d(3, 8, 4, stride=4)
        self.mix = nn.Linear(8, 8)

    def forward(self, image: torch.Tensor, extra: torch.Tensor, *, gain: float = 1.0):
        tokens = self.patch_embed(image).flatten(2).transpose(1, 2)
        return self.mix(tokens * gain + extra)


# 4 x 4 patches of 4 x 4 x 3 pixels on a 16 x 16 image: 16 x 8 x 48 = 6_144; mix 16 x 8 x 8
TWO_INPUTS_MACS = 16 * 8 * 48 + 16 * 8 * 8


@pytest.mark.parametrize(
    "inputs",
    [
        pytest.param((torch.zeros(1, 3, 16, 16), torch.zeros(1, 16, 8)), id="tuple"),
        pytest.param(lambda device, dtype: ((torch.zeros(1, 3, 16, 16, device=device,
                                                          dtype=dtype),),
                                            {"extra": torch.zeros(1, 16, 8, device=device)}),
                     id="callable"),
    ],
)
def test_given_inputs_are_fed_on_meta(inputs: Any) -> None:
    profile = analyze(TwoInputs(), inputs=inputs)
    assert profile.device == "meta" and profile.input_shape == (1, 3, 16, 16)
    assert profile.totals.macs == TWO_INPUTS_MACS
    names = [i.name for i in profile.inputs]
    assert names in (["args[0]", "args[1]"], ["args[0]", "extra"])
    assert profile.inputs[1].shape == (1, 16, 8)


def test_a_tensor_given_on_the_cpu_is_remade_on_meta() -> None:
    model = nn.Conv2d(3, 8, 4, stride=4)
    profile = analyze(model, inputs=torch.ones(2, 3, 8, 12))
    assert profile.device == "meta" and profile.input_shape == (2, 3, 8, 12)
    assert profile.totals.macs == 2 * 2 * 3 * 8 * (3 * 4 * 4)  # 2 images x 2 x 3 patches


def test_an_inputs_callable_that_raises_is_one_line_naming_it() -> None:
    def broken_inputs(device: str, dtype: torch.dtype) -> torch.Tensor:
        raise RuntimeError("no data here\nsecond line")

    with pytest.raises(UserError) as caught:
        analyze(TwoInputs(), inputs=broken_inputs)
    message = str(caught.value)
    assert "\n" not in message
    assert message == ("the inputs callable test_an_inputs_callable_that_raises_is_one_line_"
                       "naming_it.<locals>.broken_inputs failed: RuntimeError: no data here")


def test_a_hugging_face_vit_with_a_masked_positions_dict() -> None:
    transformers = pytest.importorskip("transformers")
    config = transformers.ViTConfig(image_size=32, patch_size=8, hidden_size=32,
                                    num_hidden_layers=2, num_attention_heads=2,
                                    intermediate_size=64, attn_implementation="sdpa")
    model = transformers.ViTModel(config, add_pooling_layer=False, use_mask_token=True)
    pixels = torch.randn(1, 3, 32, 32)
    mask = torch.zeros(1, 16, dtype=torch.bool)  # 4 x 4 patches
    profile = analyze(model, inputs={"pixel_values": pixels, "bool_masked_pos": mask})
    assert profile.inputs == (InputRecord("pixel_values", (1, 3, 32, 32), "float32"),
                              InputRecord("bool_masked_pos", (1, 16), "bool"))
    meta = {"pixel_values": pixels.to("meta"), "bool_masked_pos": mask.to("meta")}
    with torch.device("meta"):
        oracle = transformers.ViTModel(config, add_pooling_layer=False, use_mask_token=True)
    assert profile.totals.macs == _flop_counter_macs(oracle, (), meta)
    assert profile.totals.params == sum(p.numel() for p in model.parameters())
    assert any(p.name == "embeddings.mask_token" for p in profile.params)
    line = render(profile_document(profile)).splitlines()[1]
    assert line.startswith("input: batch 1, 3x32x32 (pixel_values 1x3x32x32 float32, "
                           "bool_masked_pos 1x16 bool); device meta")


# ------------------------------------------------------------------ flex_attention


class FlexBlock(nn.Module):
    """q, k, v from one linear, flex_attention over 2 heads, an output projection."""

    def __init__(self, score_mod: Callable | None = None, width: int = 16, heads: int = 2):
        super().__init__()
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.heads, self.score_mod = heads, score_mod

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from torch.nn.attention.flex_attention import flex_attention

        b, n, d = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        out = flex_attention(q, k, v, score_mod=self.score_mod)
        return self.proj(out.transpose(1, 2).reshape(b, n, d))


def _relative_bias(score, batch, head, q_index, kv_index):
    return score + (q_index - kv_index)


@pytest.mark.parametrize(("score_mod", "per_score"), [
    pytest.param(None, 1 + 5, id="plain"),  # scale 1, softmax 5
    pytest.param(_relative_bias, 1 + 5 + 1, id="score-mod"),  # + 1 like SDPA's mask
])
def test_flex_attention_is_priced_like_sdpa_on_meta(score_mod: Any, per_score: int) -> None:
    pytest.importorskip("torch.nn.attention.flex_attention")
    profile = analyze(FlexBlock(score_mod), inputs=torch.zeros(1, 8, 16))
    assert profile.device == "meta" and profile.fallback is None
    (flex,) = [op for op in profile.ops if "flex_attention" in op.op]
    scores = 2 * 8 * 8  # 2 heads x 8 queries x 8 keys
    assert flex.macs == scores * 8 + scores * 8 == 2_048  # QK^T and AV, head width 8
    assert flex.vector_flops == scores * per_score
    # qkv 8 x 16 x 48, proj 8 x 16 x 16, and the attention
    assert profile.totals.macs == 8 * 16 * 48 + 8 * 16 * 16 + 2_048
    assert not profile.unsupported_ops


MASKED_FLEX_PY = '''
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention.flex_attention import create_block_mask, flex_attention


def _causal(batch, head, q_index, kv_index):
    return q_index >= kv_index


class F0(nn.Module):
    """Its forward builds its own block mask, on the input's device, then flex_attention."""

    def __init__(self, width=16, heads=2):
        super().__init__()
        self.f0 = nn.Linear(width, 3 * width)
        self.f1 = nn.Linear(width, width)
        self.g0 = heads

    def forward(self, x):
        b, n, d = x.shape
        mask = create_block_mask(_causal, None, None, n, n, device=x.device)
        q, k, v = self.f0(x).reshape(b, n, 3, self.g0, d // self.g0).permute(2, 0, 3, 1, 4)
        out = flex_attention(q, k, v, block_mask=mask)
        return self.f1(out.transpose(1, 2).reshape(b, n, d))


def f0():
    return F0()
'''


def test_flex_attention_with_a_mask_built_in_the_forward_of_a_file_runs_on_meta(
    tmp_path: Path,
) -> None:
    """A ``FILE.py:factory`` is loaded outside ``sys.modules``: its ``flex_attention`` is priced
    all the same, so the meta run needs no fallback."""
    pytest.importorskip("torch.nn.attention.flex_attention")
    path = tmp_path / "masked_flex.py"
    path.write_text(MASKED_FLEX_PY)
    profile = analyze(f"{path}:f0", input_shape=(1, 8, 16))
    assert profile.device == "meta" and profile.fallback is None
    (flex,) = [op for op in profile.ops if "flex_attention" in op.op]
    assert flex.macs == 2 * 8 * 8 * 8 * 2 == 2_048  # 2 heads x 8 x 8 scores x width 8, QK and AV
    # f0: 8 tokens x 16 x 48, f1: 8 x 16 x 16, and the attention
    assert profile.totals.macs == 8 * 16 * 48 + 8 * 16 * 16 + 2_048 == 10_240


def _rotary_angles(length: int, width: int) -> torch.Tensor:
    """The complex rotations of LLaMA-style rotary code: ``polar(1, position x frequency)``."""
    frequencies = 1.0 / 10_000 ** (torch.arange(0, width, 2).float() / width)
    return torch.polar(torch.ones(length, width // 2),
                       torch.outer(torch.arange(length).float(), frequencies))


class G0(nn.Module):
    """q, k, v from one linear; q and k rotated in complex numbers (``view_as_complex``, a
    complex multiply, ``view_as_real``); SDPA over 2 heads; an output linear."""

    def __init__(self, width: int = 16, heads: int = 2, length: int = 8):
        super().__init__()
        self.g0 = nn.Linear(width, 3 * width)
        self.g1 = nn.Linear(width, width)
        self.g2 = heads
        self.register_buffer("g3", _rotary_angles(length, width // heads), persistent=False)

    def _rotated(self, t: torch.Tensor) -> torch.Tensor:
        pairs = torch.view_as_complex(t.float().reshape(*t.shape[:-1], -1, 2))
        turned = pairs * self.g3.view(1, 1, *self.g3.shape)
        return torch.view_as_real(turned).flatten(3).type_as(t)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        q, k, v = self.g0(x).reshape(b, n, 3, self.g2, d // self.g2).permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(self._rotated(q), self._rotated(k), v)
        return self.g1(out.transpose(1, 2).reshape(b, n, d))


@pytest.mark.parametrize("device", ["meta", "cpu"])
def test_rotary_in_complex_numbers_is_counted_without_unsupported_ops(device: str) -> None:
    """Complex numbers as views of real pairs cost nothing; the complex multiply of the
    rotation is vector work (no MACs), so the MACs are those of the projections and the
    attention."""
    profile = analyze(G0(), inputs=torch.zeros(1, 8, 16), device=device)
    assert profile.device == device and profile.fallback is None
    assert not profile.unsupported_ops
    # g0: 8 tokens x 16 x 48; attention: 2 heads x 8 x 8 scores x width 8, QK and AV;
    # g1: 8 x 16 x 16
    assert profile.totals.macs == 8 * 16 * 48 + 2 * 8 * 8 * 8 * 2 + 8 * 16 * 16 == 10_240
    rotations = [op for op in profile.ops if op.op == "aten.mul"]  # the only multiplies
    # q and k: 2 heads x 8 tokens x 4 complex pairs, each (a + bi)(c + di): 4 multiplies, 2 adds
    assert [op.vector_flops for op in rotations] == [2 * 8 * 4 * 6] * 2


class G1(nn.Module):
    """A product of two complex activations: ``(x + ix) (x + ix)^T`` of a linear's output."""

    def __init__(self, width: int = 16):
        super().__init__()
        self.g0 = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pairs = torch.complex(self.g0(x), self.g0(x))
        return torch.view_as_real(pairs @ pairs.transpose(-1, -2))


def test_a_complex_matmul_costs_four_real_macs_per_complex_one() -> None:
    profile = analyze(G1(), inputs=torch.zeros(1, 8, 16))
    assert not profile.unsupported_ops
    (product,) = [op for op in profile.ops if op.op in ("aten.bmm", "aten.mm", "aten.matmul")]
    assert product.macs == 8 * 8 * 16 * 4  # 8 x 8 outputs of 16 complex MACs, 4 real MACs each
    assert profile.totals.macs == 2 * 8 * 16 * 16 + 8 * 8 * 16 * 4  # two calls of g0, the product


# ------------------------------------------------------------------ a compiled model


def test_a_compiled_model_is_counted_as_its_original_module() -> None:
    model = TwoInputs()
    compiled = torch.compile(model)
    inputs = (torch.zeros(1, 3, 16, 16), torch.zeros(1, 16, 8))
    profile = analyze(compiled, inputs=inputs)
    assert profile.model == "TwoInputs"
    assert profile.totals == analyze(model, inputs=inputs).totals
    assert profile.totals.macs == TWO_INPUTS_MACS
    assert ("a torch.compile'd model: counted its original module TwoInputs (_orig_mod), run "
            "eagerly") in profile.warnings


# ------------------------------------------------------------------ torchvision by name


@pytest.mark.parametrize("name", [
    "swin_t", pytest.param("swin_v2_t", marks=pytest.mark.slow),
    pytest.param("maxvit_t", marks=pytest.mark.slow),
])
def test_torchvision_vision_transformers_by_name(name: str) -> None:
    import torchvision.models as tvm

    profile = analyze(f"torchvision:{name}")
    # the parameter count torchvision publishes with its weights
    assert profile.totals.params == tvm.get_model_weights(name).DEFAULT.meta["num_params"]
    crop = tvm.get_model_weights(name).DEFAULT.transforms.keywords["crop_size"]
    assert profile.input_shape == (1, 3, crop, crop)
    assert profile.components[Component.OTHER].macs < profile.totals.macs


# ------------------------------------------------------------------ the command line


def test_cli_dtype_input_shape_and_channels(capsys) -> None:
    single = _cli_json(["analyze", "note002_cifar_vit_tiny"], capsys)
    assert single["inputs"] == [{"name": "args[0]", "shape": [1, 3, 32, 32], "dtype": "float32"}]
    half = _cli_json(["analyze", "note002_cifar_vit_tiny", "--dtype", "bfloat16"], capsys)
    assert half["totals"] == single["totals"]
    assert half["inputs"][0]["dtype"] == "bfloat16"
    shaped = _cli_json(["analyze", "note002_cifar_vit_tiny", "--input-shape", "2,3,32,32"],
                       capsys)
    assert shaped["input_shape"] == [2, 3, 32, 32] and shaped["input_source"] == (
        "input shape given")
    assert shaped["totals"]["macs"] == 2 * single["totals"]["macs"]  # two images


def test_cli_channels_build_a_timm_model_for_them(capsys) -> None:
    pytest.importorskip("timm")
    data = _cli_json(["analyze", "timm:vit_tiny_patch16_224", "--in-chans", "1"], capsys)
    assert data["input_shape"] == [1, 1, 224, 224]
    assert data["input_source"].startswith("channels given")
    # one-channel 16 x 16 patches, width 192: 14 x 14 patches x 192 x 256 MACs
    assert data["components"]["patch_embed"]["macs"] == 14 * 14 * 192 * (1 * 16 * 16)
    assert data["components"]["patch_embed"]["params"] == 16 * 16 * 192 + 192


@pytest.mark.slow
def test_timm_naflexvit_takes_its_patches_as_keywords() -> None:
    pytest.importorskip("timm")
    tokens, patch = 14 * 14, 16 * 16 * 3  # a 224 x 224 image as 196 flattened 16 x 16 patches
    rows, columns = torch.meshgrid(torch.arange(14), torch.arange(14), indexing="ij")
    inputs = {"x": torch.zeros(1, tokens, patch),
              "patch_coord": torch.stack([rows, columns], -1).reshape(1, tokens, 2),
              "patch_valid": torch.ones(1, tokens, dtype=torch.bool)}
    profile = analyze("timm:naflexvit_base_patch16_gap", inputs=inputs)
    assert [(i.name, i.shape, i.dtype) for i in profile.inputs] == [
        ("x", (1, 196, 768), "float32"), ("patch_coord", (1, 196, 2), "int64"),
        ("patch_valid", (1, 196), "bool")]
    # the linear patch embedding: 196 patches x 768 inputs x width 768
    assert profile.components[Component.PATCH_EMBED].macs == tokens * patch * 768


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"inputs": torch.zeros(1, 3, 32, 32), "frames": 4},
                     "inputs are given: they exclude frames", id="inputs-and-frames"),
        pytest.param({"inputs": torch.zeros(1, 3, 32, 32), "input_shape": (1, 3, 32, 32)},
                     "inputs are given: they exclude input_shape", id="inputs-and-shape"),
        pytest.param({"inputs": "pixels"}, "inputs must be a tensor, a tuple of tensors, a dict",
                     id="inputs-of-a-string"),
        pytest.param({"inputs": (torch.zeros(4, 5),)}, "inputs hold no tensor of 3 or more "
                     "dimensions", id="inputs-without-an-image"),
    ],
)
def test_given_inputs_are_refused_in_one_line(kwargs: dict, message: str) -> None:
    with pytest.raises(UserError, match=message) as caught:
        analyze(TwoInputs(), **kwargs)
    assert "\n" not in str(caught.value)
