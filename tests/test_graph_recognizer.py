"""The graph recognizer: roles read from the data flow, on code styles no table knows.

Models (tests/models_styles.py): 1x3x16x16 image, patch 4 -> N = 16 patches, width D = 32,
MLP hidden 64, 4 heads of 8, 2 blocks. Per block: q/k/v 3 x N x D x D, attention products
2 x N^2 x D (summed over heads), output N x D x D, MLP 2 x N x D x 64.
"""

from __future__ import annotations

import functools

import pytest
import timm
import torch
import transformers
from models_styles import (
    FlatViT,
    FusedViT,
    GatedViT,
    HybridMapViT,
    ParallelViT,
    PoolingViT,
    SandwichViT,
    ScoreNetViT,
    SmearViT,
)

from vitprof import Component as C
from vitprof import Counts, analyze
from vitprof.cli.main import main
from vitprof.testing import oracle_macs, unique_params

QKV, CORE, PROJ, MLP = 3 * 16 * 32 * 32, 2 * 16 * 16 * 32, 16 * 32 * 32, 2 * 16 * 32 * 64
PATCH = 16 * 48 * 32  # 16 patches of 3*4*4 = 48 values into D = 32: 24_576

STYLES = {
    "parallel": (ParallelViT, {
        C.PATCH_EMBED: (32 * 48 + 32, PATCH), C.TOKENS: (16 * 32, 0),
        C.ATTN_QKV: (2 * 3 * 32 * 32, 2 * QKV),  # no biases
        C.ATTN_CORE: (0, 2 * CORE), C.ATTN_PROJ: (2 * 32 * 32, 2 * PROJ),
        C.MLP: (2 * 2 * 32 * 64, 2 * MLP),
        C.NORM: (2 * (32 + 8 + 8) + 2 * 32, 0),  # LN + QK-norms without bias, final LN
        C.HEAD: (32 * 10 + 10, 32 * 10),
    }),
    "1x1-conv-attention": (HybridMapViT, {
        C.PATCH_EMBED: (32 * 48 + 32, PATCH),
        C.CONV: (32 * 9 + 32 * 32, 16 * 32 * 9 + 16 * 32 * 32),  # depthwise 3x3 + pointwise
        C.ATTN_QKV: (2 * (96 * 32 + 96), 2 * QKV), C.ATTN_CORE: (0, 2 * CORE),
        C.ATTN_PROJ: (2 * (32 * 32 + 32), 2 * PROJ),
        C.MLP: (2 * (32 * 64 + 64 + 64 * 32 + 32), 2 * MLP),
        C.NORM: (2 * 2 * 2 * 32, 0),  # two BatchNorm2d(32) per block, weight and bias
        C.HEAD: (32 * 10 + 10, 32 * 10),
    }),
    "pooling-head-raw-proj-patch-transformer-scale-mixer": (PoolingViT, {
        C.PATCH_EMBED: (48 * 32 + 32, PATCH), C.TOKENS: (16 * 32, 0),
        # the pooling product (softmax weights^T @ x: 16 x 32), a product of two
        # activations, is an attention core, as timm's attention pooling's
        C.ATTN_QKV: (2 * 3 * 32 * 32, 2 * QKV), C.ATTN_CORE: (0, 2 * CORE + 16 * 32),
        C.ATTN_PROJ: (2 * (32 * 32 + 32 + 32), 2 * PROJ),  # + the layer scale named `scale`
        C.MLP: (2 * (32 * 64 + 64 + 64 * 32 + 32 + 32), 2 * MLP),
        C.NORM: (2 * 2 * 2 * 32, 0),
        # Linear(D, 1) over 16 tokens, pooled @ proj 32 x 10
        C.HEAD: (32 + 1 + 32 * 10, 16 * 32 + 32 * 10),
    }),
    "flat-forward-raw-parameters": (FlatViT, {
        C.PATCH_EMBED: (48 * 32, PATCH), C.TOKENS: (32 + 17 * 32, 0),  # class token, 17 positions
        # 17 tokens, one head: q/k/v 17*32*96, products 2*17*17*32, output 17*32*32
        C.ATTN_QKV: (2 * 32 * 96, 2 * 17 * 32 * 96), C.ATTN_CORE: (0, 2 * 2 * 17 * 17 * 32),
        C.ATTN_PROJ: (2 * 32 * 32, 2 * 17 * 32 * 32),
        C.MLP: (2 * 2 * 32 * 64, 2 * 2 * 17 * 32 * 64), C.NORM: (2 * 2 * 32, 0),
        C.HEAD: (32 * 10, 32 * 10),
    }),
    # a depthwise conv after the attention, alone in its unit, mixes tokens: conv; the one
    # inside the MLP, between its linears, stays mlp
    "attention-then-depthwise-conv-then-conv-mlp": (SmearViT, {
        C.PATCH_EMBED: (32 * 48 + 32, PATCH),
        C.ATTN_QKV: (2 * 3 * 32 * 32, 2 * QKV), C.ATTN_CORE: (0, 2 * CORE),  # no q/k/v bias
        C.ATTN_PROJ: (2 * (32 * 32 + 32), 2 * PROJ),
        C.CONV: (2 * (32 * 9 + 32), 2 * 16 * 32 * 9),  # depthwise 3x3 on 16 positions, D maps
        # linears D -> 64 -> D with biases, and a depthwise 3x3 on 16 positions of 64 maps
        C.MLP: (2 * (32 * 64 + 64 + 64 * 9 + 64 + 64 * 32 + 32), 2 * (MLP + 16 * 64 * 9)),
        C.NORM: (2 * 2 * 2 * 32 + 2 * 32, 0),  # two LayerNorms per block, the final one
        C.HEAD: (32 * 10 + 10, 32 * 10),
    }),
    # one linear D -> 3D + 64 with a bias, sliced: its q/k/v rows and columns are attn_qkv,
    # the 64 of the MLP's hidden layer mlp
    "fused-qkv-and-mlp-projection-sliced": (FusedViT, {
        C.PATCH_EMBED: (32 * 48 + 32, PATCH), C.TOKENS: (16 * 32, 0),
        C.ATTN_QKV: (2 * (96 * 32 + 96), 2 * QKV), C.ATTN_CORE: (0, 2 * CORE),
        C.ATTN_PROJ: (2 * (32 * 32 + 32), 2 * PROJ),
        C.MLP: (2 * (64 * 32 + 64 + 64 * 32 + 32), 2 * MLP),
        C.NORM: (2 * 2 * 32 + 2 * 32, 0),  # one LayerNorm per block, the final one
        C.HEAD: (32 * 10 + 10, 32 * 10),
    }),
}


