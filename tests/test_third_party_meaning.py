"""Issue 35's acceptance on third-party code built as benchmarks/third_party.py builds it:
vit-pytorch's nViT (every linear's weight read through ``torch.nn.utils.parametrize``),
x-transformers' ViTransformerWrapper with an RMSNorm written with ``F.normalize``,
pytorchvideo's MViT (position tables repeated by free ops), and three held-out rows
(benchmarks/held_out.py) against their closed forms (benchmarks/closed_forms.py):
nystrom-attention's Nystromformer, torchmultimodal's post-norm VisionTransformer and
ultralytics' AIFI alone, read from the page benchmarks/third_party.py writes when run as a
command on those rows.

Sizes (the script's SMALL, IMAGE): 32x32 images in 8x8 patches, 16 patches of 3 x 8 x 8 = 192
values; width 32, 2 layers, 2 heads of 16 (inner width 32), MLP 64."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from torch import nn

from vitprof import analyze
from vitprof.core.records import Component as C

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "third_party.py"
HELD_OUT_ROWS = {"nystrom-attention": "Nystromformer",
                 "torchmultimodal": "VisionTransformer-post-norm", "ultralytics": "AIFI"}
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


def test_mvit_position_tables_repeated_by_free_ops_are_tokens_with_no_failed_check() -> None:
    """pytorchvideo's SpatioTemporalClsPositionalEncoding (sep_pos_embed): a spatial table
    repeated over time plus a temporal table repeat_interleaved over space, a class table
    concatenated, added to the tokens. Main put both adds in ``patch_embed`` and the self-check
    of one module in two components fired (1,088 params)."""
    pytest.importorskip("pytorchvideo")
    from pytorchvideo.models.vision_transformers import create_multiscale_vision_transformers

    model = create_multiscale_vision_transformers(
        spatial_size=32, temporal_size=4, depth=2, patch_embed_dim=16, num_heads=1,
        mlp_ratio=2.0, head_num_classes=10)
    profile = analyze(model, input_shape=(1, 3, 4, 32, 32))
    adds = [op.component for op in profile.ops if op.module == "cls_positional_encoding"]
    assert adds == [C.TOKENS, C.TOKENS]
    # width 16; the patch grid T x H x W = 2 x 8 x 8 (4 frames, temporal stride 2; 32 / 4):
    # the class token and the class table 16 each, the spatial table 64 x 16, the temporal
    # 2 x 16: 1_088
    assert profile.components[C.TOKENS].params == 16 + 16 + 64 * 16 + 2 * 16
    assert profile.self_checks == ()


@pytest.fixture(scope="module")
def held_out_page(tmp_path_factory: pytest.TempPathFactory) -> str:
    """benchmarks/third_party.py's page of the two held-out rows (one run for both; a missing
    package is a skipped line of it)."""
    out = tmp_path_factory.mktemp("third_party") / "page.md"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--packages", ",".join(HELD_OUT_ROWS),
         "--models", ",".join(HELD_OUT_ROWS.values()), "--out", str(out)],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(
            filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))})
    assert done.returncode == 0, done.stderr
    return out.read_text()


def closed_form_cell(page: str, package: str, name: str) -> str:
    """The ``closed form`` column of the summary row of ``package``'s ``name``."""
    header = next(line for line in page.splitlines() if line.startswith("| package | model |"))
    column = [cell.strip() for cell in header.split("|")].index("closed form")
    for line in page.splitlines():
        cells = [cell.strip() for cell in line.split("|")]
        if cells[1:3] == [package, name]:
            return cells[column]
    raise AssertionError(f"no row for {package} {name} on the page")


@pytest.mark.parametrize(("package", "module"), [
    ("nystrom-attention", "nystrom_attention"), ("torchmultimodal", "torchmultimodal"),
    ("ultralytics", "ultralytics")])
def test_a_held_out_row_is_its_closed_form(held_out_page: str, package: str,
                                           module: str) -> None:
    """Nystromformer: its values' depthwise conv, added to the attention's output before the
    output projection, is ``attn_core`` (once ``mlp``, 12 params, 3,072 MACs); the post-norm
    ViT's class token (32 params) is ``tokens`` (once ``attn_qkv``); AIFI alone, one layer
    whose residual adds take the model's input as skip, has its feed-forward in ``mlp`` (once
    ``head``, 4,192 params) and its sin-cos table's products in ``tokens`` (once ``conv``,
    1,024 MACs). The script holds each
    breakdown against its closed form and writes ``matches`` or the components that differ."""
    pytest.importorskip(module)
    assert closed_form_cell(held_out_page, package, HELD_OUT_ROWS[package]) == "matches"
