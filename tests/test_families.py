"""Every implementation family lands every parameter and MAC in a named component."""

from __future__ import annotations

import re

import pytest
import timm
import torch
import transformers
from torch import nn

from vitprof import Component as C
from vitprof import analyze
from vitprof.core.errors import UserError
from vitprof.core.records import Counts
from vitprof.recognize.graph.roles import NO_EVIDENCE

NOTHING = (0, 0)


def other(profile) -> tuple[int, int]:
    o = profile.components[C.OTHER]
    return o.params, o.macs


ZOO_MODELS = [
    "vit_b_16", "note001_vit_b16", "note002_cifar_vit", "note002_cifar_vit_tiny",
    "note002_linear_attention", "note004_vit_b16", "hf:vit-base-patch16-224",
    "timm:vit_tiny_patch16_224", "timm:deit_small_patch16_224",
    "timm:deit_tiny_distilled_patch16_224", "timm:vit_base_patch16_reg4_gap_256",
]


@pytest.mark.parametrize("name", ZOO_MODELS)
def test_nothing_lands_in_other(name: str) -> None:
    profile = analyze(name)
    assert other(profile) == NOTHING
    assert profile.warnings == ()
    assert len(profile.blocks) > 0
    for component in (C.PATCH_EMBED, C.ATTN_QKV, C.ATTN_CORE, C.ATTN_PROJ, C.MLP, C.HEAD):
        assert profile.components[component].macs > 0, component


def test_note001_unfold_patcher_is_patch_embedding() -> None:
    from vitprof.models.notes.note001 import build_note001_vit

    with torch.device("meta"):
        model = build_note001_vit(patcher="unfold")
    profile = analyze(model)
    assert other(profile) == NOTHING
    # 196 patches through Linear(768, 768): 196 * 768 * 768 = 115_605_504
    assert profile.components[C.PATCH_EMBED].macs == 115_605_504


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "explicit"])
def test_timm_fused_and_explicit_attention_count_the_same_macs(fused: bool) -> None:
    with torch.device("meta"):
        model = timm.create_model("vit_tiny_patch16_224", pretrained=False)
    for block in model.blocks:
        block.attn.fused_attn = fused
    profile = analyze(model)
    assert other(profile) == NOTHING
    # 12 blocks x 2 x 197^2 x 192 = 178_831_872
    assert profile.components[C.ATTN_CORE].macs == 12 * 2 * 197**2 * 192


@pytest.mark.parametrize("implementation", ["sdpa", "eager"])
def test_hugging_face_attention_implementations(implementation: str) -> None:
    config = transformers.ViTConfig(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        image_size=32, patch_size=8, num_labels=10, attn_implementation=implementation,
    )
    with torch.device("meta"):
        model = transformers.ViTForImageClassification(config)
    profile = analyze(model, image_size=32)
    assert other(profile) == NOTHING
    # 16 patches + CLS = 17 tokens; 2 blocks x 2 x 17^2 x 64 = 73_984
    assert profile.components[C.ATTN_CORE].macs == 73_984
    # per block q, k, v: 3 x 17 x 64 x 64 = 208_896
    assert profile.components[C.ATTN_QKV].macs == 2 * 208_896


def test_deit_distillation_token_and_second_head() -> None:
    profile = analyze("timm:deit_tiny_distilled_patch16_224")
    # cls + dist tokens + position embedding over 198 tokens: 2*192 + 198*192 = 38_400
    assert profile.components[C.TOKENS].params == 38_400
    # two heads of 192 x 1000 + 1000
    assert profile.components[C.HEAD].params == 2 * (192 * 1000 + 1000)


def test_register_tokens_are_tokens() -> None:
    profile = analyze("timm:vit_base_patch16_reg4_gap_256")
    # 4 register tokens (no class token) + position embedding over 256 patches only
    assert profile.components[C.TOKENS].params == 4 * 768 + 256 * 768


TIMM_VIT_RELATIVES = [
    "timm:beit_base_patch16_224", "timm:cait_xxs24_224", "timm:eva02_tiny_patch14_224",
    "timm:samvit_base_patch16", "timm:vit_small_patch16_rope_224",
    "timm:swin_tiny_patch4_window7_224",
]


@pytest.mark.parametrize("name", TIMM_VIT_RELATIVES)
def test_graph_places_every_parameter_of_timm_vit_relatives(name: str) -> None:
    profile = analyze(name)  # no table detects them: auto is the graph
    assert profile.recognizer == "graph"
    assert other(profile) == NOTHING and profile.warnings == () and profile.unsupported_ops == {}


def test_image_size_from_timm_pretrained_config() -> None:
    # VOLO has neither an img_size attribute nor a flat position embedding
    assert analyze("timm:volo_d1_384").input_shape == (1, 3, 384, 384)