def counts(profile, component: C) -> tuple[int, int]:
    found = profile.components[component]
    return found.params, found.macs


@pytest.mark.parametrize("style", STYLES)
def test_graph_places_every_style(style: str) -> None:
    factory, expected = STYLES[style]
    with torch.device("meta"):
        model = factory()
    profile = analyze(model, image_size=16, recognizer="graph")
    assert profile.recognizer == "graph"
    assert profile.warnings == ()
    assert counts(profile, C.OTHER) == (0, 0)
    for component in C:
        assert counts(profile, component) == expected.get(component, (0, 0)), component
    assert len(profile.blocks) == 2
    first, second = (block.total for block in profile.blocks)
    assert (first.params, first.macs) == (second.params, second.macs)


# Token pruning: a selector before the second block keeps KEEP = 8 of the 16 patch tokens, so
# the first block sees N = 16 tokens and the second 8 (GatedViT); with a class token, 17 and 9
# (ScoreNetViT). The selector scores the 16 patch tokens of the first block's output.
PRUNED = {
    # Layer: lucidrains-style Mixer (to_qkv 32 x 96 without bias, to_out 32 x 32 + 32) and
    # ff 32 -> 64 -> 32, a layer scale of 32 after each; gate: Linear(32, 16) + 16 = 528,
    # bias-free Linear(16, 1) = 16 -> 544 params, 16 x (32*16 + 16) = 8_448 MACs
    "gate-argsort-fancy-indexing": (GatedViT, "gates.1.", {
        C.PATCH_EMBED: (3 * 16 * 32 + 32, 16 * 48 * 32), C.TOKENS: (16 * 32, 0),
        C.ATTN_QKV: (2 * 3 * 32 * 32, 3 * 32 * 32 * (16 + 8)),
        C.ATTN_CORE: (0, 2 * 32 * (16 * 16 + 8 * 8)),
        C.ATTN_PROJ: (2 * (32 * 32 + 32 + 32), 32 * 32 * (16 + 8)),
        C.MLP: (2 * (32 * 64 + 64 + 64 * 32 + 32 + 32) + 544, 2 * 32 * 64 * (16 + 8) + 8_448),
        C.NORM: (2 * 2 * 2 * 32 + 2 * 32, 0), C.HEAD: (32 * 10 + 10, 32 * 10),
    }, (4_224 + 544, 2 * 8 * 32 * 64 + 8_448)),  # block 1's mlp: ff + scale, and the gate
    # ParallelBlock: bias-free q/k/v 3 x 32 x 32, out 32 x 32, fc1/fc2 2 x 32 x 64, norms
    # 32 + 8 + 8; predictor: LayerNorm 2*32 = 64 (norm), Linear(32, 32) 1_056, Linear(32, 16)
    # 528, Linear(16, 2) 34 -> 1_618 params (mlp), 16 x (32*32 + 32*16 + 16*2) = 25_088 MACs
    "score-net-batch-index-select": (ScoreNetViT, "score_predictor.", {
        C.PATCH_EMBED: (48 * 32 + 32, 16 * 48 * 32), C.TOKENS: (32, 0),
        C.ATTN_QKV: (2 * 3 * 32 * 32, 3 * 32 * 32 * (17 + 9)),
        C.ATTN_CORE: (0, 2 * 32 * (17 * 17 + 9 * 9)),
        C.ATTN_PROJ: (2 * 32 * 32, 32 * 32 * (17 + 9)),
        C.MLP: (2 * 2 * 32 * 64 + 1_618, 2 * 32 * 64 * (17 + 9) + 25_088),
        C.NORM: (2 * (32 + 8 + 8) + 64, 0), C.HEAD: (32 * 10 + 10, 32 * 10),
    }, (2 * 32 * 64 + 1_618, 2 * 9 * 32 * 64 + 25_088)),
}


@pytest.mark.parametrize("recognizer", ["graph", "auto"])
@pytest.mark.parametrize("style", PRUNED)
def test_a_token_selector_is_mlp_of_the_block_it_selects_for(style: str, recognizer: str) -> None:
    factory, selector, expected, second_mlp = PRUNED[style]
    with torch.device("meta"):
        model = factory()
    profile = analyze(model, image_size=16, recognizer=recognizer)
    assert profile.recognizer == "graph" and profile.warnings == () and profile.self_checks == ()
    assert profile.components[C.OTHER] == Counts()
    for component in C:
        assert counts(profile, component) == expected.get(component, (0, 0)), component
    placed = {(r.component, r.block) for r in profile.params if r.name.startswith(selector)}
    assert (C.MLP, 1) in placed and placed <= {(C.MLP, 1), (C.NORM, 1)}
    second = profile.blocks[1].components[C.MLP]
    assert (second.params, second.macs) == second_mlp


@pytest.mark.parametrize("recognizer", ["graph", "auto"])
def test_dynamic_vit_predictors_are_in_the_blocks_they_prune_for(recognizer: str) -> None:
    profile = analyze("note002_dynamic_vit", recognizer=recognizer)
    assert profile.recognizer == "graph" and profile.components[C.OTHER] == Counts()
    # predictors.0 scores 64 patch tokens before block 2, predictors.1 44 before block 4: a
    # LayerNorm (norm), Linear(512, 128) and Linear(128, 1) (mlp)
    placed = {r.name: (r.component, r.block) for r in profile.params
              if r.name.startswith("predictors.")}
    assert placed == {f"predictors.{k}.{layer}.{kind}": (component, block)
                      for k, block in enumerate((2, 4))
                      for layer, component in ((0, C.NORM), (1, C.MLP), (3, C.MLP))
                      for kind in ("weight", "bias")}
    # block 2 sees 1 + 44 = 45 tokens: its MLP 2*512*2048 + 2048 + 512 = 2_099_712 params and
    # 2*45*512*2048 = 94_371_840 MACs, + its predictor (512*128 + 128) + (128 + 1) = 65_793
    # params and 64 x (512*128 + 128*1) = 4_202_496 MACs; block 4, 32 tokens, 44 scored
    mlp = [(b.components[C.MLP].params, b.components[C.MLP].macs) for b in profile.blocks]
    assert mlp[2] == (2_099_712 + 65_793, 94_371_840 + 4_202_496)
    assert mlp[4] == (2_099_712 + 65_793, 2 * 32 * 512 * 2048 + 44 * 65_664)
    # its LayerNorm: 2*512 params beside the block's own two, 2 x 2*512
    assert profile.blocks[2].components[C.NORM].params == 3 * 1_024


