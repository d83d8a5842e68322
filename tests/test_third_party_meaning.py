"""Issue 35's acceptance on third-party code built as benchmarks/third_party.py builds it:
vit-pytorch's nViT (every linear's weight read through ``torch.nn.utils.parametrize``),
x-transformers' ViTransformerWrapper with an RMSNorm written with ``F.normalize``, and two
held-out rows (benchmarks/held_out.py) against their closed forms (benchmarks/closed_forms.py):
nystrom-attention's Nystromformer and torchmultimodal's post-norm VisionTransformer.

Sizes (the script's SMALL, IMAGE): 32x32 images in 8x8 patches, 16 patches of 3 x 8 x 8 = 192
values; width 32, 2 layers, 2 heads of 16 (inner width 32), MLP 64."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from torch import nn

from vitprof import analyze
from vitprof.core.records import Component as C

sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
from closed_forms import CLOSED_FORMS, closed_form_verdict
from held_out import HELD_OUT

IMAGE = {"image_size": 32, "patch_size": 8}
SMALL = {"num_classes": 10, "dim": 32, "depth": 2, "heads": 2, "mlp_dim": 64, "dim_head": 16}


def nvit() -> nn.Module:
    from vit_pytorch.normalized_vit import nViT

    return nViT(**IMAGE, **SMALL)


def vit_transformer_wrapper(**options: bool) -> nn.Module:
    from x_transformers import Encoder, ViTransformerWrapper

    return ViTransformerWrapper(**IMAGE, num_classes=10, num_register_tokens=0,
                                attn_layers=Encoder(dim=32, depth=2, heads=2, attn_dim_head=16,
                                                    **options))


def test_nvit_parametrized_weights_stay_with_their_products() -> None:
    pytest.importorskip("vit_pytorch")
    profile = analyze(nvit(), image_size=32)
    placed = {p.name: p.component for p in profile.params}
    originals = {name: c for name, c in placed.items() if name.endswith(".original")}
    # the patch projection 192 -> 32: 192 * 32 = 6_144 weights, 16 * 192 * 32 = 98_304 MACs
    assert originals["to_patch_embedding.1.linear.parametrizations.weight.original"] is (
        C.PATCH_EMBED)
    assert profile.components[C.PATCH_EMBED].params >= 192 * 32
    assert profile.components[C.PATCH_EMBED].macs == 16 * 192 * 32
    # q, k, v of both layers: 2 * 3 * 32 * 32 = 6_144 weights in attn_qkv
    qkv = [n for n in originals if any(f".to_{x}." in n for x in "qkv")]
    assert len(qkv) == 6 and all(originals[n] is C.ATTN_QKV for n in qkv)
    # tokens: the position table alone, 16 positions x 32 = 512
    assert profile.components[C.TOKENS].params == 16 * 32


def test_x_transformers_rmsnorm_splits_as_its_layernorm() -> None:
    pytest.importorskip("x_transformers")

    def split(model: nn.Module) -> dict[C, tuple[int, int]]:
        profile = analyze(model, image_size=32)
        return {c: (v.params, v.macs) for c, v in profile.components.items()}

    rms, layer = split(vit_transformer_wrapper(use_rmsnorm=True)), split(vit_transformer_wrapper())
    assert rms == layer
    # the gains: 4 block norms + the final one, 5 * 32; the patch norms' 192 + 32
    assert rms[C.NORM] == (5 * 32 + 192 + 32, 0)


@pytest.mark.parametrize(("package", "module", "name"), [
    ("nystrom-attention", "nystrom_attention", "Nystromformer"),
    ("torchmultimodal", "torchmultimodal", "VisionTransformer-post-norm")])
def test_a_held_out_row_is_its_closed_form(package: str, module: str, name: str) -> None:
    """Nystromformer: its values' depthwise conv, added to the attention's output before the
    output projection, is ``attn_core`` (main: ``mlp``, 12 params, 3,072 MACs); the post-norm
    ViT's class token (32 params) is ``tokens`` (main: ``attn_qkv``)."""
    pytest.importorskip(module)
    subject = next(s for s in HELD_OUT[package]() if s.name == name)
    profile = analyze(subject.build(), **subject.inputs)
    assert closed_form_verdict(CLOSED_FORMS[(package, name)](), profile) == {}