def test_cait_class_attention_blocks_are_numbered_after_the_trunk() -> None:
    profile = analyze("timm:cait_xxs24_224")
    assert len(profile.blocks) == 24 + 2
    cells = {(c, b.index): n for b in profile.blocks for c, n in b.components.items()}
    # class attention, width 192, 4 heads of 48, 196 patches + 1 class token = 197 tokens:
    # q on the class token 192*192 = 36_864, k and v on 197 tokens 2*197*192*192 = 14_524_416
    assert cells[(C.ATTN_QKV, 24)].macs == 36_864 + 14_524_416
    # one query row per head: q k^T and a v, 2 * 4 * 197 * 48 = 75_648
    assert cells[(C.ATTN_CORE, 24)].macs == 75_648
    # the MLP runs on the class token alone: 2 * 192 * 768 = 294_912
    assert cells[(C.MLP, 25)].macs == 294_912


def test_swin_stages_yield_blocks_and_patch_merging_is_patch_embedding() -> None:
    profile = analyze("timm:swin_tiny_patch4_window7_224")
    assert len(profile.blocks) == 2 + 2 + 6 + 2
    # the 4x4 patch conv: 56*56 positions x 96 channels x 3*4*4 = 14_450_688; each of the
    # three merges is a Linear(4C, 2C) on (56/2^k)^2 positions: 28*28*384*192 = 57_802_752
    # (and 14*14*768*384, 7*7*1536*768, the same product)
    assert profile.components[C.PATCH_EMBED].macs == 14_450_688 + 3 * 57_802_752


@pytest.mark.parametrize("model_type", ["dinov2", "beit", "swin"])
@pytest.mark.parametrize(("recognizer", "family"), [("tables", "graph"), ("auto", "graph")])
def test_other_hugging_face_vision_transformers_go_to_the_graph(
    model_type: str, recognizer: str, family: str
) -> None:
    config = transformers.AutoConfig.for_model(model_type, num_labels=10)
    with torch.device("meta"):
        model = transformers.AutoModelForImageClassification.from_config(config)
    profile = analyze(model, recognizer=recognizer)
    assert profile.recognizer == family and len(profile.blocks) == 12
    # DINOv2's mask token (one of width 768) runs only with a mask: no operation reads it
    # (its module's cls_token and position embeddings are tokens)
    unread = (f"{NO_EVIDENCE}: dinov2.embeddings, 0 MACs, 768 params no operation read, "
              "placed like the modules of their class that ran (tokens)",)
    assert other(profile) == NOTHING and profile.warnings == (unread * (model_type == "dinov2"))


def test_separate_query_and_value_biases_are_qkv() -> None:
    config = transformers.BeitConfig(num_labels=10)
    with torch.device("meta"):
        model = transformers.BeitForImageClassification(config)
    # per block: query/key/value 3 * 768 * 768, query and value biases 2 * 768 (keys have none)
    assert analyze(model).components[C.ATTN_QKV].params == 12 * (3 * 768 * 768 + 2 * 768)