def test_graph_places_convolutions_on_a_map_around_a_transformer_in_conv() -> None:
    # SandwichViT: per stage a 3x3 and a 1x1 conv before two layers and a 1x1 and a 3x3 after
    # them, outside the blocks, on the stage's map: 4x4 = 16 positions, then 2x2 = 4 after a
    # strided 2x2 conv, a downsampling (patch_embed, as the patch embedding)
    with torch.device("meta"):
        model = SandwichViT()
    profile = analyze(model, image_size=16, recognizer="graph")
    assert profile.warnings == () and profile.self_checks == ()
    assert len(profile.blocks) == 4
    # per stage two 3x3 (32 * 32 * 9 + 32) and two 1x1 (32 * 32 + 32); per position
    # 2 * 32 * 32 * 9 + 2 * 32 * 32 = 20_480 MACs, on 16 + 4 positions
    assert counts(profile, C.CONV) == (2 * 2 * (32 * 32 * 9 + 32 + 32 * 32 + 32),
                                       (16 + 4) * 20_480)
    # the 4x4 patch conv on 16 patches; the 2x2 stride-2 conv on 4 positions: 4 * 32 * 4 * 32
    assert counts(profile, C.PATCH_EMBED) == (48 * 32 + 32 + 32 * 4 * 32 + 32,
                                              PATCH + 4 * 32 * 4 * 32)
    # two layers on 16 tokens, two on 4: linears D -> 64 -> D with biases and a layer scale
    assert counts(profile, C.MLP) == (4 * (32 * 64 + 64 + 64 * 32 + 32 + 32),
                                      (2 * 16 + 2 * 4) * 2 * 32 * 64)
    # the head's own 3x3 conv on the 2x2 map (after the last block, in no unit holding it),
    # 4 * 32 * 32 * 9 MACs, and the linear; the second stage's last 3x3 is not head
    assert counts(profile, C.HEAD) == (32 * 32 * 9 + 32 + 32 * 10 + 10,
                                       4 * 32 * 32 * 9 + 32 * 10)


@pytest.mark.parametrize("style", STYLES)
def test_auto_falls_back_to_the_graph_where_no_table_detects(style: str) -> None:
    with torch.device("meta"):
        model = STYLES[style][0]()
    assert analyze(model, image_size=16).recognizer == "graph"


def test_training_step_follows_the_forward_roles() -> None:
    with torch.device("meta"):
        model = ParallelViT()
    profile = analyze(model, image_size=16, recognizer="graph", mode="train")
    assert counts(profile, C.OTHER) == (0, 0)
    # the backward of each product costs twice its forward: attention products 3 x forward
    assert profile.components[C.ATTN_CORE].macs == 3 * 2 * CORE


def test_a_fused_projection_is_shared_out_by_output_columns() -> None:
    """FusedViT's ``mix``, D = 32 -> 3 x 32 + 64 = 160 columns with a bias: one record per
    share, their MACs, vector FLOPs (the bias add, one per output element) and bytes summing to
    the record's; its weight and bias two records each, by rows. A training step's backward
    records of it are shared out the same way."""
    with torch.device("meta"):
        model = FusedViT()
    profile = analyze(model, image_size=16, recognizer="graph")
    mix = [op for op in profile.ops if op.module == "blocks.0.mix"]
    assert [(op.op, op.component, op.macs, op.vector_flops) for op in mix] == [
        ("aten.addmm", C.ATTN_QKV, 16 * 32 * 96, 16 * 96),  # 49_152 MACs, 1_536 bias adds
        ("aten.addmm", C.MLP, 16 * 32 * 64, 16 * 64),  # 32_768, 1_024
    ]
    # float32: reads the input 16 x 32, the weight 160 x 32 and the bias 160; writes 16 x 160
    assert sum(op.bytes_read for op in mix) == 4 * (16 * 32 + 160 * 32 + 160) == 23_168
    assert sum(op.bytes_written for op in mix) == 4 * 16 * 160 == 10_240
    assert [(p.name, p.component, p.numel, p.shape)
            for p in profile.params if ".0.mix." in p.name] == [
        ("blocks.0.mix.weight", C.ATTN_QKV, 96 * 32, (96, 32)),
        ("blocks.0.mix.weight", C.MLP, 64 * 32, (64, 32)),
        ("blocks.0.mix.bias", C.ATTN_QKV, 96, (96,)),
        ("blocks.0.mix.bias", C.MLP, 64, (64,)),
    ]
    assert profile.totals.params == sum(p.numel() for p in model.parameters()) == 19_434
    train = analyze(model, image_size=16, recognizer="graph", mode="train")
    # each linear's backward costs twice its forward (input and weight gradients)
    assert counts(train, C.ATTN_QKV)[1] == 3 * 2 * QKV
    assert counts(train, C.MLP)[1] == 3 * 2 * MLP


@pytest.mark.parametrize(("rule", "qkv"), [
    # mix's whole D x 160 weight, 160 biases and 16 x 32 x 160 MACs, per block
    pytest.param(("mix", "attn_qkv"), (2 * (160 * 32 + 160), 2 * 16 * 32 * 160), id="to-attn_qkv"),
    pytest.param(("mix", "mlp"), (0, 0), id="to-mlp"),  # the component of the rest: still ruled
    pytest.param((r"mix\.weight", "mlp"), (2 * 96, 0), id="weight-to-mlp"),  # biases stay
])
def test_a_map_rule_wins_over_a_fused_projection(rule: tuple[str, str], qkv: tuple[int, int]
                                                  ) -> None:
    with torch.device("meta"):
        model = FusedViT()
    profile = analyze(model, image_size=16, recognizer="graph", overrides=[rule])
    assert counts(profile, C.ATTN_QKV) == qkv
    assert profile.totals.params == 19_434


