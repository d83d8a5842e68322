"""``vitprof memory``'s attention setting: ``auto`` (the default) runs the kernel torch
dispatches to on the target, and a named path acts on every ``scaled_dot_product_attention``
call, also those made inside ``nn.MultiheadAttention`` (torchvision's ViTs, open_clip) and HF's
attention interface; where no SDPA ran, a named path is one warning (issue 33)."""

from __future__ import annotations

import pytest
import torch
from timm.models.vision_transformer import VisionTransformer as TimmViT
from torch import nn
from torchvision.models import VisionTransformer as TorchvisionViT

from vitprof import memory
from vitprof.cli.main import main
from vitprof.measure.memory.attention_kernels import NO_CALL, cpu_rule, cuda_rule
from vitprof.workload import InputRequest

# 64 x 64 images in 8 x 8 patches: 64 patches + a class token = 65 tokens; width 16 in 2 heads
# of 8, 2 blocks. The probabilities (65 x 65 per head) outweigh the 8-wide output and the
# log-sum-exp a fused kernel keeps instead, as at ViT-B's 197 tokens and 64-wide heads.
TOKENS, HEADS, BLOCKS, BATCH = 65, 2, 2, 2
# what the math path keeps beyond a fused kernel, at least: each block's probabilities, float32,
# less the float32 log-sum-exp per query the fused kernel keeps instead of them
PROBABILITIES = BLOCKS * BATCH * HEADS * TOKENS**2 * 4  # 2 * 2 * 2 * 4225 * 4 = 135_200
LOG_SUM_EXP = BLOCKS * BATCH * HEADS * TOKENS * 4  # 2 * 2 * 2 * 65 * 4 = 2_080


def torchvision_vit() -> nn.Module:
    """torchvision's ViT: its attention is nn.MultiheadAttention, whose SDPA call is made
    inside F.multi_head_attention_forward."""
    torch.manual_seed(0)
    return TorchvisionViT(image_size=64, patch_size=8, num_layers=BLOCKS, num_heads=HEADS,
                          hidden_dim=16, mlp_dim=32, num_classes=10)


def hf_vit(implementation: str = "sdpa") -> nn.Module:
    """transformers' ViT built from a config (no weights), its attention interface
    ``implementation`` (sdpa: torch.nn.functional.scaled_dot_product_attention by module
    reference; eager: softmax(QK^T)V written out)."""
    from transformers import ViTConfig, ViTForImageClassification

    torch.manual_seed(0)
    config = ViTConfig(image_size=64, patch_size=8, num_hidden_layers=BLOCKS,
                       num_attention_heads=HEADS, hidden_size=16, intermediate_size=32,
                       num_labels=10)
    return ViTForImageClassification._from_config(config, attn_implementation=implementation)


def timm_vit(**kwargs: float) -> nn.Module:
    """timm's ViT (DeiT's blocks), calling F.scaled_dot_product_attention directly."""
    torch.manual_seed(0)
    return TimmViT(img_size=64, patch_size=8, embed_dim=16, depth=BLOCKS, num_heads=HEADS,
                   num_classes=10, **kwargs)  # type: ignore[arg-type]


