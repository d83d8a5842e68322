"""The closed form: hand-derived figures, equality with the counter on every zoo family,
linear attention and token pruning, spec inference and ``vitprof formula``.

Every literal is derived by the arithmetic beside it, from the layer shapes.
"""

from __future__ import annotations

import json

import pytest
import timm
import torch
import transformers
from timm.models.vision_transformer import VisionTransformer as TimmViT
from torch import nn
from torchvision.models import VisionTransformer

from vitprof import Component as C
from vitprof import Counts, UserError, analyze
from vitprof.cli.main import main
from vitprof.models.closed_form import (
    AttentionImpl,
    AttentionKind,
    FinalNorm,
    HeadKind,
    ViTSpec,
    block_counts,
    closed_form,
    patch_embed_counts,
)
from vitprof.models.notes import note001, note002, note004
from vitprof.models.reference import build_reference_vit
from vitprof.models.spec_inference import spec_from_model
from vitprof.models.zoo import build

VIT_B_16 = ViTSpec(image_size=224, patch_size=16, width=768, depth=12, heads=12, mlp_width=3072)
CIFAR_VIT = ViTSpec(
    image_size=32, patch_size=4, width=512, depth=6, heads=8, mlp_width=2048, num_classes=10,
    attention_impl=AttentionImpl.SCALED_SCORES,
)


def assert_counter_equals_closed_form(model: nn.Module, spec: ViTSpec, **kwargs) -> None:
    """analyze(model) == closed_form(spec), per component and per block, nothing unsupported."""
    profile = analyze(model, **kwargs)
    form = closed_form(spec, kwargs.get("batch_size", 1))
    assert profile.unsupported_ops == {}
    assert profile.components == form.components
    assert [block.components for block in profile.blocks] == form.blocks


# --------------------------------------------------------------------------- hand-derived figures


def test_vit_b_16_by_hand() -> None:
    form = closed_form(VIT_B_16)
    # params: patch 3*16*16*768 + 768 = 590_592; tokens 768 + 197*768 = 152_064;
    # block: qkv 3*768^2 + 3*768 = 1_771_776, proj 768^2 + 768 = 590_592,
    #        mlp 2*768*3072 + 3072 + 768 = 4_722_432, norms 4*768 = 3_072 -> 7_087_872 (x12);
    # final norm 2*768 = 1_536; head 768*1000 + 1000 = 769_000
    assert form.totals.params == 590_592 + 152_064 + 12 * 7_087_872 + 1_536 + 769_000
    assert form.totals.params == 86_567_656
    # MACs: patch 196*768*768 = 115_605_504; block: qkv 197*768*2304 = 348_585_984,
    # core 2*12*197^2*64 = 59_610_624, proj 197*768^2 = 116_195_328, mlp 2*197*768*3072 =
    # 929_562_624 -> 1_453_954_560 (x12); head 768*1000 = 768_000
    assert form.totals.macs == 115_605_504 + 12 * 1_453_954_560 + 768_000 == 17_563_828_224
    # attn_core: 12 blocks x 2 products x 12 heads x 197 x 197 x 64 = 715_327_488
    assert form.components[C.ATTN_CORE].macs == 12 * 2 * 12 * 197 * 197 * 64 == 715_327_488
    # vector: patch bias 196*768 = 150_528; position add 197*768 = 151_296; block: norms
    # 2*7*197*768 = 2_118_144, qkv bias 3*197*768 = 453_888, sdpa 6*12*197^2 = 2_794_248,
    # proj bias + residual 2*151_296 = 302_592, mlp 6*197*3072 + 2*151_296 = 3_933_696
    # -> 9_602_568 (x12); final norm 7*197*768 = 1_059_072; head bias 1_000
    block = 2_118_144 + 453_888 + 2_794_248 + 302_592 + 3_933_696
    assert block == 9_602_568
    assert form.totals.vector_flops == 150_528 + 151_296 + 12 * block + 1_059_072 + 1_000
    assert form.totals.vector_flops == 116_592_712
    assert form.totals.flops == 2 * 17_563_828_224