@pytest.mark.parametrize("qkv_bias", [False, True], ids=["mlp_bias", "qkv_bias"])
def test_timm_parallel_scaling_block_shares_its_in_proj_between_attn_qkv_and_mlp(
    qkv_bias: bool,
) -> None:
    """timm's ParallelScalingBlock (vit_*_xp_224, ViT-22B's parallel block): in_proj D ->
    3D + H computes the MLP's hidden layer (its first H columns) and q, k, v. Here D = 64,
    H = 4 x 64 = 256, N = (32 / 8)^2 + 1 class token = 17. Without qkv_bias the MLP's biases
    are a parameter of their own (mlp_bias), added after the split; with it, in_proj's."""
    with torch.device("meta"):
        model = timm.create_model("vit_base_patch16_xp_224", depth=2, embed_dim=64,
                                  num_heads=4, img_size=32, patch_size=8, qkv_bias=qkv_bias)
    profile = analyze(model, recognizer="graph")
    qkv, hidden = 17 * 64 * 3 * 64, 17 * 64 * 256  # N D 3D = 208_896, N D H = 278_528
    assert qkv + hidden == 17 * 64 * (3 * 64 + 256)  # in_proj's N D (3D + H) = 487_424
    for block in profile.blocks:
        parts = block.components
        # in_proj's 3D x D q/k/v rows = 12_288, and with qkv_bias its 3D = 192 biases
        assert (parts[C.ATTN_QKV].params, parts[C.ATTN_QKV].macs) == (
            3 * 64 * 64 + 192 * qkv_bias, qkv)
        # in_proj's H x D rows = 16_384, H biases; mlp_out_proj H x D + D = 16_448, N H D MACs
        assert (parts[C.MLP].params, parts[C.MLP].macs) == (
            256 * 64 + 256 + 256 * 64 + 64, hidden + 17 * 256 * 64)
    assert counts(profile, C.OTHER) == (0, 0) and profile.self_checks == ()
    assert profile.totals.params == unique_params(model)
    assert profile.totals.macs == oracle_macs(model, profile.input_shape)


def test_a_qkv_projection_unbound_into_q_k_v_is_not_shared_out() -> None:
    """vitprof's vit_22b_parallel (one qkv linear unbound into q, k, v; the MLP's fc1 apart):
    every part reaches the core, nothing is shared out, the graph agrees with the table."""
    graph = analyze("vit_22b_parallel", recognizer="graph")
    tables = analyze("vit_22b_parallel", recognizer="tables")
    assert graph.recognizer == "graph" and graph.components == tables.components
    assert len(graph.ops) == len(tables.ops) and len(graph.params) == len(tables.params)


@pytest.mark.parametrize(("view", "expected"), [
    pytest.param(lambda y: y[..., 2:5], (2, 5), id="slice"),
    # the second part of a split [4, 8], as 2 heads of 4, transposed: columns 4 to 11
    pytest.param(lambda y: y.split([4, 8], dim=-1)[1].view(2, 3, 2, 4).transpose(1, 2),
                 (4, 12), id="split-as-heads"),
    pytest.param(lambda y: y.chunk(3, dim=-1)[0], (0, 4), id="chunk"),
    pytest.param(lambda y: y[:, 1:], None, id="whole-rows"),  # tokens 1 and 2, all columns
    pytest.param(lambda y: y.transpose(1, 2), None, id="transposed"),
    pytest.param(lambda y: y.as_strided((2,), (13,)), None, id="diagonal"),  # rows 0 and 1
])
def test_the_columns_a_view_reads(view, expected: tuple[int, int] | None) -> None:
    from vitprof.count.counter import columns

    y = torch.zeros(2, 3, 12, device="meta")  # rows of 12 columns
    assert columns(view(y), 12) == expected


def test_a_model_without_attention_stays_in_other() -> None:
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 4, 4), torch.nn.Flatten(),
                                torch.nn.Linear(8 * 16, 10))
    profile = analyze(model, image_size=16, recognizer="graph")
    assert profile.components[C.OTHER].macs == profile.totals.macs > 0
    assert any("no transformer blocks recognized" in w for w in profile.warnings)


def _hf_vit() -> torch.nn.Module:
    config = transformers.ViTConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                    intermediate_size=128, image_size=32, patch_size=8,
                                    num_labels=10)
    with torch.device("meta"):
        return transformers.ViTForImageClassification(config)


def _hf(kind: str, implementation: str = "sdpa", **options):
    """A small transformers ViT or DeiT (tests/test_closed_form.py's HF_SMALL config)."""
    def build() -> torch.nn.Module:
        config_class = transformers.DeiTConfig if kind.startswith("DeiT") else (
            transformers.ViTMSNConfig if kind.startswith("ViTMSN") else transformers.ViTConfig)
        config = config_class(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                              intermediate_size=96, patch_size=8, image_size=32, num_labels=7,
                              attn_implementation=implementation)
        with torch.device("meta"):
            return getattr(transformers, kind)(config, **options)
    return build


def _hf_mae() -> torch.nn.Module:
    """ViTMAE for pre-training: the small ViT above (D = 64, 2 layers, 16 patches of 8 x 8) and
    a decoder of width 32, 2 layers, predicting each patch's 8 x 8 x 3 pixels."""
    config = transformers.ViTMAEConfig(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=96,
        patch_size=8, image_size=32, decoder_hidden_size=32, decoder_num_hidden_layers=2,
        decoder_num_attention_heads=2, decoder_intermediate_size=64)
    with torch.device("meta"):
        return transformers.ViTMAEForPreTraining(config)


def _timm(name: str):
    def build() -> torch.nn.Module:
        with torch.device("meta"):
            return timm.create_model(name, pretrained=False)
    return build


# every model of tests/ that a table detects (torchvision's zoo models: test_breakdown_models.py)
# and three more layouts (a stem-only timm hybrid, timm's parallel branches, ViTMAE's decoder)
TABLE_MODELS = {
    "vit_b_16": lambda: "vit_b_16", "hf-vit": _hf_vit,
    "hf-vit-eager": _hf("ViTForImageClassification", "eager"),
    "hf-vit-model-pooler": _hf("ViTModel"),
    "hf-vit-model-mask-token": _hf("ViTModel", add_pooling_layer=False, use_mask_token=True),
    "hf-deit": _hf("DeiTForImageClassification"),
    "hf-deit-teacher": _hf("DeiTForImageClassificationWithTeacher", "eager"),
    "hf-vit-msn": _hf("ViTMSNForImageClassification"),  # the table's fourth package, vit_msn
    # the class token (plus its position, a sum of parameters) joins the gathered patches by
    # cat: a record after both, so the first layernorm_before is norm, the class token tokens
    "hf-vit-mae-pretraining": _hf_mae,
    **{f"timm-{name}": _timm(name) for name in (
        "test_vit", "test_vit2", "vit_tiny_patch16_224", "vit_small_patch16_224",
        "vit_base_patch16_224", "deit_tiny_patch16_224", "deit_small_patch16_224",
        "deit_base_patch16_224", "deit3_small_patch16_224", "deit_tiny_distilled_patch16_224",
        "vit_base_patch16_reg4_gap_256", "vit_base_patch16_siglip_224",
        # DiffAttention: its lambda_q/k vectors make, through sums and exps that read no
        # parameter, the weight of the second attention map subtracted from the first after
        # both cores: attn_core, never an input of q, k or v
        "vit_dwee_patch16_reg1_gap_256", "vit_small_r26_s32_224",
        "vit_tiny_r_s16_p8_224",  # a hybrid whose backbone is a stem and a final norm
        # ParallelThingsBlock: two attentions, then two MLPs, each pair read one input and is
        # summed into one residual add: one block (not two), its MLPs mlp
        "vit_small_patch16_18x2_224",
    )},
}  # the notes have no table (the generic recognizer, their "tables", is retired)


