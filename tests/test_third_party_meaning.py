"""Issue 35's acceptance on third-party code built as benchmarks/third_party.py builds it:
vit-pytorch's nViT (every linear's weight read through ``torch.nn.utils.parametrize``),
x-transformers' ViTransformerWrapper with an RMSNorm written with ``F.normalize``, and two
held-out rows (benchmarks/held_out.py) against their closed forms (benchmarks/closed_forms.py):
nystrom-attention's Nystromformer and torchmultimodal's post-norm VisionTransformer.

Sizes (third_party.SMALL, IMAGE): 32x32 images in 8x8 patches, 16 patches of 3 x 8 x 8 = 192
values; width 32, 2 layers, 2 heads of 16 (inner width 32), MLP 64."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from vitprof import analyze
from vitprof.core.records import Component as C

sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
import third_party
from closed_forms import CLOSED_FORMS, closed_form_verdict
from held_out import HELD_OUT


def _subject(package: str, name: str) -> third_party.Subject:
    subjects = third_party._vit_pytorch() if package == "vit-pytorch" else (
        third_party._x_transformers())
    return next(s for s in subjects if s.name == name)


def test_nvit_parametrized_weights_stay_with_their_products() -> None:
    pytest.importorskip("vit_pytorch")
    subject = _subject("vit-pytorch", "nViT")
    profile = analyze(subject.build(), **subject.inputs)
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

    def split(name: str) -> dict[C, tuple[int, int]]:
        subject = _subject("x-transformers", name)
        profile = analyze(subject.build(), **subject.inputs)
        return {c: (v.params, v.macs) for c, v in profile.components.items()}

    rms, layer = split("ViTransformerWrapper+rmsnorm"), split("ViTransformerWrapper")
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