def test_cifar_vit_params_are_19m_not_the_notes_8_5m() -> None:
    form = closed_form(CIFAR_VIT)
    # patch 3*4*4*512 + 512 = 25_088; tokens 512 + 65*512 = 33_792;
    # block: qkv 3*512^2 + 3*512 = 787_968, proj 512^2 + 512 = 262_656,
    #        mlp 2*512*2048 + 2048 + 512 = 2_099_712, norms 4*512 = 2_048 -> 3_152_384 (x6);
    # final norm 1_024; head 512*10 + 10 = 5_130
    assert form.totals.params == 25_088 + 33_792 + 6 * 3_152_384 + 1_024 + 5_130 == 18_979_338
    # the note's table: 6 blocks "~8M", total "~8.5M"; the blocks alone hold 18_914_304
    blocks = sum((c.params for block in form.blocks for c in block.values()), 0)
    assert blocks == 6 * 3_152_384 == 18_914_304
    # mlp MACs: 6 x 2 x 65 x 512 x 2048 = 817_889_280
    assert form.components[C.MLP].macs == 817_889_280
    # attention scores: 6 x 2 x 65^2 x 512 = 25_958_400 MACs, 6 x 8 x 65^2 x 6 vector FLOPs
    assert form.components[C.ATTN_CORE] == Counts(0, 25_958_400, 1_216_800)


def test_linear_attention_by_hand() -> None:
    form = closed_form(ViTSpec(**{**CIFAR_VIT.as_dict(), "attention": "linear"}))
    # per block and head K^T V (64 x 65 x 64) and Q (K^T V) (65 x 64 x 64): 2 x 65 x 512 x 64
    # = 4_259_840 MACs; ReLU on q and k: 2 x 65 x 512 = 66_560 vector FLOPs; 6 blocks
    assert form.components[C.ATTN_CORE] == Counts(0, 6 * 4_259_840, 6 * 66_560)
    assert form.components[C.ATTN_CORE].macs < closed_form(CIFAR_VIT).components[C.ATTN_CORE].macs


def test_token_pruning_by_hand() -> None:
    # note 002's default schedule (1, 1, 0.7, 0.7, 0.49, 0.49) of 64 patch tokens:
    # int(64*0.7) = 44, int(64*0.49) = 31; predictors before blocks 2 and 4
    spec = ViTSpec(**{**CIFAR_VIT.as_dict(), "tokens_per_block": (64, 64, 44, 44, 31, 31)})
    assert spec.predictor_blocks == (2, 4)
    form = closed_form(spec)
    # a predictor is counted in the block it prunes for: its LayerNorm is norm, 2*512 = 1_024
    # params and 7*512 = 3_584 vector FLOPs a token; its Linear(512, 128) (512*128 + 128 =
    # 65_664 params) and Linear(128, 1) (128 + 1 = 129) are mlp: 65_793 params, 512*128 + 128 =
    # 65_664 MACs and 128 bias + 5*128 GELU + 1 bias = 769 vector FLOPs a token
    # block 2 sees 1 + 44 = 45 tokens and its predictor scores 64; block 4: 32 tokens, 44 scored
    for block, tokens, scored in ((2, 45, 64), (4, 32, 44)):
        plain = block_counts(spec, tokens)
        assert form.blocks[block][C.NORM] - plain[C.NORM] == Counts(1_024, 0, scored * 3_584)
        assert form.blocks[block][C.MLP] - plain[C.MLP] == Counts(
            65_793, scored * 65_664, scored * 769)
    assert form.components[C.OTHER] == Counts()
    assert form.totals.params == closed_form(CIFAR_VIT).totals.params + 2 * 66_817
    # block 4 sees 1 + 31 = 32 tokens: qkv 32 x 512 x 1536 = 25_165_824 MACs
    assert form.blocks[4][C.ATTN_QKV].macs == 25_165_824
    # the final norm sees 32 tokens: 7 x 32 x 512 = 114_688
    assert form.outside[C.NORM].vector_flops == 114_688