def _cells(profile) -> dict:
    cells = {(None, c): (n.params, n.macs) for c, n in profile.components.items()}
    cells.update({(b.index, c): (n.params, n.macs)
                  for b in profile.blocks for c, n in b.components.items()})
    return cells


@pytest.mark.parametrize("name", TABLE_MODELS)
def test_graph_agrees_with_the_tables(name: str) -> None:
    model = TABLE_MODELS[name]()
    size = 32 if name == "hf-vit" else None
    graph = analyze(model, image_size=size)  # auto: the graph decides, the table is compared
    tables = analyze(model, image_size=size, recognizer="tables")
    assert tables.recognizer in ("torchvision", "timm", "huggingface")
    assert graph.recognizer == f"graph ({tables.recognizer} table agrees)"
    assert _cells(graph) == _cells(tables)
    assert graph.self_checks == () and tables.self_checks == ()


def test_where_a_table_disagrees_the_graph_decides_and_says_so() -> None:
    # vit_b_16 with its final LayerNorm swapped for a Linear(768, 768): the torchvision table
    # still names encoder.ln norm (by its path), the graph sees a weighted op after the last
    # block, on the 197 tokens: head, 197 * 768 * 768 = 116_195_328 MACs
    model = _torchvision("vit_b_16")
    model.encoder.ln = torch.nn.Linear(768, 768, device="meta")
    auto = analyze(model)
    tables = analyze(model, recognizer="tables")
    assert auto.recognizer == "graph (torchvision table differs)"
    linear = (768 * 768 + 768, 197 * 768 * 768)
    assert counts(tables, C.NORM)[1] == linear[1]  # the table's answer: a norm with MACs
    # the head: the linear above and the classifier, 768 * 1000 + 1000 params, 768 * 1000 MACs
    assert counts(auto, C.HEAD) == (linear[0] + 768 * 1000 + 1000, linear[1] + 768 * 1000)
    assert auto.components == analyze(model, recognizer="graph").components


def test_recognizer_option_names_the_recognizer_in_json(capsys) -> None:
    assert main(["analyze", "vit_b_16", "--recognizer", "graph", "--format", "json"]) == 0
    assert '"family": "graph"' in capsys.readouterr().out
    assert main(["analyze", "vit_b_16", "--recognizer", "tables", "--format", "json"]) == 0
    assert '"family": "torchvision"' in capsys.readouterr().out


def test_map_rules_win_over_the_graph() -> None:
    with torch.device("meta"):
        model = PoolingViT()
    profile = analyze(model, image_size=16, recognizer="graph", overrides=[("pool_logits", C.MLP)])
    # Linear(D, 1) over 16 tokens: 16 * 32 = 512 MACs, 33 params moved from head to mlp
    assert counts(profile, C.MLP) == (STYLES["pooling-head-raw-proj-patch-transformer-scale-mixer"]
                                      [1][C.MLP][0] + 33, 2 * MLP + 512)


@pytest.mark.parametrize(("name", "blocks"), [
    # LeViT: 4 + 4 + 4 blocks and 2 attention-downsampling blocks; its cached bias index once
    # reused a freed storage whose stale producer joined two blocks' cores
    ("timm:levit_128", 4 + 4 + 4 + 2),
    ("timm:coatnet_0_224", 5 + 2),  # attention in stages 3 and 4 only, from 1x1 convolutions
    # cascaded group attention, conv q/k/v; its one-block first stage is no container; the
    # residual depthwise convs and FFNs around the downsampling between stages are conv
    ("timm:efficientvit_m0", 1 + 2 + 3),
    # 4 x 2 serial and 6 parallel blocks; the shared convolutional relative position encoding
    # (crpe, registered outside the blocks) runs inside their attention: not patch embedding
    ("timm:coat_tiny", 4 * 2 + 6),
    # 1, 2, 3, 1 MaxxVitBlocks, each an MBConv, then a window and a grid attention layer that
    # run their own residual adds: two blocks each, as torchvision's maxvit_t (it gave 7)
    ("timm:maxvit_nano_rw_256", 2 * (1 + 2 + 3 + 1)),
    # per multi-scale block: 1 + 3 blocks of its two branches, then two cross attentions, each
    # added to its own branch: two blocks, not the parallel branches of one
    ("timm:crossvit_9_240", 3 * (1 + 3 + 2)),
])
def test_graph_places_timm_hybrids(name: str, blocks: int) -> None:
    profile = analyze(name, recognizer="graph")
    assert counts(profile, C.OTHER) == (0, 0) and profile.self_checks == ()
    assert len(profile.blocks) == blocks and profile.components[C.ATTN_CORE].macs > 0
    assert (profile.components[C.CONV].macs > 0) is (
        name not in ("timm:levit_128", "timm:crossvit_9_240"))


def _torchvision(name: str) -> torch.nn.Module:
    import torchvision

    with torch.device("meta"):
        return getattr(torchvision.models, name)()


def test_swin_shifted_window_mask_is_no_residual_add() -> None:
    # the mask of shifted windows is built from the input beside the scores; read as a join it
    # hid the attention of every second block (7 blocks found instead of 2 + 2 + 6 + 2)
    model = _torchvision("swin_t")
    graph = analyze(model, recognizer="graph")
    assert len(graph.blocks) == 2 + 2 + 6 + 2 and graph.self_checks == ()
    assert _cells(graph) == _cells(analyze(model, recognizer="tables"))


