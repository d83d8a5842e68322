"""The torchprofile peer (issue 25: a new peer is one file, peers/torchprofile.py): its
``profile_macs`` reconciled with vitprof to a zero residual, and one line where it cannot run."""

from __future__ import annotations

import sys

import pytest
import torch
from torchvision.models import VisionTransformer

from vitprof.checks.crosscheck import run_crosscheck
from vitprof.checks.crosscheck.harness import CannotTake, PeerUnavailable
from vitprof.checks.crosscheck.peers.torchprofile import run_torchprofile


def _tiny() -> VisionTransformer:
    # 32 px, patch 8: 16 patches + the class token = 17 tokens; 2 layers, 2 heads, width 64
    return VisionTransformer(32, 8, num_layers=2, num_heads=2, hidden_dim=64, mlp_dim=128)


def test_a_missing_torchprofile_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torchprofile", None)  # import fails
    with pytest.raises(PeerUnavailable) as missing:
        run_torchprofile(_tiny(), ((torch.zeros(1, 3, 32, 32),), {}))
    assert str(missing.value) == "torchprofile not installed: pip install torchprofile"
    row = run_crosscheck(_tiny(), peers=["torchprofile"]).rows[0]
    assert row.macs is None and row.note == "torchprofile not installed: pip install torchprofile"


def test_it_cannot_take_a_keyword_input() -> None:
    pytest.importorskip("torchprofile")
    with pytest.raises(CannotTake, match="positional arguments only, and this forward takes x"):
        run_torchprofile(_tiny(), ((), {"x": torch.zeros(1, 3, 32, 32)}))


def test_its_residual_is_zero_on_a_tiny_torchvision_vit() -> None:
    pytest.importorskip("torchprofile")
    row = run_crosscheck(_tiny(), peers=["torchprofile"]).rows[0]
    norms, scalars = ([c.macs for c in row.causes if word in c.text]
                      for word in ("layer_norm", "0-dim"))
    # 5 LayerNorms (2 per layer + the last) over 17 tokens x 64: 5 x 17 x 64 = 5_440
    assert norms == [5 * 17 * 64]
    # jit.trace's 0-dim multiplications: n_h * n_w once, and per attention q, k, v views of
    # bsz * num_heads and the output's bsz * tgt_len: 1 + 2 x 4 = 9
    assert scalars == [1 + 2 * 4]
    assert row.residual_macs == 0 and row.params is None


@pytest.mark.slow
@pytest.mark.parametrize(("name", "layer_norms"), [
    ("vit_b_16", 25 * 197 * 768),  # 2 per block x 12 + the last, 197 tokens x 768 = 3_782_400
    ("timm:deit_tiny_patch16_224", 25 * 197 * 192),  # = 945_600
])
def test_its_residual_is_zero_on_vit_b_16_and_deit_tiny(name: str, layer_norms: int) -> None:
    pytest.importorskip("torchprofile")
    check = run_crosscheck(name, peers=["torchprofile"])
    row = check.rows[0]
    assert row.residual_macs == 0
    # vit_b_16's nn.MultiheadAttention: 12 x 4 + 1 = 49 0-dim multiplications; timm's
    # Attention reshapes with ints jit.trace keeps as constants: none
    scalars = 12 * 4 + 1 if name == "vit_b_16" else 0
    assert row.macs == check.vitprof.macs + layer_norms + scalars


def test_under_no_grad_the_fast_path_it_cannot_read_is_named() -> None:
    pytest.importorskip("torchprofile")
    # under no_grad, nn.MultiheadAttention runs aten::_native_multi_head_attention, whose
    # attention weights (not asked for) trace as a tensor without a dtype
    row = run_crosscheck(_tiny(), peers=["torchprofile"], grad=False).rows[0]
    assert row.macs is None
    assert "aten::_native_multi_head_attention returns one without" in row.note