def test_note001_head_and_mha_attribution_by_hand() -> None:
    spec = ViTSpec(
        224, 16, 768, 12, 12, 3072, num_classes=10, head="hidden", final_norm="pooled",
        attention_impl="mha_weights",
    )
    form = closed_form(spec)
    # MLPHead: Linear(768, 768) 590_592 + Linear(768, 10) 7_690 params; bias 768 + GELU 5*768
    # + bias 10 = 4_618 vector FLOPs; its LayerNorm on the CLS vector is norm: 7 x 768
    assert form.outside[C.HEAD] == Counts(598_282, 768 * 768 + 768 * 10, 4_618)
    assert form.outside[C.NORM] == Counts(1_536, 0, 5_376)
    # attn_core per block: q scale 197*768 = 151_296, softmax 5*12*197^2 = 2_328_540,
    # mean over heads 12*197^2 = 465_708
    assert form.blocks[0][C.ATTN_CORE].vector_flops == 151_296 + 2_328_540 + 465_708
    # the residual add follows the data: it adds out_proj's output, so it is attn_proj's,
    # beside out_proj's bias: 2 x 197 x 768
    assert form.blocks[0][C.ATTN_PROJ].vector_flops == 2 * 151_296


def test_distilled_and_gap_heads_by_hand() -> None:
    deit = closed_form(ViTSpec(224, 16, 192, 12, 3, 768, dist_token=True, head="distilled"))
    # two Linear(192, 1000); bias 2 x 1000, then (a + b) / 2: 1000 adds and 1000 divides
    assert deit.outside[C.HEAD] == Counts(2 * 193_000, 2 * 192_000, 4_000)
    # cls + dist + position embedding over 196 + 2 rows: (2 + 198) x 192 = 38_400
    assert deit.outside[C.TOKENS] == Counts(38_400, 0, 198 * 192)
    gap = closed_form(ViTSpec(
        256, 16, 768, 12, 12, 3072, class_token=False, reg_tokens=4, head="gap",
        pos_embed_covers_prefix=False, final_norm="pooled",
    ))
    # mean over 256 patch tokens (registers excluded): 256 x 768; head bias 1000
    assert gap.outside[C.HEAD].vector_flops == 256 * 768 + 1_000
    # 4 registers + 256 position rows; the position add covers the 256 patches only
    assert gap.outside[C.TOKENS] == Counts((4 + 256) * 768, 0, 256 * 768)
    # fc_norm on the pooled vector only
    assert gap.outside[C.NORM] == Counts(2 * 768, 0, 7 * 768)


def test_batch_scales_macs_and_vector_flops_not_params() -> None:
    one, three = closed_form(CIFAR_VIT), closed_form(CIFAR_VIT, batch_size=3)
    for component in C:
        a, b = one.components[component], three.components[component]
        assert (b.params, b.macs, b.vector_flops) == (a.params, 3 * a.macs, 3 * a.vector_flops)


def test_components_are_outside_plus_blocks() -> None:
    form = closed_form(ViTSpec(32, 4, 64, 3, 4, 96, tokens_per_block=(40, 20, 20)))
    for component in C:
        inside = sum((block[component] for block in form.blocks), Counts())
        assert form.components[component] == form.outside[component] + inside


# --------------------------------------------------------------------------- every zoo family


def _meta(factory):
    with torch.device("meta"):
        return factory()


def _timm(name: str, fused: bool = True, **kwargs) -> nn.Module:
    model = _meta(lambda: timm.create_model(name, pretrained=False, **kwargs))
    for block in model.blocks:
        block.attn.fused_attn = fused
    return model


def _hf(kind: str, implementation: str, **config) -> nn.Module:
    config_class = transformers.DeiTConfig if kind.startswith("DeiT") else transformers.ViTConfig
    cfg = config_class(attn_implementation=implementation, **config)
    return _meta(lambda: getattr(transformers, kind)(cfg))


