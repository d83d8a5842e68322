"""Acceptance of the breakdown on real models (issues 11 and 14).

For every Vision Transformer below, from torchvision, timm, transformers and the notes: ``other``
holds 0 params and 0 MACs, no "no transformer blocks recognized" warning, attention is seen
(``attn_core`` MACs > 0), the MLPs are in ``mlp``, no self-check fails, and the totals equal two
oracles computed here on a fresh build on meta (:mod:`vitprof.testing`'s: the unique parameter
elements, and ``FlopCounterMode`` FLOPs / 2 at the input vitprof used). Hybrids with convolutional
stages (or depthwise-convolution token mixers) also have ``conv`` MACs, the others none.
timm's fastvit_t8, named among the ViTs in issue 11, runs no attention (RepMixer in all four
stages): like any convolutional network it is broken down as a hybrid without transformer
blocks (stem, conv, head), its sibling fastvit_t12 exactly as fastvit_sa12 where they share
modules. Two non-ViTs, convnext_tiny and resmlp_12, leave nothing in ``tokens``.

Slow (> ~5 s each on the shared 2-core machine, build and two forwards on meta, marked
``slow``): maxvit_tiny_tf_224 (about 5.3 s); the others take 1 to 4.5 s.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

import vitprof
from vitprof import Component as C
from vitprof.core.records import Counts
from vitprof.models.libraries import LIBRARIES
from vitprof.models.zoo import ZOO
from vitprof.models.zoo import build as zoo_build
from vitprof.testing import oracle_macs, unique_params

NO_BLOCKS = "no transformer blocks recognized"
SLOW = pytest.mark.slow


def _torchvision(name: str) -> Callable[[], nn.Module]:
    def make() -> nn.Module:
        import torchvision

        return getattr(torchvision.models, name)()

    return make


def _timm(name: str) -> Callable[[], nn.Module]:
    def make() -> nn.Module:
        timm = pytest.importorskip("timm")
        return timm.create_model(name, pretrained=False)

    return make


def _hf(model: str, config: str, **sizes: Any) -> Callable[[], nn.Module]:
    """A transformers model class built from its config class with ``sizes`` (small, fast)."""

    def make() -> nn.Module:
        transformers = pytest.importorskip("transformers")
        return getattr(transformers, model)(getattr(transformers, config)(**sizes))

    return make


def _video(model: str, config: str, **sizes: Any) -> Callable[[], nn.Module]:
    """A video model: analysed once ``vitprof.analyze`` takes ``frames`` (issue 11)."""

    def make() -> nn.Module:
        if "frames" not in inspect.signature(vitprof.analyze).parameters:
            pytest.skip("vitprof.analyze takes no frames yet (video inputs, issue 11)")
        return _hf(model, config, **sizes)()

    return make


def _note(name: str) -> Callable[[], str]:
    """A note model, analysed by its zoo name (with the zoo entry's input and rules)."""
    return lambda: name


TWO_LAYERS = {"num_hidden_layers": 2}

# (build, has convolutional stages), by case id
VITS = [
    pytest.param(_torchvision("swin_t"), False, id="torchvision:swin_t"),
    pytest.param(_torchvision("swin_v2_t"), False, id="torchvision:swin_v2_t"),
    pytest.param(_torchvision("maxvit_t"), True, id="torchvision:maxvit_t"),
    pytest.param(_timm("coatnet_0_224"), True, id="timm:coatnet_0_224"),
    pytest.param(_timm("maxvit_tiny_tf_224"), True, id="timm:maxvit_tiny_tf_224",
                 marks=SLOW),
    pytest.param(_timm("efficientvit_m0"), True, id="timm:efficientvit_m0"),  # dw-conv mixers
    pytest.param(_timm("nextvit_small"), True, id="timm:nextvit_small"),
    pytest.param(_timm("visformer_tiny"), True, id="timm:visformer_tiny"),
    pytest.param(_timm("levit_128"), False, id="timm:levit_128"),
    pytest.param(_timm("mobilevit_s"), True, id="timm:mobilevit_s"),
    pytest.param(_timm("cait_xxs24_224"), False, id="timm:cait_xxs24_224"),
    pytest.param(_timm("crossvit_9_240"), False, id="timm:crossvit_9_240"),
    # its local patch interaction after each attention, two depthwise 3x3 convs, mixes tokens
    pytest.param(_timm("xcit_nano_12_p8_224"), True, id="timm:xcit_nano_12_p8_224"),
    # its convolutional position encoding (a residual depthwise conv) before each attention
    pytest.param(_timm("davit_tiny"), True, id="timm:davit_tiny"),
    pytest.param(_timm("swiftformer_xs"), True, id="timm:swiftformer_xs"),
    pytest.param(_timm("maxvit_nano_rw_256"), True, id="timm:maxvit_nano_rw_256"),
    pytest.param(_timm("fastvit_mci0"), True, id="timm:fastvit_mci0"),
    pytest.param(_timm("caformer_s18"), True, id="timm:caformer_s18"),
    pytest.param(_hf("SwinForImageClassification", "SwinConfig", depths=[2, 2, 2, 2]), False,
                 id="hf:swin"),  # two blocks a stage: a shifted window in each
    pytest.param(_hf("Dinov2Model", "Dinov2Config", **TWO_LAYERS), False, id="hf:dinov2"),
    pytest.param(_hf("BeitForImageClassification", "BeitConfig", **TWO_LAYERS), False,
                 id="hf:beit"),
    pytest.param(_hf("SiglipVisionModel", "SiglipVisionConfig", **TWO_LAYERS), False,
                 id="hf:siglip_vision"),  # with its attention-pooling head
    pytest.param(_hf("CLIPVisionModelWithProjection", "CLIPVisionConfig", **TWO_LAYERS), False,
                 id="hf:clip_vision"),
    pytest.param(_hf("LevitForImageClassification", "LevitConfig"), False, id="hf:levit"),
    pytest.param(_video("VideoMAEModel", "VideoMAEConfig", **TWO_LAYERS), False,
                 id="hf:videomae"),
    pytest.param(_video("VivitModel", "VivitConfig", **TWO_LAYERS), False, id="hf:vivit"),
    pytest.param(_video("TimesformerModel", "TimesformerConfig", **TWO_LAYERS), False,
                 id="hf:timesformer"),
    *(pytest.param(_note(name), False, id=name)
      for name, entry in ZOO.items() if entry.family == "notes"),
]


def _build(make: Callable[[], nn.Module | str]) -> nn.Module | str:
    """A model on meta, or a zoo name."""
    with torch.device("meta"):
        return make()


def _analyzed(make: Callable[[], nn.Module | str], name: str) -> vitprof.Profile:
    return vitprof.analyze(_build(make), name=name)


def _assert_totals_exact(profile: vitprof.Profile, make: Callable[[], nn.Module | str]
                         ) -> None:
    """Totals equal the oracles on a fresh build, at the input vitprof used."""
    fresh = _build(make)
    if isinstance(fresh, str):
        fresh = zoo_build(fresh, device="meta").module
    assert profile.totals.params == unique_params(fresh)
    assert profile.totals.macs == oracle_macs(fresh, profile.input_shape)


@pytest.mark.parametrize(("make", "hybrid"), VITS)
def test_a_vit_is_broken_down_into_known_components(
    make: Callable[[], nn.Module | str], hybrid: bool,
    request: pytest.FixtureRequest,
) -> None:
    profile = _analyzed(make, request.node.callspec.id)
    parts = profile.components
    assert (parts[C.OTHER].params, parts[C.OTHER].macs) == (0, 0), profile.warnings
    assert not [w for w in profile.warnings if NO_BLOCKS in w]
    # attention seen: products, or the element-wise work of additive attention (SwiftFormer)
    assert parts[C.ATTN_CORE].macs > 0 or parts[C.ATTN_CORE].vector_flops > 0
    assert parts[C.MLP].macs > 0  # the MLPs in mlp
    assert (parts[C.CONV].macs > 0) is hybrid  # convolutional stages in conv, and only there
    assert profile.self_checks == ()
    _assert_totals_exact(profile, make)


def _placed(profile: vitprof.Profile) -> dict[str, tuple[C, int | None]]:
    return {p.name: (p.component, p.block) for p in profile.params}


@pytest.mark.parametrize(("name", "sibling", "apart"), [
    # widths (64, 128, 256, 512), depths (2, 2, 6, 2); RepMixer blocks in all four stages
    # against attention in the last: the stem, stages 0 to 2, final_conv and head are alike
    pytest.param("fastvit_t12", "fastvit_sa12", ("stages.3.blocks.",), id="fastvit"),
    # widths (64, 128, 320, 512), depths (3, 3, 9, 3); separable convolutions in all four stages
    # against attention in the last two, whose blocks scale their skip (res_scale(x) + f(x))
    pytest.param("convformer_s18", "caformer_s18", ("stages.2.blocks.", "stages.3.blocks."),
                 id="metaformer"),
])
def test_a_network_without_attention_is_broken_down_as_its_attention_sibling(
        name: str, sibling: str, apart: tuple[str, ...]) -> None:
    """Every parameter of a module the two models share lands in the same component, and the
    network without attention leaves nothing in other, with no warning, though it has no
    transformer block."""
    make = _timm(name)
    profile = _analyzed(make, f"timm:{name}")
    parts = profile.components
    assert parts[C.OTHER] == Counts()
    assert profile.warnings == () and profile.self_checks == ()
    assert profile.attention_implementation == "none seen" and not profile.blocks
    assert {c for c, n in parts.items() if n.macs} == {C.PATCH_EMBED, C.CONV, C.HEAD}
    theirs = _placed(_analyzed(_timm(sibling), f"timm:{sibling}"))
    shared = {name: placed for name, placed in _placed(profile).items()
              if not name.startswith(apart) and name in theirs}
    assert len(shared) > 50  # the stem, the first stages, the downsampling, the head
    assert shared == {name: theirs[name] for name in shared}
    _assert_totals_exact(profile, make)


@pytest.mark.parametrize("name", ["fastvit_t8", "convnext_tiny", "resnetv2_50x1_bit"])
def test_a_convolutional_network_leaves_nothing_in_other(name: str) -> None:
    """Residual blocks of convolutions (RepMixer, ConvNeXt; BiT's weight-standardised
    convolutions, whose 3x3 kernels reach the convolution through the standardisation): no
    attention, yet nothing in other."""
    profile = _analyzed(_timm(name), f"timm:{name}")
    parts = profile.components
    assert parts[C.OTHER] == Counts() and parts[C.CONV].macs > 0.9 * profile.totals.macs
    assert profile.warnings == () and profile.self_checks == ()


def _classifier_macs(model: nn.Module) -> int:
    """MACs of a model's last linear layer (its classifier) on one pooled vector."""
    classifier = [m for m in model.modules() if isinstance(m, nn.Linear)][-1]
    return classifier.in_features * classifier.out_features


@pytest.mark.parametrize(("make", "last_stage", "head_convs"), [
    # a projection shortcut conv(x) + f(x) opens every stage from layer2 on, one block each:
    # no identity skip after layer1
    pytest.param(_timm("resnet10t"), "layer4.", 0, id="timm:resnet10t"),
    # its last stage one stride-2 RepVGG block: a 3x3 and a 1x1 branch summed, no identity
    pytest.param(_timm("repvgg_a0"), "stages.3.", 0, id="timm:repvgg_a0"),
    # every block with a projection shortcut (split attention in its branch)
    pytest.param(_timm("resnest14d"), "layer4.", 0, id="timm:resnest14d"),
    # its last MBConv runs without its skip (192 to 320 channels), with its squeeze-excitation;
    # then a 1x1 conv of the model's own, 320 to 1280 on the 7x7 map, before the pooling
    pytest.param(_torchvision("efficientnet_b0"), "features.7.", 7 * 7 * 320 * 1280,
                 id="torchvision:efficientnet_b0"),
])
def test_a_convolutional_network_keeps_only_what_follows_its_blocks_in_head(
        make: Callable[[], nn.Module], last_stage: str, head_convs: int) -> None:
    """Every convolutional block, whatever its shortcut, is conv, with its weightless work:
    head holds the classifier (and a last 1x1 conv of the model's own), nothing is in other."""
    with torch.device("meta"):
        model = make()
    profile = vitprof.analyze(model)
    parts = profile.components
    assert parts[C.OTHER] == Counts() and profile.warnings == () and profile.self_checks == ()
    assert parts[C.HEAD].macs == head_convs + _classifier_macs(model)
    last = {op.component for op in profile.ops if op.module.startswith(last_stage)}
    assert C.CONV in last and last <= {C.CONV, C.NORM, C.PATCH_EMBED}


def test_convmixer_pointwise_convolutions_between_its_residuals_are_conv() -> None:
    """ConvMixer's block: a residual depthwise 9x9 conv, then a 1x1 conv outside the residual,
    on the same map: conv (a stage's work, no downsampling), not patch_embed."""
    profile = _analyzed(_timm("convmixer_768_32"), "timm:convmixer_768_32")
    pointwise = {p.component for p in profile.params
                 if p.name.startswith("blocks.") and p.name.split(".")[2] == "1"
                 and int(p.name.split(".")[1]) < 31}
    assert pointwise == {C.CONV}
    # the patch embedding: a 7x7 stride-7 conv, 3 to 768, on 32 x 32 patches (224 px)
    assert profile.components[C.PATCH_EMBED].macs == 32 * 32 * 768 * 3 * 7 * 7


def test_a_convolutional_network_holds_no_tokens() -> None:
    """transformers ConvNeXt V2's global response normalisation adds a (1, 1, 1, C) bias in
    each residual branch: a conv block's bias, not a token."""
    transformers = pytest.importorskip("transformers")
    model = transformers.ConvNextV2ForImageClassification(transformers.ConvNextV2Config())
    profile = vitprof.analyze(model)
    assert profile.components[C.TOKENS] == Counts()
    assert profile.components[C.OTHER] == Counts() and profile.self_checks == ()


@pytest.mark.parametrize("name", ["ese_vovnet19b_dw", "ese_vovnet39b"])
def test_a_squeeze_excitation_named_attn_is_no_attention(name: str) -> None:
    """VoVNet's eSE (a mean, a 1x1 conv, a hard sigmoid, a multiply) runs in a module named
    ``attn``: a gate, no attention core, so no transformer block and nothing in attention."""
    profile = _analyzed(_timm(name), f"timm:{name}")
    parts = profile.components
    assert not profile.blocks and profile.self_checks == ()
    assert all(parts[c] == Counts() for c in (C.ATTN_QKV, C.ATTN_CORE, C.ATTN_PROJ, C.MLP))


@pytest.mark.parametrize("name", ["sebotnet33ts_256", "eca_halonext26ts", "haloregnetz_b"])
def test_a_hybrid_has_one_block_per_attention_layer_not_per_gate(name: str) -> None:
    """timm's byobnet hybrids name their squeeze-excitation or ECA gate ``attn`` and their self
    attention ``self_attn``: one block per self-attention layer (timm's BottleneckAttn or
    HaloAttn modules, counted here), the gated convolutional blocks in conv."""
    from timm.layers.bottleneck_attn import BottleneckAttn
    from timm.layers.halo_attn import HaloAttn

    model = _build(_timm(name))
    layers = sum(isinstance(m, BottleneckAttn | HaloAttn) for m in model.modules())
    profile = vitprof.analyze(model)
    assert len(profile.blocks) == layers > 0
    assert profile.components[C.CONV].macs > 0 and profile.components[C.OTHER] == Counts()
    assert profile.self_checks == ()


@pytest.mark.parametrize("name", ["convnext_tiny", "resmlp_12_224"])
def test_a_non_vit_leaves_nothing_in_tokens(name: str) -> None:
    profile = _analyzed(_timm(name), f"timm:{name}")
    assert (profile.components[C.TOKENS].params, profile.components[C.TOKENS].macs) == (0, 0)
    assert profile.self_checks == ()


def _cells(profile: vitprof.Profile) -> dict[tuple[int | None, C], tuple[int, int]]:
    """Params and MACs per component, of the whole model (block None) and of each block."""
    cells = {(None, c): (n.params, n.macs) for c, n in profile.components.items()}
    cells.update({(b.index, c): (n.params, n.macs)
                  for b in profile.blocks for c, n in b.components.items()})
    return cells


# the zoo models a table detects (by type); the others (the notes) have no table: the graph
# places them under any recognizer
TABLED = [name for name, entry in ZOO.items()
          if any(f.tables for f in LIBRARIES if f.name == entry.family)]


@pytest.mark.parametrize("name", TABLED)
def test_the_graph_recognizer_agrees_with_the_tables_on_every_zoo_model(name: str) -> None:
    graph = vitprof.analyze(name)  # auto: the graph decides, the table is compared
    tables = vitprof.analyze(name, recognizer="tables")
    assert tables.recognizer in ("torchvision", "huggingface")
    assert graph.recognizer == f"graph ({tables.recognizer} table agrees)"
    assert _cells(graph) == _cells(tables)


def test_a_zoo_model_no_table_detects_gets_the_graph_under_tables() -> None:
    assert vitprof.analyze("note002_dynamic_vit", recognizer="tables").recognizer == "graph"


class BiasAttention(nn.Module):
    """Attention whose bias is the sum of two products of q and a table (SAM's decomposed
    relative positions), handed to SDPA as the keyword ``attn_mask``."""

    def __init__(self, dim: int, tokens: int) -> None:
        super().__init__()
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.table_h = nn.Parameter(torch.zeros(dim, tokens))
        self.table_w = nn.Parameter(torch.zeros(dim, tokens))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        bias = q @ self.table_h + q @ self.table_w
        return self.proj(nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias))


