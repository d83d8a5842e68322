"""Property tests: for random small ViT specs, the counter and the closed form agree exactly.

Each example builds a model from the spec on the meta device, counts it with ``analyze`` and
compares params, MACs and vector FLOPs per component and per block with ``closed_form``, under
the name-based recognizer and under the graph recognizer, which ``auto`` gives such a model.
Images are square or not (H x W, each side a multiple of the patch). The models are tiny
(width <= 64, image <= 64 pixels) so that hundreds of examples run in seconds.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st
from timm.models.deit import VisionTransformerDistilled
from timm.models.vision_transformer import VisionTransformer as TimmViT

from vitprof import analyze
from vitprof.models.closed_form import (
    AttentionImpl,
    AttentionKind,
    FinalNorm,
    HeadKind,
    ViTSpec,
    closed_form,
)
from vitprof.models.reference import build_reference_vit
from vitprof.models.spec_inference import spec_from_model

NEEDS_CLASS_TOKEN = (HeadKind.TOKEN, HeadKind.HIDDEN, HeadKind.POOLER, HeadKind.DISTILLED)


@st.composite
def geometry(draw: st.DrawFn) -> dict[str, int]:
    """Image (an int for a square, else (H, W)), patch, width, heads, depth, MLP width and
    channels of a tiny ViT."""
    heads = draw(st.integers(1, 4))
    patch = draw(st.sampled_from((1, 2, 4, 8, 16)))
    rows, cols = (draw(st.integers(1, min(8, 64 // patch))) for _ in range(2))
    return {
        "patch_size": patch,
        "image_size": patch * rows if rows == cols else (patch * rows, patch * cols),
        "heads": heads,
        "width": heads * draw(st.integers(1, 16)),
        "depth": draw(st.integers(1, 4)),
        "mlp_width": draw(st.integers(1, 96)),
        "in_chans": draw(st.integers(1, 4)),
        "num_classes": draw(st.integers(0, 12)),
    }


@st.composite
def pruning(draw: st.DrawFn, depth: int, num_patches: int) -> dict[str, tuple[int, ...]]:
    """A token schedule: before each block a predictor may keep fewer (or as many) tokens."""
    tokens, prune_at, previous = [], [], num_patches
    for index in range(depth):
        if draw(st.booleans()):
            prune_at.append(index)
            previous = draw(st.integers(1, previous))
        tokens.append(previous)
    return {"tokens_per_block": tuple(tokens), "prune_at": tuple(prune_at)}


@st.composite
def specs(draw: st.DrawFn) -> ViTSpec:
    """Any spec the reference ViT can be built from, 0-5 prefix tokens, every head kind."""
    fields = draw(geometry())
    head = draw(st.sampled_from(HeadKind))
    impl = draw(st.sampled_from(AttentionImpl))
    fields.update(
        head=head,
        class_token=head in NEEDS_CLASS_TOKEN or draw(st.booleans()),
        dist_token=head is HeadKind.DISTILLED or draw(st.booleans()),
        reg_tokens=draw(st.integers(0, 3)),
        pos_embed_covers_prefix=draw(st.booleans()),
        qkv_bias=impl is AttentionImpl.MHA_WEIGHTS or draw(st.booleans()),
        final_norm=draw(st.sampled_from(FinalNorm)),
        attention=draw(st.sampled_from(AttentionKind)),
        attention_impl=impl,
    )
    num_patches = ViTSpec(**fields).num_patches
    if fields["width"] >= 4 and draw(st.booleans()):
        fields.update(draw(pruning(fields["depth"], num_patches)))
    return ViTSpec(**fields)


def _spec(**fields: object) -> ViTSpec:
    return ViTSpec(**{"image_size": 16, "patch_size": 4, "width": 16, "depth": 2, "heads": 2,
                      "mlp_width": 24, "num_classes": 3, **fields})


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(spec=specs(), batch_size=st.integers(1, 2))
@example(spec=_spec(head="token"), batch_size=1)
@example(spec=_spec(head="gap", class_token=False, reg_tokens=3), batch_size=1)
@example(spec=_spec(head="hidden", final_norm="pooled", attention_impl="mha_weights"),
         batch_size=2)
@example(spec=_spec(head="pooler", num_classes=0, qkv_bias=False), batch_size=1)
@example(spec=_spec(head="distilled", dist_token=True, reg_tokens=3, attention="linear",
                    tokens_per_block=(10, 4)), batch_size=2)
@example(spec=_spec(image_size=(8, 20), head="gap", class_token=False), batch_size=1)
@pytest.mark.parametrize(("recognizer", "family"), [("tables", "graph"), ("graph", "graph")])
def test_counter_equals_closed_form(
    recognizer: str, family: str, spec: ViTSpec, batch_size: int
) -> None:
    with torch.device("meta"):
        model = build_reference_vit(spec)
    profile = analyze(model, batch_size=batch_size, recognizer=recognizer)
    form = closed_form(spec, batch_size)
    assert profile.recognizer == family and profile.warnings == ()
    assert profile.unsupported_ops == {}
    assert profile.components == form.components
    assert [block.components for block in profile.blocks] == form.blocks


def _one_block_two_classifiers(spec: ViTSpec) -> bool:
    return spec.depth == 1 and spec.head is HeadKind.DISTILLED and spec.num_classes > 0


@pytest.mark.parametrize("final_norm", ["tokens", "none"])
def test_graph_one_block_distilled_head(final_norm: str) -> None:
    # after the only block, head(x[:, 0]) + head_dist(x[:, 1]) adds two branches that read the
    # block's output (through the final norm or not), neither of them the residual stream: no
    # residual add of the block, head (it once made both classifiers mlp of block 0)
    spec = _spec(depth=1, head="distilled", dist_token=True, final_norm=final_norm)
    assert _one_block_two_classifiers(spec)
    with torch.device("meta"):
        model = build_reference_vit(spec)
    profile = analyze(model, recognizer="graph")
    form = closed_form(spec)
    assert profile.components == form.components
    assert [block.components for block in profile.blocks] == form.blocks


@st.composite
def timm_specs(draw: st.DrawFn) -> ViTSpec:
    """Specs a timm VisionTransformer (or its distilled twin) can express."""
    fields = draw(geometry())
    fields["mlp_width"] = fields["width"] * draw(st.integers(1, 4))  # an integer mlp_ratio
    head = draw(st.sampled_from((HeadKind.TOKEN, HeadKind.GAP, HeadKind.DISTILLED)))
    distilled = head is HeadKind.DISTILLED
    fields.update(
        head=head,
        class_token=head is not HeadKind.GAP or draw(st.booleans()),
        dist_token=distilled,
        reg_tokens=0 if distilled else draw(st.integers(0, 3)),
        # timm's distilled model sizes its position embedding for the prefix in any case
        pos_embed_covers_prefix=distilled or draw(st.booleans()),
        qkv_bias=draw(st.booleans()),
        final_norm=FinalNorm.TOKENS if distilled else draw(st.sampled_from(FinalNorm)),
        attention_impl=draw(st.sampled_from((AttentionImpl.SDPA, AttentionImpl.SCALED_QUERY))),
    )
    return ViTSpec(**fields)


def build_timm(spec: ViTSpec) -> TimmViT:
    """The timm model of ``spec``, through timm's own constructor arguments."""
    kwargs = {
        "img_size": spec.image_size, "patch_size": spec.patch_size, "in_chans": spec.in_chans,
        "num_classes": spec.num_classes, "embed_dim": spec.width, "depth": spec.depth,
        "num_heads": spec.heads, "mlp_ratio": spec.mlp_width // spec.width,
        "qkv_bias": spec.qkv_bias, "class_token": spec.class_token,
        "reg_tokens": spec.reg_tokens, "no_embed_class": not spec.pos_embed_covers_prefix,
        "global_pool": "avg" if spec.head is HeadKind.GAP else "token",
        "fc_norm": spec.final_norm is FinalNorm.POOLED,
        "final_norm": spec.final_norm is not FinalNorm.NONE,
    }
    with torch.device("meta"):
        if spec.head is HeadKind.DISTILLED:
            model = VisionTransformerDistilled(**kwargs)
        else:
            model = TimmViT(**kwargs)
    for block in model.blocks:
        block.attn.fused_attn = spec.attention_impl is AttentionImpl.SDPA
    return model


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(spec=timm_specs())
def test_timm_spec_is_inferred_and_counted_exactly(spec: ViTSpec) -> None:
    model = build_timm(spec)
    assert spec_from_model(model) == spec
    profile = analyze(model)
    form = closed_form(spec)
    assert profile.components == form.components
    assert [block.components for block in profile.blocks] == form.blocks