HF_BASE = {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
           "intermediate_size": 3072, "patch_size": 16, "image_size": 224, "num_labels": 1000}
HF_SMALL = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
            "intermediate_size": 96, "patch_size": 8, "image_size": 32, "num_labels": 7}

FAMILY_CASES = [
    *[pytest.param(lambda n=n: build(n).module, id=n)
      for n in ("vit_b_16", "vit_b_32", "vit_l_16", "vit_l_32", "vit_h_14")],
    pytest.param(lambda: build("vit_b_16", image_size=384).module, id="vit_b_16@384"),
    pytest.param(lambda: _timm("vit_tiny_patch16_224"), id="timm-vit_tiny"),
    pytest.param(lambda: _timm("vit_tiny_patch16_224", fused=False), id="timm-vit_tiny-explicit"),
    pytest.param(lambda: _timm("deit_small_patch16_224"), id="timm-deit_small"),
    pytest.param(lambda: _timm("deit_tiny_distilled_patch16_224"), id="timm-deit_tiny_distilled"),
    pytest.param(lambda: _timm("vit_base_patch16_reg4_gap_256"), id="timm-reg4_gap"),
    pytest.param(lambda: _timm("vit_tiny_patch16_224", num_classes=0), id="timm-headless"),
    pytest.param(lambda: _timm("vit_tiny_patch16_224", img_size=(224, 320)),
                 id="timm-vit_tiny@224x320"),
    pytest.param(lambda: _hf("ViTModel", "sdpa", **{**HF_SMALL, "image_size": [32, 48]}),
                 id="hf-ViTModel@32x48"),
    pytest.param(lambda: _hf("ViTForImageClassification", "sdpa", **HF_BASE), id="hf-base-sdpa"),
    pytest.param(lambda: _hf("ViTForImageClassification", "eager", **HF_BASE), id="hf-base-eager"),
    pytest.param(lambda: _hf("ViTModel", "sdpa", **HF_SMALL), id="hf-ViTModel-pooler"),
    pytest.param(lambda: _hf("DeiTForImageClassificationWithTeacher", "eager", **HF_SMALL),
                 id="hf-DeiT-teacher"),
    pytest.param(lambda: _hf("DeiTForImageClassification", "sdpa", **HF_SMALL), id="hf-DeiT"),
    pytest.param(lambda: build("note001_vit_b16").module, id="note001"),
    pytest.param(lambda: _meta(lambda: note001.build_note001_vit(patcher="unfold")),
                 id="note001-unfold"),
    *[pytest.param(lambda n=n: build(n).module, id=n)
      for n in ("note002_cifar_vit", "note002_linear_attention", "note002_dynamic_vit",
                "note002_cifar_vit_tiny", "note004_vit_b16")],
    pytest.param(lambda: _meta(lambda: note002.build_cifar_vit(64, 200, patch_size=8)),
                 id="note002-tinyimagenet"),
    pytest.param(lambda: _meta(lambda: note004.build_note004_vit(qkv_bias=True)),
                 id="note004-qkv_bias"),
]


@pytest.mark.parametrize("factory", FAMILY_CASES)
def test_closed_form_of_inferred_spec_equals_counter(factory) -> None:
    model = factory()
    spec = spec_from_model(model)
    assert_counter_equals_closed_form(model, spec)