def test_swin_v2_position_mlp_is_attention_core() -> None:
    graph = analyze(_torchvision("swin_v2_t"), recognizer="graph")
    # per block cpb_mlp Linear(2, 512) + Linear(512, heads, no bias) and logit_scale (heads):
    # heads 3, 6, 12, 24 over 2, 2, 6, 2 blocks: sum of depth * (2*512 + 512 + 513 * heads)
    expected = sum(d * (2 * 512 + 512 + 513 * h) for d, h in [(2, 3), (2, 6), (6, 12), (2, 24)])
    assert expected == 89_226
    assert graph.components[C.ATTN_CORE].params == expected


def test_beit_relative_position_bias_passed_as_a_mask_is_attention_core() -> None:
    with torch.device("meta"):
        model = timm.create_model("beit_base_patch16_224", pretrained=False)
    graph = analyze(model, recognizer="graph")
    # 12 blocks x ((2*14 - 1)^2 + 3 relative positions) x 12 heads = 105_408
    assert graph.components[C.ATTN_CORE].params == 12 * (27**2 + 3) * 12


def test_hugging_face_levit_alternating_attention_and_mlp_layers() -> None:
    # HF LeViT stacks Residual(attention), Residual(mlp), ... as siblings: each MLP layer is
    # part of the block before it (it was a conv residual outside the blocks, the last one head)
    config = transformers.LevitConfig(num_labels=10)
    with torch.device("meta"):
        model = transformers.LevitForImageClassification(config)
    profile = analyze(model, recognizer="graph")
    assert counts(profile, C.OTHER) == (0, 0) and profile.self_checks == ()
    assert counts(profile, C.CONV) == (0, 0)
    # the default config, depths 4, 4, 4, and 2 attention-downsampling blocks
    assert list(config.depths) == [4, 4, 4] and len(profile.blocks) == 4 + 4 + 4 + 2
    # the classifier Linear(384, 10) on the pooled tokens (its BatchNorm1d is norm)
    assert counts(profile, C.HEAD) == (384 * 10 + 10, 384 * 10)
    assert profile.components[C.MLP].macs > 0


@pytest.mark.parametrize("recognizer", ["tables", "graph"])
def test_timm_attention_pooling_head_with_its_mlp_is_head(recognizer: str) -> None:
    with torch.device("meta"):
        model = timm.create_model("vit_base_patch16_siglip_224", pretrained=False)
    profile = analyze(model, recognizer=recognizer)
    # attn_pool: latent 768, q 768*768 + 768, kv 768*1536 + 1536, proj 768*768 + 768, and its
    # MLP 768*3072 + 3072 + 3072*768 + 768 (the table once gave that MLP to mlp); no classifier
    pool = 768 + (768 * 768 + 768) + (768 * 1536 + 1536) + (768 * 768 + 768)
    assert profile.components[C.HEAD].params == pool + 2 * 768 * 3072 + 3072 + 768 == 7_085_568
    # 12 blocks of 768 x 3072 MLPs, 196 tokens: 12 * 2 * 196 * 768 * 3072 = 11_098_128_384
    assert profile.components[C.MLP].macs == 12 * 2 * 196 * 768 * 3072
    # its attention products are attn_core, in no block: 1 latent query x 196 keys x 768, twice
    pool_core = [op for op in profile.ops if op.component is C.ATTN_CORE and op.block is None]
    assert sum(op.macs for op in pool_core) == 2 * 196 * 768 == 301_056
    assert profile.self_checks == ()


def test_hugging_face_vit_mae_decoder_is_placed() -> None:
    profile = analyze(_hf_mae(), recognizer="tables")
    assert counts(profile, C.OTHER) == (0, 0) and len(profile.blocks) == 2 + 2
    decoder_blocks = {p.block for p in profile.params if ".decoder_layers." in p.name}
    assert decoder_blocks == {2, 3}  # numbered on after the encoder's
    # its mask token (32) and position embedding (16 patches + class token, 17 x 32)
    tokens = _params_under(profile, r"^decoder\.(mask_token|decoder_pos_embed)$")
    assert tokens == ({C.TOKENS}, 32 + 17 * 32)
    assert _params_under(profile, r"^decoder\.decoder_embed\.") == ({C.PATCH_EMBED}, 64 * 32 + 32)
    assert _params_under(profile, r"^decoder\.decoder_norm\.") == ({C.NORM}, 2 * 32)
    # the pixels of a patch: 8 x 8 x 3 = 192
    assert _params_under(profile, r"^decoder\.decoder_pred\.") == ({C.HEAD}, 32 * 192 + 192)


def test_timm_parallel_branches_layer_scales_follow_their_branch() -> None:
    profile = analyze(_timm("vit_small_patch16_18x2_224")(), recognizer="tables")
    # 18 blocks, each two parallel attentions and two parallel MLPs of width 384, each branch
    # with a layer scale of 384
    assert _params_under(profile, r"\.attns\.\d+\.ls\.") == ({C.ATTN_PROJ}, 18 * 2 * 384)
    assert _params_under(profile, r"\.ffns\.\d+\.ls\.") == ({C.MLP}, 18 * 2 * 384)
    assert counts(profile, C.OTHER) == (0, 0) and len(profile.blocks) == 18


def test_timm_diff_attention_sub_norm_is_norm_and_its_lambdas_attention_core() -> None:
    with torch.device("meta"):
        model = timm.create_model("vit_dwee_patch16_reg1_gap_256", pretrained=False)
    profile = analyze(model, recognizer="tables")
    # 14 blocks, 4 heads of 32 (256 / 4 / 2: DiffAttention splits each head in two): the
    # RmsNorm on the core's output is 2 x 32 wide, the lambdas are 4 vectors of 32
    assert _params_under(profile, r"\.attn\.sub_norm\.") == ({C.NORM}, 14 * 2 * 32)
    assert _params_under(profile, r"\.attn\.lambda_") == ({C.ATTN_CORE}, 14 * 4 * 32)


def _params_under(profile, pattern: str) -> tuple[set[C], int]:
    """The components of the parameters whose names match ``pattern``, and their count."""
    import re

    found = [p for p in profile.params if re.search(pattern, p.name)]
    return {p.component for p in found}, sum(p.numel for p in found)