class BiasBlock(nn.Module):
    def __init__(self, dim: int, tokens: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.attn = BiasAttention(dim, tokens)
        self.fc = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm(x))
        return x + self.fc(x)


class BiasViT(nn.Module):
    def __init__(self, dim: int = 8, tokens: int = 4) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, dim, kernel_size=2, stride=2)
        self.blocks = nn.Sequential(BiasBlock(dim, tokens), BiasBlock(dim, tokens))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(self.stem(x).flatten(2).transpose(1, 2))


def test_an_attention_bias_made_in_the_attention_module_is_attn_core() -> None:
    profile = vitprof.analyze(BiasViT(), image_size=4, recognizer="graph")
    # 2 blocks, 4 tokens of width 8: SDPA's QK^T and AV 2 * 4 * 4 * 8 = 256, the bias's two
    # products q @ table 2 * 4 * 8 * 4 = 256 MACs
    assert profile.components[C.ATTN_CORE].macs == 2 * (256 + 256)
    assert profile.components[C.MLP].macs == 2 * 4 * 8 * 8  # fc only
    assert profile.self_checks == ()


class MapAttention(nn.Module):
    """nextvit's E-MHSA layout: q/k/v linears on a B,C,H,W map read as tokens (a non-contiguous
    view, on which ``F.linear`` runs ``mm`` and then adds the bias apart)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.q, self.k, self.v = (nn.Linear(dim, dim) for _ in range(3))
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = x.flatten(2).transpose(1, 2)
        out = nn.functional.scaled_dot_product_attention(
            self.q(tokens), self.k(tokens), self.v(tokens))
        return x + self.proj(out).transpose(1, 2).reshape(x.shape)


class MapBlock(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.attn = MapAttention(dim)
        self.mlp = nn.Conv2d(dim, dim, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.attn(x)
        return x + self.mlp(x)


def test_linears_whose_bias_is_added_apart_are_q_k_v() -> None:
    model = nn.Sequential(nn.Conv2d(3, 8, kernel_size=2, stride=2), MapBlock(8), MapBlock(8))
    profile = vitprof.analyze(model, image_size=4, recognizer="graph")
    # 2 blocks, 4 tokens of width 8: q, k and v 3 * 4 * 8 * 8 = 768 MACs; proj 4 * 8 * 8 = 256
    assert profile.components[C.ATTN_QKV].macs == 2 * 768
    assert profile.components[C.ATTN_PROJ].macs == 2 * 256
    assert profile.self_checks == ()