@pytest.mark.parametrize(
    ("factory", "expected"),
    [
        pytest.param(lambda: build("vit_b_16").module, VIT_B_16, id="torchvision"),
        pytest.param(lambda: build("note002_cifar_vit").module, CIFAR_VIT, id="note002"),
        pytest.param(
            lambda: _timm("vit_base_patch16_reg4_gap_256", fused=False),
            ViTSpec(256, 16, 768, 12, 12, 3072, class_token=False, reg_tokens=4,
                    pos_embed_covers_prefix=False, head=HeadKind.GAP,
                    final_norm=FinalNorm.POOLED, attention_impl=AttentionImpl.SCALED_QUERY),
            id="timm-reg4-gap-explicit",
        ),
        pytest.param(
            lambda: build("note002_linear_attention").module,
            ViTSpec(**{**CIFAR_VIT.as_dict(), "attention": AttentionKind.LINEAR}),
            id="note002-linear",
        ),
        pytest.param(
            lambda: _hf("ViTModel", "eager", **HF_SMALL),
            ViTSpec(32, 8, 64, 2, 4, 96, num_classes=0, head=HeadKind.POOLER,
                    attention_impl=AttentionImpl.SCALED_SCORES),
            id="hf-ViTModel",
        ),
    ],
)
def test_inferred_spec_fields(factory, expected: ViTSpec) -> None:
    assert spec_from_model(factory()) == expected


def test_timm_small_variants_built_by_hand() -> None:
    # fc_norm with token pooling, and no final norm at all
    pooled = _meta(lambda: TimmViT(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=4,
                                   num_classes=5, fc_norm=True, reg_tokens=2))
    none = _meta(lambda: TimmViT(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=4,
                                 num_classes=5, final_norm=False, qkv_bias=False))
    assert spec_from_model(pooled).final_norm is FinalNorm.POOLED
    assert spec_from_model(none).final_norm is FinalNorm.NONE
    for model in (pooled, none):
        assert_counter_equals_closed_form(model, spec_from_model(model))


# --------------------------------------------------------------------------- note 002 variants

SCHEDULES = [
    (1.0, 1.0, 1.0, 1.0, 1.0, 1.0),
    (1.0, 1.0, 0.7, 0.7, 0.49, 0.49),
    (1.0, 0.5, 0.5, 0.25, 0.25, 0.25),
    (0.5, 0.5, 0.4, 0.3, 0.2, 0.1),  # pruning before block 0
    (0.9, 0.8, 0.7),  # a shorter model: depth follows the schedule
]


@pytest.mark.parametrize("ratios", SCHEDULES, ids=lambda r: ",".join(map(str, r)))
@pytest.mark.parametrize("batch_size", [1, 2])
def test_token_pruning_schedules(ratios: tuple[float, ...], batch_size: int) -> None:
    model = _meta(lambda: note002.build_dynamic_vit(keep_ratios=ratios))
    # the spec from the schedule alone, before any model exists
    spec = ViTSpec(
        **{**CIFAR_VIT.as_dict(), "depth": len(ratios),
           "tokens_per_block": tuple(note002.tokens_per_block(64, ratios)),
           "prune_at": tuple(note002.pruning_blocks(ratios))},
    )
    assert spec_from_model(model) == spec
    assert_counter_equals_closed_form(model, spec, batch_size=batch_size)


def test_pruning_with_a_predictor_that_drops_nothing() -> None:
    # 4 patch tokens: int(4*0.9) = 3 and int(4*0.8) = 3, yet block 1 has its own predictor
    ratios = (0.9, 0.8)
    model = _meta(lambda: note002.build_dynamic_vit(ratios, image_size=8, embed_dim=32,
                                                    num_heads=4))
    spec = spec_from_model(model)
    assert spec.tokens_per_block == (3, 3) and spec.predictor_blocks == (0, 1)
    assert_counter_equals_closed_form(model, spec)