class FunctionalViT(nn.Module):
    """A hand-written ViT whose attention is all functional: nothing named like a module."""

    def __init__(self, dim: int = 32, depth: int = 2, heads: int = 4) -> None:
        super().__init__()
        self.to_patches = nn.Conv2d(3, dim, kernel_size=8, stride=8)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, 17, dim))
        self.layers = nn.ModuleList(
            nn.ModuleDict(
                {"ln1": nn.LayerNorm(dim),
                 "attention": nn.MultiheadAttention(dim, heads, batch_first=True),
                 "ln2": nn.LayerNorm(dim),
                 "ffn": nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))}
            )
            for _ in range(depth)
        )
        self.classifier = nn.Linear(dim, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.to_patches(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        for layer in self.layers:
            y = layer["ln1"](x)
            x = x + layer["attention"](y, y, y, need_weights=False)[0]
            x = x + layer["ffn"](layer["ln2"](x))
        return self.classifier(x[:, 0])


def test_graph_recognizer_on_a_model_driven_through_module_dicts() -> None:
    profile = analyze(FunctionalViT(), image_size=32)
    assert other(profile) == NOTHING
    d, n = 32, 17
    # per block: qkv 17*32*96, core 2*17^2*32, proj 17*32*32, ffn 2*17*32*64
    assert profile.components[C.ATTN_QKV].macs == 2 * n * d * 3 * d
    assert profile.components[C.ATTN_CORE].macs == 2 * 2 * n * n * d
    assert profile.components[C.ATTN_PROJ].macs == 2 * n * d * d
    assert profile.components[C.MLP].macs == 2 * 2 * n * d * 2 * d


class LayerScaleBlock(nn.Module):
    """A BEiT/CaiT-style block: the layer scales are raw parameters of the block itself."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, 4, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        self.gamma_1 = nn.Parameter(torch.ones(dim))
        self.gamma_2 = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.norm1(x)
        x = x + self.gamma_1 * self.attn(y, y, y, need_weights=False)[0]
        return x + self.gamma_2 * self.mlp(self.norm2(x))


class NeckViT(nn.Module):
    """Layer-scale blocks, then a SAM-style convolutional neck instead of a linear head."""

    def __init__(self, dim: int = 32, depth: int = 2) -> None:
        super().__init__()
        self.patch_embed = nn.Conv2d(3, dim, kernel_size=8, stride=8)
        self.pos_embed = nn.Parameter(torch.zeros(1, 16, dim))
        self.blocks = nn.Sequential(*(LayerScaleBlock(dim) for _ in range(depth)))
        self.neck = nn.Conv2d(dim, 16, kernel_size=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(x).flatten(2).transpose(1, 2) + self.pos_embed
        x = self.blocks(x)
        return self.neck(x.transpose(1, 2).reshape(x.shape[0], -1, 4, 4))


def test_layer_scales_follow_their_branch_and_a_conv_neck_is_the_head() -> None:
    profile = analyze(NeckViT(), image_size=32)
    assert other(profile) == NOTHING and profile.warnings == ()
    d, n, depth = 32, 16, 2
    # attn_proj per block: out_proj 32*32 + 32 = 1_056 params + gamma_1 32 = 1_088
    assert profile.components[C.ATTN_PROJ].params == depth * (d * d + d + d)
    # mlp per block: 32*64 + 64 + 64*32 + 32 = 4_192 params + gamma_2 32 = 4_224
    assert profile.components[C.MLP].params == depth * (2 * d * 2 * d + 2 * d + d + d)
    # the neck: 1x1 conv 32 -> 16 on 4x4 positions, 16 * 32 * 16 = 8_192 MACs, 528 params
    assert profile.components[C.HEAD].macs == n * d * 16
    assert profile.components[C.HEAD].params == d * 16 + 16
    # attn_proj vector work per block, n x d elements each: out_proj bias add, the gamma_1
    # multiply, and the residual add that follows the branch
    assert profile.components[C.ATTN_PROJ].vector_flops == depth * 3 * n * d


@pytest.mark.parametrize("regex", [r"^classifier", r"classifier$"], ids=["prefix", "module-only"])
def test_map_override_moves_a_module_and_its_parameters(regex: str) -> None:
    # "classifier$" names the module path only: its parameters follow their owner
    profile = analyze(FunctionalViT(), image_size=32, overrides=[(regex, C.OTHER)])
    # 32 * 10 + 10 params, 32 * 10 MACs
    assert other(profile) == (330, 320)


def test_map_override_on_a_table_family() -> None:
    profile = analyze("vit_b_32", overrides=[(r"^heads$", C.OTHER)])
    # torchvision's head Linear(768, 1000): 769_000 params, 768_000 MACs
    assert other(profile) == (769_000, 768_000)


def test_a_map_rule_that_matches_nothing_warns() -> None:
    profile = analyze("vit_b_32", overrides=[(r"^heds$", C.OTHER), (r"^heads$", C.OTHER)])
    assert profile.warnings == ("--map rule '^heds$=other' matched no module or parameter",)
    # the rule that matches still applies: the head's 769_000 params, 768_000 MACs
    assert other(profile) == (769_000, 768_000)


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        pytest.param(("(", C.OTHER), "bad regular expression '('", id="bad-regex"),
        pytest.param(("heads", "nowhere"), "unknown component 'nowhere'", id="bad-component"),
    ],
)
def test_bad_override_is_a_user_error(rule: tuple[str, str], message: str) -> None:
    with pytest.raises(UserError, match=re.escape(message)):
        analyze("vit_b_32", overrides=[rule])


def test_a_cnn_gets_exact_totals_and_a_convolutional_breakdown() -> None:
    import torchvision

    with torch.device("meta"):
        model = torchvision.models.resnet18()
    profile = analyze(model)
    assert profile.totals.params == sum(p.numel() for p in model.parameters())
    # Convolutions (outputs x out channels x in channels x kernel area) and the fc layer:
    conv1 = 112 * 112 * 64 * 3 * 7 * 7  # = 118_013_952
    layer1 = 4 * 56 * 56 * 64 * 64 * 9  # four 3x3 convs 64 -> 64: 462_422_016
    # layer2..4 each: a strided 3x3 conv c -> 2c, three 3x3 convs 2c -> 2c and a 1x1 downsample
    # c -> 2c at side s (28, 14, 7): the same 57_802_752 + 346_816_512 + 6_422_528 = 411_041_792
    later = sum(s * s * 2 * c * (c * 9 + 3 * 2 * c * 9 + c)
                for s, c in ((28, 64), (14, 128), (7, 256)))
    fc = 512 * 1000
    assert profile.totals.macs == conv1 + layer1 + later + fc  # = 1_814_073_344
    # no attention, residual blocks of 3x3 convs: the stem is the patch embedding, the residual
    # blocks (downsampling shortcuts included) conv, the classifier after them head
    parts = profile.components
    assert (parts[C.PATCH_EMBED].macs, parts[C.CONV].macs, parts[C.HEAD].macs) == (
        conv1, layer1 + later, fc)
    assert parts[C.OTHER] == Counts()
    assert profile.warnings == () and profile.self_checks == ()
    assert profile.unsupported_ops == {}


def test_shared_parameter_counts_once() -> None:
    model = FunctionalViT()
    model.layers[1]["ffn"][0].weight = model.layers[0]["ffn"][0].weight
    profile = analyze(model, image_size=32)
    assert profile.totals.params == sum(p.numel() for p in model.parameters())
    assert profile.totals.params == analyze(FunctionalViT(), image_size=32).totals.params - 64 * 32