@pytest.mark.parametrize(("name", "blocks"), [
    ("timm:mvitv2_tiny", 1 + 2 + 5 + 2),  # depths (1, 2, 5, 2)
    ("timm:botnet26t_256", 3),  # self-attention in the last three bottlenecks only
])
def test_a_bias_made_from_q_and_added_to_the_scores_is_no_residual_add(
    name: str, blocks: int
) -> None:
    # the relative-position logits are products of q with (gathered) tables, added to q k^T:
    # read as a residual join, the add cut the core and every block was lost to `other`
    profile = analyze(name, recognizer="graph")
    assert counts(profile, C.OTHER) == (0, 0) and profile.self_checks == ()
    assert len(profile.blocks) == blocks and profile.components[C.ATTN_CORE].macs > 0


def test_attention_without_products_is_found_by_its_module_name() -> None:
    # SwiftFormer's additive attention normalises q w_g over the tokens and weighs q and k
    # element-wise: no product of two activations shows a core. Its module's name does; the
    # convolutional encoders before it in each stage are conv, not part of its block
    profile = analyze("timm:swiftformer_xs", recognizer="graph")
    assert counts(profile, C.OTHER) == (0, 0) and profile.self_checks == ()
    assert len(profile.blocks) == 4  # one attention block closes each of the four stages
    assert profile.components[C.ATTN_CORE].vector_flops > 0
    # and the output says how it ran, not "none seen"
    assert profile.attention_implementation == "element-wise only, no product of activations"
    qkv, numel = _params_under(profile, r"\.attn\.to_(query|key)\.")
    assert numel > 0 and qkv == {C.ATTN_QKV}
    # a ConvEncoder: depthwise conv, BatchNorm, two pointwise convs, a layer scale
    conv, numel = _params_under(profile, r"^stages\.0\.blocks\.0\.(?!norm)")
    assert numel > 0 and conv == {C.CONV}


def test_a_standardized_weight_is_a_weight_not_an_activation() -> None:
    # the R26 stem of this hybrid standardises its conv weights in the forward (mean, variance,
    # subtract, divide: StdConv): a conv reading that weight read no parameter, so two chained
    # convs looked like the two products of an attention core (21 blocks, the stem in attn_core)
    profile = analyze("timm:vit_small_r26_s32_224", recognizer="graph")
    assert counts(profile, C.OTHER) == (0, 0) and profile.self_checks == ()
    assert len(profile.blocks) == 12  # ViT-S: depth 12
    # the standardised convs of the ResNet stages (their norms are norm)
    stem, numel = _params_under(profile, r"^patch_embed\.backbone\.stages\..*conv\d?\.weight$")
    assert numel > 0 and stem == {C.CONV}


@functools.cache
def _graph(name: str):
    return analyze(name, recognizer="graph")


@pytest.mark.parametrize(("name", "pattern", "component"), [
    # MaxViT: the MBConv before each window attention block, a residual branch outside the
    # blocks, is conv; each attention's MLP is mlp
    ("timm:maxvit_nano_rw_256", r"blocks\.\d+\.conv\.(shortcut|conv|se)", C.CONV),
    ("timm:maxvit_nano_rw_256", r"\.attn_(block|grid)\.mlp\.", C.MLP),
    # EfficientViT-M: the depthwise conv before the attention is a token mixer, conv; the
    # pointwise FFN beside it (no spatial kernel) stays mlp,
    ("timm:efficientvit_m0", r"blocks\.\d+\.dw0\.m\.conv\.", C.CONV),
    ("timm:efficientvit_m0", r"blocks\.\d+\.ffn0\.m\.pw\d\.conv\.", C.MLP),
    # and the depthwise conv after the attention too (the paper's token interaction before and
    # after it), the FFN after it mlp
    ("timm:efficientvit_m0", r"blocks\.\d+\.dw1\.m\.conv\.", C.CONV),
    ("timm:efficientvit_m0", r"blocks\.\d+\.ffn1\.m\.pw\d\.conv\.", C.MLP),
    # MobileViT: the MobileNetV2 blocks without a skip before the first transformer are conv,
    # the stem conv is the patch embedding
    ("timm:mobilevit_s", r"^stages\.[01]\.0\.conv\w+\.conv\.", C.CONV),
    ("timm:mobilevit_s", r"^stem\.conv\.", C.PATCH_EMBED),
    # and those between and after its transformers (stride 2, 96 to 128 and 128 to 160
    # channels) too, once patch_embed; each MobileViT block's local representation (3x3, then
    # 1x1 into the transformer's width) and fusion (1x1 out of it, 3x3 on the concatenation
    # with the input), on the stage's map, conv, the last block's too, once head; the 1x1 conv
    # of the model's own before the pooling stays head
    ("timm:mobilevit_s", r"^stages\.[34]\.0\.conv\w+\.conv\.", C.CONV),
    ("timm:mobilevit_s", r"^stages\.[234]\.1\.conv_(kxk\.conv|1x1|proj\.conv|fusion\.conv)\.",
     C.CONV),
    ("timm:mobilevit_s", r"^final_conv\.conv\.", C.HEAD),
    # MobileViTv2's block: a depthwise 3x3 and a 1x1 before its transformer, a 1x1 after it
    ("timm:mobilevitv2_050", r"^stages\.[234]\.1\.conv_(kxk\.conv|1x1|proj\.conv)\.", C.CONV),
    # but a conv on a map that a pooling then shrinks is a downsampling: NesT's ConvPool (3x3,
    # norm, max pooling of stride 2) between levels stays patch_embed; a 1x1 conv changing the
    # width before a residual branch's conv is no part of it: NextViT's patch_embed in a block
    ("timm:nest_tiny", r"^levels\.[12]\.pool\.conv\.", C.PATCH_EMBED),
    ("timm:nextvit_small", r"^stages\.0\.blocks\.0\.patch_embed\.conv\.", C.PATCH_EMBED),
    # a convolutional block after the last attention block is conv, not head: FastViT-SA12's
    # final_conv (a MobileOne block: a 3x3 and a 1x1 branch summed), once head; MobileNetV4
    # hybrid's last inverted residual (a depthwise 3x3 in its residual branch) after its last
    # attention; the classifier after them head
    ("timm:fastvit_sa12", r"^final_conv\.conv_\w+\.\d\.conv\.", C.CONV),
    ("timm:fastvit_sa12", r"^head\.fc\.", C.HEAD),
    ("timm:mobilenetv4_hybrid_medium", r"^blocks\.3\.15\.(dw_start|pw_exp|pw_proj)\.conv\.",
     C.CONV),
    ("timm:mobilenetv4_hybrid_medium", r"^classifier\.", C.HEAD),
    # EfficientFormerV2: the depthwise conv of v added to the core's output is part of the
    # core; the projection after that add is attn_proj (the walk stopped at the add)
    ("timm:efficientformerv2_s0", r"\.v_local\.conv\.", C.ATTN_CORE),
    ("timm:efficientformerv2_s0", r"\.token_mixer\.proj\.conv\.", C.ATTN_PROJ),
    # gemma4 ViT: the rotary frequencies (a product of positions and inverse frequencies) reach
    # SDPA through q's rotation; they made block 0's q projection a bias of a core, mlp
    ("timm:gemma4_vit_167m", r"\.attn\.q_proj\.", C.ATTN_QKV),
    # EfficientFormer's last stage holds one attention block, a flat span: the sum of its
    # distilled head's two classifiers after it reads no residual stream, head
    ("timm:efficientformer_l1", r"^head(_dist)?\.", C.HEAD),
    # a concatenation hands on all its inputs' producers: EfficientViT (MIT)'s qkv conv feeds
    # the core through cat([qkv, aggreg(qkv)]), once read as coming from aggreg alone (mlp);
    # CoaT's conv position encoding of v, cat of three depthwise convs, is added to the core's
    # output (as EfficientFormerV2's v_local), once read from its last conv alone (mlp)
    ("timm:efficientvit_b0", r"\.context_module\.main\.qkv\.", C.ATTN_QKV),
    ("timm:coat_tiny", r"^crpe\d\.conv_list\.", C.ATTN_CORE),
    # PVT v2 and Twins reduce the keys' and values' map with a strided conv before the k/v linear
    ("timm:pvt_v2_b0", r"\.attn\.sr\.", C.ATTN_QKV),
    ("timm:twins_pcpvt_small", r"\.attn\.sr\.", C.ATTN_QKV),
    # MViTv2 pools q, k and v after its qkv linear, and adds q back before its projection
    ("timm:mvitv2_tiny", r"\.attn\.qkv\.", C.ATTN_QKV),
    ("timm:mvitv2_tiny", r"\.attn\.proj\.", C.ATTN_PROJ),
    # its relative positions are written into the scores in place, so the softmax reads the
    # scores and those adds: the core is every record between its products, the shortest path
    # aside (else the pooling convs of k became a bias of the scores, attn_core)
    ("timm:mvitv2_tiny", r"\.attn\.pool_[qkv]\.", C.ATTN_QKV),
])
def test_graph_places_the_parts_of_hybrid_reduced_and_rotary_attention(
    name: str, pattern: str, component: C
) -> None:
    profile = _graph(name)
    components, numel = _params_under(profile, pattern)
    assert numel > 0 and components == {component}
    assert profile.self_checks == ()