@pytest.mark.parametrize(
    ("image_size", "patch_size", "heads"), [(32, 4, 8), (64, 8, 4), (32, 2, 2)]
)
def test_linear_attention_shapes(image_size: int, patch_size: int, heads: int) -> None:
    model = _meta(lambda: note002.build_linear_attention_vit(
        image_size=image_size, patch_size=patch_size, embed_dim=64, depth=3, num_heads=heads,
    ))
    spec = ViTSpec(image_size, patch_size, 64, 3, heads, 256, num_classes=10,
                   attention=AttentionKind.LINEAR, attention_impl=AttentionImpl.SCALED_SCORES)
    assert spec_from_model(model) == spec
    assert_counter_equals_closed_form(model, spec, batch_size=2)


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"image_size": 3}, "image size 3 is smaller than the patch size 4: it makes no patch"),
        ({"heads": 5}, "not divisible by 5 heads"),
        ({"width": 0}, "width must be at least 1"),
        ({"num_classes": -1}, "must not be negative"),
        ({"class_token": False}, "reads the class token"),
        ({"head": "distilled"}, "needs both a class token and a distillation token"),
        ({"head": "attention"}, "unknown head 'attention'"),
        ({"attention_impl": "mha_weights", "qkv_bias": False}, "needs qkv_bias"),
        ({"tokens_per_block": (64, 64)}, "need 6 entries"),
        ({"tokens_per_block": (64, 64, 70, 64, 64, 64)}, "must lie in [1, 64]"),
        ({"tokens_per_block": (64,) * 5 + (10,), "prune_at": (2,)}, "no predictor"),
        ({"prune_at": (1,)}, "prune_at needs tokens_per_block"),
    ],
)
def test_invalid_specs_are_user_errors(changes: dict, message: str) -> None:
    with pytest.raises(UserError) as error:
        ViTSpec(**{**CIFAR_VIT.as_dict(), **changes})
    assert message in str(error.value)


def _with_extra_parameter() -> nn.Module:
    model = _meta(note004.build_note004_vit)
    model.extra = nn.Parameter(torch.zeros(3, device="meta"))
    return model


@pytest.mark.parametrize(
    ("factory", "message"),
    [
        pytest.param(lambda: nn.Linear(2, 2), "cannot infer a ViTSpec from Linear", id="not-a-vit"),
        pytest.param(lambda: _timm("deit3_small_patch16_224"), "layer scale", id="layer-scale"),
        pytest.param(lambda: _meta(lambda: note001.build_note001_vit(batch_size=2)),
                     "batch above 1", id="note001-batch"),
        pytest.param(lambda: _hf("ViTForImageClassification", "sdpa", hidden_act="relu",
                                 **HF_SMALL), "activation 'relu'", id="hf-relu"),
        pytest.param(_with_extra_parameter, "params where its spec has", id="extra-param"),
        pytest.param(
            lambda: _meta(lambda: VisionTransformer(32, 8, 2, 4, 64, 96, representation_size=16)),
            "pre-logits", id="torchvision-representation",
        ),
    ],
)
def test_models_a_spec_cannot_describe(factory, message: str) -> None:
    with pytest.raises(UserError) as error:
        spec_from_model(factory())
    assert message in str(error.value)


def test_image_size_must_match_the_model() -> None:
    model = build("note002_cifar_vit").module
    assert spec_from_model(model, image_size=32) == CIFAR_VIT
    assert spec_from_model(model, image_size=(32, 32)) == CIFAR_VIT
    with pytest.raises(UserError, match="built for 32px images, not 64px"):
        spec_from_model(model, image_size=64)
    with pytest.raises(UserError, match="built for 32px images, not 32x48px"):
        spec_from_model(model, image_size=(32, 48))


def test_a_side_the_patch_does_not_divide_floors_as_the_patch_convolution() -> None:
    """384 = 27 x 14 + 6 and 390 = 27 x 14 + 12: a stride-14 convolution makes 27 x 27 patches
    and reads none of the last 6 rows and 12 columns; the closed form counts those patches and
    says so, where it refused the size before."""
    spec = ViTSpec(**{**VIT_B_16.as_dict(), "patch_size": 14, "image_size": (384, 390)})
    assert spec.num_patches == 27 * 27
    assert spec.floor is not None and spec.floor.text() == (
        "the patch embedding (stride 14) floors its 384x390 input to 27x27, leaving the last 6 "
        "rows and 12 columns unread")
    assert VIT_B_16.floor is None  # 224 = 14 x 16
    # the patch embedding: 729 patches x 768 outputs x (3 x 14 x 14) MACs = 329,204,736
    assert patch_embed_counts(spec).macs == 729 * 768 * 3 * 14 * 14 == 329_204_736
    floored = ViTSpec(**{**CIFAR_VIT.as_dict(), "image_size": 34})  # 34 = 8 x 4 + 2
    assert closed_form(floored).components == closed_form(CIFAR_VIT).components


