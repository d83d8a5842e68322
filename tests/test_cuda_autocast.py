"""CUDA autocast's float32 policy emulated under CPU autocast
(vitprof/measure/memory/cuda_autocast.py), and what it changes in a ``target="cuda"``
prediction: the softmax of an attention computed as written runs in float32 (CUDA autocast's
fp32 list) where CPU autocast keeps bfloat16."""

from __future__ import annotations

import contextlib

import pytest
import torch
from timm.models.vision_transformer import VisionTransformer
from torch._subclasses.fake_tensor import FakeTensorMode

from vitprof import memory
from vitprof.measure.memory import step as memory_step
from vitprof.measure.memory.cuda_autocast import cuda_policy
from vitprof.workload import InputRequest


def _dtypes() -> dict[str, torch.dtype]:
    """The dtypes of a few ops of a bfloat16-autocast forward on fake CPU tensors."""
    fake = FakeTensorMode()
    with fake:
        x = torch.empty(2, 8, 16)
        w = torch.empty(16, 16, requires_grad=True)
        norm = torch.ones(16, requires_grad=True)
    with fake, torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ w
        return {"matmul": y.dtype, "softmax": y.softmax(-1).dtype,
                "softmax_bf16": torch.softmax(y, -1, dtype=torch.bfloat16).dtype,
                "layer_norm": torch.nn.functional.layer_norm(y, (16,), norm).dtype,
                "sum": y.sum().dtype, "exp": y.exp().dtype,
                "gelu": torch.nn.functional.gelu(y).dtype}


BF16, FP32 = torch.bfloat16, torch.float32
CPU = {"matmul": BF16, "softmax": BF16, "softmax_bf16": BF16, "layer_norm": BF16, "sum": BF16,
       "exp": BF16, "gelu": BF16}
# CUDA: softmax and sum in float32 unless a dtype is given; layer_norm and exp in float32;
# gelu in no list (the input's dtype); matmul in lower precision on both
CUDA = {**CPU, "softmax": FP32, "layer_norm": FP32, "sum": FP32, "exp": FP32}


def test_the_policy_casts_as_cuda_autocast_while_entered() -> None:
    assert _dtypes() == CPU
    with cuda_policy():
        assert _dtypes() == CUDA
    assert _dtypes() == CPU  # the kernels are gone on exit


def _tiny(explicit: bool) -> VisionTransformer:
    """2 blocks of 2 heads, width 64, 32 x 32 images in 8 x 8 patches: 17 tokens."""
    torch.manual_seed(0)
    model = VisionTransformer(img_size=32, patch_size=8, embed_dim=64, depth=2, num_heads=2,
                              num_classes=10)
    for block in model.blocks:
        block.attn.fused_attn = not explicit  # timm: q @ k^T, softmax, @ v as written
    return model


@pytest.mark.parametrize(("explicit", "more"), [
    # per block, batch 2 x 2 heads x 17 x 17 scores: the float32 softmax output the softmax
    # saves (4 bytes: 4,624, 5,120 in CUDA's 512-byte blocks) beside the bfloat16 copy the
    # next matmul saves (the bfloat16 softmax output itself without the policy)
    pytest.param(True, 2 * 5_120, id="explicit-attention"),
    # scaled_dot_product_attention is in both lower-precision lists: its math path runs with
    # autocast off inside, so its softmax stays bfloat16 on CUDA too
    pytest.param(False, 0, id="sdpa-math"),
])
def test_a_cuda_prediction_runs_cudas_float32_ops(explicit: bool, more: int,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    def saved() -> int:
        return memory(_tiny(explicit), InputRequest(batch_size=2), target="cuda", amp="bfloat16",
                      attention="math").saved_bytes

    with_policy = saved()
    monkeypatch.setattr(memory_step, "cuda_policy", contextlib.nullcontext)
    assert with_policy - saved() == more