class ExplicitAttention(nn.Module):
    """Single-head attention written as softmax(QK^T)V: no SDPA call."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(8, 16)
        self.qkv = nn.Linear(16, 48)
        self.head = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x)
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        x = (q @ k.transpose(-2, -1) / 4).softmax(-1) @ v
        return self.head(x.mean(1))


@pytest.mark.parametrize("build", [torchvision_vit, hf_vit, timm_vit],
                         ids=["nn.MultiheadAttention", "hf-sdpa", "timm"])
def test_the_math_path_keeps_the_probabilities_wherever_sdpa_is_called(build) -> None:
    """main ran torch's own choice (the CPU's fused kernel) under nn.MultiheadAttention and HF's
    interface whatever the setting: math and flash saved the same bytes."""
    math = memory(build(), InputRequest(batch_size=BATCH, image_size=64), target="cpu",
                  attention="math")
    flash = memory(build(), InputRequest(batch_size=BATCH, image_size=64), target="cpu",
                   attention="flash")
    assert math.saved_bytes - flash.saved_bytes >= PROBABILITIES - LOG_SUM_EXP
    assert (math.settings["attention"], flash.settings["attention"]) == ("math", "flash")


def test_auto_is_the_default_and_names_the_cpus_fused_kernel() -> None:
    """DeiT-like float32 with no mask and no dropout: torch's CPU dispatch runs
    _scaled_dot_product_flash_attention_for_cpu; main modelled the math path by default."""
    auto = memory(timm_vit(), InputRequest(batch_size=BATCH, image_size=64), target="cpu")
    flash = memory(timm_vit(), InputRequest(batch_size=BATCH, image_size=64), target="cpu",
                   attention="flash")
    assert auto.settings["attention"] == \
        "flash (auto: the CPU's fused kernel applies to float32, no mask)"
    assert (auto.saved_bytes, auto.peak_bytes) == (flash.saved_bytes, flash.peak_bytes)
    assert auto.warnings == ()


def test_auto_takes_the_math_path_where_dropout_rules_the_fused_kernel_out() -> None:
    """timm passes its attention dropout to SDPA in training; the CPU's fused kernel takes
    none (sdp_utils_cpp's check_for_dropout), so torch runs the math path."""
    dropping = memory(timm_vit(attn_drop_rate=0.1), InputRequest(batch_size=BATCH, image_size=64),
                      target="cpu")
    assert dropping.settings["attention"] == \
        "math (auto: the CPU's fused kernel takes no dropout (p=0.1))"


def test_auto_on_cuda_is_efficient_for_float32_and_flash_under_bfloat16_autocast() -> None:
    """Modelled (not measured): CUDA's flash kernel takes float16 and bfloat16 only."""
    fp32 = memory(timm_vit(), InputRequest(batch_size=BATCH, image_size=64), target="cuda")
    bf16 = memory(timm_vit(), InputRequest(batch_size=BATCH, image_size=64), target="cuda",
                  amp="bfloat16")
    assert fp32.settings["attention"] == \
        "efficient (auto: flash takes float16 or bfloat16, not float32)"
    assert bf16.settings["attention"] == "flash (auto: bfloat16, head dim 8 <= 256, no mask)"


def _qkv(dtype: torch.dtype = torch.float32, dim: int = 8) -> torch.Tensor:
    return torch.randn(2, 3, 5, dim, dtype=dtype)


# (case, query, key, value, mask, dropout): conditions torch's CPU dispatch weighs
CPU_CASES = [
    ("float32", _qkv(), _qkv(), _qkv(), None, 0.0),
    ("bfloat16", _qkv(torch.bfloat16), _qkv(torch.bfloat16), _qkv(torch.bfloat16), None, 0.0),
    ("float16", _qkv(torch.float16), _qkv(torch.float16), _qkv(torch.float16), None, 0.0),
    ("float64", _qkv(torch.float64), _qkv(torch.float64), _qkv(torch.float64), None, 0.0),
    ("bool mask", _qkv(), _qkv(), _qkv(), torch.ones(5, 5, dtype=torch.bool), 0.0),
    ("float mask", _qkv(), _qkv(), _qkv(), torch.zeros(2, 3, 5, 5), 0.0),
    ("dropout", _qkv(), _qkv(), _qkv(), None, 0.1),
    ("head dim 300", _qkv(dim=300), _qkv(dim=300), _qkv(dim=300), None, 0.0),
    ("value head dim differs", _qkv(), _qkv(), _qkv(dim=4), None, 0.0),
    ("last-dim stride 5", _qkv().transpose(-1, -2).contiguous().transpose(-1, -2)[..., :5, :],
     _qkv(), _qkv(), None, 0.0),
]
BACKENDS = {0: "math", 1: "flash"}  # torch.nn.attention.SDPBackend's values on the CPU


@pytest.mark.parametrize(("query", "key", "value", "mask", "dropout"),
                         [case[1:] for case in CPU_CASES], ids=[case[0] for case in CPU_CASES])
def test_the_cpu_rule_is_torchs_dispatch(query, key, value, mask, dropout) -> None:
    """cpu_rule picks what torch._fused_sdp_choice picks for real CPU tensors."""
    torchs = torch._fused_sdp_choice(query, key, value, attn_mask=mask, dropout_p=dropout)
    assert cpu_rule(query, key, value, mask, dropout)[0] == BACKENDS[torchs]


def test_the_cpu_rule_follows_flash_disabled_by_sdpa_kernel() -> None:
    """Under sdpa_kernel(MATH) torch's CPU dispatch takes the math path; so does the rule."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q = _qkv()
    with sdpa_kernel(SDPBackend.MATH):
        assert BACKENDS[torch._fused_sdp_choice(q, q, q)] == cpu_rule(q, q, q)[0] == "math"


@pytest.mark.slow
def test_vit_b_16_keeps_every_blocks_probabilities_under_math() -> None:
    """Issue 33's figure: torchvision's vit_b_16 (nn.MultiheadAttention) at batch 1, math
    against flash, at least 12 blocks x 12 heads x 197^2 x 4 B more saved (main: equal)."""
    from torchvision.models import vit_b_16

    model = vit_b_16()
    math = memory(model, target="cpu", attention="math")
    flash = memory(model, target="cpu", attention="flash")
    assert math.saved_bytes - flash.saved_bytes >= 12 * 12 * 197**2 * 4  # 22_353_408


def test_the_cuda_rule_by_dtype_head_dim_and_mask() -> None:
    """sdp_utils.cpp's order, modelled: flash, else efficient, else math."""
    half, single = _qkv(torch.float16), _qkv()
    wide = _qkv(torch.float16, dim=320)
    assert cuda_rule(half, half, half)[0] == "flash"
    assert cuda_rule(half, half, half, torch.zeros(5, 5))[0] == "efficient"  # a mask
    assert cuda_rule(wide, wide, wide)[0] == "efficient"  # head dim 320 > 256
    assert cuda_rule(single, single, single)[0] == "efficient"
    double = _qkv(torch.float64)
    assert cuda_rule(double, double, double)[0] == "math"


def test_a_named_path_with_no_sdpa_to_act_on_warns_once(capsys) -> None:
    """Explicit softmax(QK^T)V: main said nothing; auto names what ran, without a warning."""
    model, shape = ExplicitAttention(), (4, 6, 8)
    flash = memory(model, InputRequest(input_shape=shape), target="cpu", attention="flash")
    auto = memory(model, InputRequest(input_shape=shape), target="cpu")
    assert len(flash.warnings) == 1 and "attention flash changed nothing" in flash.warnings[0]
    assert auto.warnings == () and auto.settings["attention"] == NO_CALL
    fitted = memory(model, InputRequest(input_shape=shape), target="cpu", attention="math",
                    fit=2**30)
    assert sum("changed nothing" in w for w in fitted.warnings) == 1  # once, --fit's runs aside


def test_the_settings_line_names_the_kernel_auto_chose(tmp_path, capsys) -> None:
    models = tmp_path / "models.py"
    models.write_text(
        "from timm.models.vision_transformer import VisionTransformer\n\n\n"
        "def tiny():\n"
        "    return VisionTransformer(img_size=64, patch_size=8, embed_dim=16, depth=2,\n"
        "                             num_heads=2, num_classes=10)\n")
    assert main(["memory", f"{models}:tiny", "--target", "cpu", "--batch-size", "2"]) == 0
    out = capsys.readouterr().out
    assert "attention flash (auto: the CPU's fused kernel applies to float32, no mask)" in out