def test_the_reference_vit_floors_as_the_closed_form() -> None:
    """The closed form at a floored size is the count of the model it describes, whose
    stride-P convolution floors the same way (CIFAR-ViT at 35: 8 x 8 patches of 4)."""
    spec = ViTSpec(**{**CIFAR_VIT.as_dict(), "image_size": 35})
    with torch.device("meta"):
        model = build_reference_vit(spec)
    assert_counter_equals_closed_form(model, spec, image_size=35)


def test_a_non_square_image_has_rows_times_columns_patches() -> None:
    spec = ViTSpec(**{**VIT_B_16.as_dict(), "image_size": (224, 320)})
    assert spec.sides == (224, 320) and spec.num_patches == 14 * 20  # 224/16 rows, 320/16 cols
    tall = ViTSpec(**{**VIT_B_16.as_dict(), "image_size": [320, 224]})  # a list, as from JSON
    assert tall.image_size == (320, 224) and tall.num_patches == 20 * 14
    form = closed_form(spec)
    # 281 tokens (280 patches + the class token) in each of the 12 blocks:
    # qkv 281*768*2304 + core 2*281^2*768 + proj 281*768^2 + mlp 2*281*768*3072
    block_macs = 281 * 768 * 2304 + 2 * 281 * 281 * 768 + 281 * 768 * 768 + 2 * 281 * 768 * 3072
    # = 497_221_632 + 121_284_096 + 165_740_544 + 1_325_924_352
    assert block_macs == 2_110_170_624
    # + patch conv 280 * 768 * (3*16*16) + head 768 * 1000
    assert form.totals.macs == 12 * block_macs + 280 * 768 * 768 + 768 * 1000
    assert form.components[C.TOKENS].params == (1 + 281) * 768  # class token + 281 positions
    with pytest.raises(UserError, match="image_size must be an int or"):
        ViTSpec(**{**VIT_B_16.as_dict(), "image_size": (224,)})


# --------------------------------------------------------------------------- vitprof formula


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


CIFAR_FLAGS = ["--width", "512", "--depth", "6", "--heads", "8", "--patch-size", "4",
               "--image-size", "32", "--num-classes", "10", "--attention-impl", "scaled_scores"]


def test_formula_prints_the_cifar_vit_params_and_macs_per_component(capsys) -> None:
    code, out, err = run_cli(["formula", "note002_cifar_vit"], capsys)
    assert code == 0 and err == ""
    assert "18,979,338" in out and "(18.98 M)" in out  # derived in the test above
    assert "817,889,280" in out  # mlp MACs: 6 x 2 x 65 x 512 x 2048
    assert "25,958,400" in out  # attn_core MACs: 6 x 2 x 65^2 x 512
    assert "FLOPs = 2 x MACs" in out
    for component in C:
        assert component.value in out