def test_a_freed_storage_forgets_its_producer() -> None:
    # a tensor made outside the dispatch (ImageGPT's torch.tensor(mask_value)) can get the
    # address of a storage just freed; it must not inherit that storage's producer, which had
    # joined ImageGPT's third layer to its second (two blocks merged, 2 self-checks failed)

    from vitprof.count.counter import OpCounter, storage_key

    counter = OpCounter(torch.nn.Identity(), {})
    a = torch.empty(4, 4, device="meta")
    with counter.running():
        product = torch.mm(a, a)
        key = storage_key(product)
        assert counter.producer[key] == (0,)
        del product
        assert key not in counter.producer


def test_the_trace_keeps_the_sources_reaching_a_record_only_as_indices() -> None:

    from vitprof.count.counter import OpCounter

    counter = OpCounter(torch.nn.Identity(), {})
    tokens, weight = torch.empty(2, 8, 4, device="meta"), torch.empty(4, 1, device="meta")
    with counter.running():
        scores = (tokens.reshape(16, 4) @ weight).reshape(2, 8)  # record 0
        best = scores.topk(3, dim=1).indices
        picked = tokens.gather(1, best.unsqueeze(-1).expand(-1, -1, 4))
        picked * 2.0  # record 1: the scores chose its elements, gave none of their values
        scores * 2.0  # record 2: their values
    steps = counter.trace().steps
    assert (steps[1].sources, steps[1].indexed) == ((0,), (0,))
    assert (steps[2].sources, steps[2].indexed) == ((0,), ())


def test_a_record_reading_a_parameter_through_a_copy_reads_no_input_data() -> None:
    # a parameter repeated (a copying free op) reaches the add as a carried parameter: the
    # add reads no input data; taking the carried parameters before asking whether an operand
    # was made by nobody made it "unsourced" (pytorchvideo MViT's repeated position tables)

    from vitprof.count.counter import OpCounter

    table = torch.nn.Parameter(torch.empty(1, 2, 4, device="meta"))
    counter = OpCounter(torch.nn.Identity(), {"table": table})
    data = torch.empty(1, 4, 4, device="meta")
    with counter.running():
        made = table.repeat(1, 2, 1) * 2.0  # record 0: the table alone
        data + made  # record 1: the input data too
    steps = counter.trace().steps
    assert (steps[0].carried, steps[0].unsourced) == (("table",), False)
    assert (steps[1].sources, steps[1].unsourced) == ((0,), True)


def test_the_trace_marks_the_records_reading_the_models_input_data() -> None:
    # the input data, a view of it and a free op's copy of it are fed; a record's output is not,
    # nor is a record writing into the input (what it reads after is that record's output)

    from vitprof.count.counter import OpCounter

    counter = OpCounter(torch.nn.Identity(), {})
    data = torch.empty(1, 4, 2, 2, device="meta")
    counter.feed([data])
    with counter.running():
        flat = data.flatten(2).transpose(1, 2)
        made = flat * 2.0  # record 0: a view of the input
        flat.contiguous() + made  # record 1: a copy of it, and record 0
        made * 2.0  # record 2: a record's output alone
        data.mul_(2.0)  # record 3: writes into the input
        data * 2.0  # record 4: reads record 3's output
    assert [step.fed for step in counter.trace().steps] == [True, True, False, True, False]


def test_imagegpt_layers_are_one_block_each() -> None:
    config = transformers.ImageGPTConfig(n_embd=32, n_layer=3, n_head=2, n_positions=64,
                                         vocab_size=17)
    with torch.device("meta"):
        model = transformers.ImageGPTForImageClassification(config).to("meta")
    profile = analyze(model, recognizer="graph")
    assert len(profile.blocks) == 3 and profile.self_checks == ()
    # per layer, c_attn on 64 tokens: 64 * 32 * 96 = 196_608 MACs of attn_qkv
    assert profile.components[C.ATTN_QKV].macs == 3 * 64 * 32 * 96