@pytest.mark.parametrize(
    ("argv", "same_as"),
    [
        pytest.param(["formula", *CIFAR_FLAGS], "note002_cifar_vit", id="flags-reproduce-model"),
        pytest.param(["formula", *CIFAR_FLAGS, "--attention", "linear"],
                     "note002_linear_attention", id="linear-attention"),
        pytest.param(["formula", "note002_cifar_vit", "--keep-ratios", "1,1,0.7,0.7,0.49,0.49"],
                     "note002_dynamic_vit", id="keep-ratios"),
        pytest.param(["formula", "vit_b_16", "--image-size", "384", "--batch-size", "2"],
                     ("vit_b_16", 384, 2), id="model-with-overrides"),
        # ViT-S/16 at 224 x 320: 14 x 20 patches + 1 class token = 281 tokens
        pytest.param(["formula", "timm:vit_small_patch16_224", "--image-size", "224x320"],
                     ("timm:vit_small_patch16_224", (224, 320), 1), id="model-at-HxW"),
        pytest.param(["formula", "--image-size", "224x320", "--patch-size", "16", "--width",
                      "384", "--depth", "12", "--heads", "6"],
                     ("timm:vit_small_patch16_224", (224, 320), 1), id="flags-at-HxW"),
    ],
)
def test_formula_json_equals_counter(argv: list[str], same_as, capsys) -> None:
    name, image, batch = same_as if isinstance(same_as, tuple) else (same_as, None, 1)
    code, out, _ = run_cli([*argv, "--format", "json"], capsys)
    data = json.loads(out)
    assert code == 0 and "FLOPs = 2 x MACs" in data["convention"]
    profile = analyze(name, image_size=image, batch_size=batch)
    assert data["components"] == {str(c): v.as_dict() for c, v in profile.components.items()}
    assert [b["components"] for b in data["blocks"]] == [
        {str(c): v.as_dict() for c, v in b.components.items()} for b in profile.blocks
    ]


def test_formula_block_view_rows_add_up(capsys) -> None:
    code, out, _ = run_cli(["formula", "note002_dynamic_vit", "--by", "block"], capsys)
    assert code == 0
    rows = [line.split() for line in out.splitlines() if line[:1].isdigit() or
            line.startswith("outside")]
    params = sum(int(row[2].replace(",", "")) for row in rows)
    assert params == closed_form(spec_from_model(build("note002_dynamic_vit").module)).totals.params
    assert not any(row[1] == "other" for row in rows)
    # the predictor before block 2 is in its mlp: 2*512*2048 + 2048 + 512 = 2_099_712 of the
    # block's own MLP, + Linear(512, 128) 65_664 + Linear(128, 1) 129 = 2_165_505
    assert ["2", "mlp", "2,165,505"] in [row[:3] for row in rows]


def test_formula_markdown(capsys) -> None:
    code, out, _ = run_cli(["formula", *CIFAR_FLAGS, "--format", "markdown"], capsys)
    assert code == 0
    assert "| component | params | MACs | FLOPs | vector FLOPs | % MACs |" in out
    assert "| total | 18,979,338 |" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["formula", "--width", "0"], "positive integer", id="zero-width"),
        pytest.param(["formula", "--head", "foo"], "invalid choice", id="bad-head"),
        pytest.param(["formula", "--keep-ratios", "a,b"], "comma-separated", id="bad-ratios"),
    ],
)
def test_formula_usage_errors_exit_2(argv: list[str], message: str, capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert message in line


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["formula", "--width", "64"], "missing --image-size", id="missing-flags"),
        pytest.param(["formula", *CIFAR_FLAGS, "--heads", "7"], "not divisible by 7 heads",
                     id="heads"),
        pytest.param(["formula", *CIFAR_FLAGS, "--no-class-token"], "reads the class token",
                     id="no-class-token"),
        pytest.param(["formula", "note002_cifar_vit", "--keep-ratios", "1,0.5"],
                     "need 6 keep ratios", id="short-schedule"),
        pytest.param(["formula", "note002_cifar_vit", "--keep-ratios", "1,1,1,1,1,2"],
                     "must lie in (0, 1]", id="ratio-above-one"),
        pytest.param(["formula", "vit_b_17"], "unknown model", id="unknown-model"),
        pytest.param(["formula", "torchvision.models:resnet18"], "cannot infer a ViTSpec",
                     id="not-a-vit"),
    ],
)
def test_formula_user_errors_are_one_line(argv: list[str], message: str, capsys) -> None:
    code, out, err = run_cli(argv, capsys)
    assert code == 2 and out == ""
    assert err.startswith("vitprof: error:") and err.count("\n") == 1
    assert message in err
