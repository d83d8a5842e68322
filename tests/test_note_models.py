"""The hand-written ViTs of ``vitprof.models``: shapes, meta-device use, exact parameter counts.

Every expected count is derived by arithmetic in the comments beside it, from the layer shapes.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from vitprof.models.notes import note001, note002, note004


def n_params(model: nn.Module) -> int:
    """Total parameter count, as torchinfo's "Total params"."""
    return sum(p.numel() for p in model.parameters())


def run(model: nn.Module, shape: tuple[int, ...]) -> torch.Tensor:
    """Eval-mode forward of a random CPU input."""
    model.eval()
    with torch.no_grad():
        return model(torch.randn(shape))


# --------------------------------------------------------------------------- meta device

META_CASES = [
    pytest.param(note001.build_note001_vit, (1, 3, 224, 224), (1, 10), id="note001-conv"),
    pytest.param(
        lambda: note001.build_note001_vit(patcher="unfold"),
        (1, 3, 224, 224),
        (1, 10),
        id="note001-unfold",
    ),
    pytest.param(
        lambda: note001.build_note001_vit(batch_size=2),
        (2, 3, 224, 224),
        (2, 10),
        id="note001-batch2",
    ),
    pytest.param(note002.build_cifar_vit, (2, 3, 32, 32), (2, 10), id="cifar-base"),
    *[
        pytest.param(
            lambda size=size: note002.build_cifar_vit_size(size),
            (2, 3, 32, 32),
            (2, 10),
            id=f"cifar-{size}",
        )
        for size in note002.CIFAR_VIT_SIZES
    ],
    pytest.param(
        lambda: note002.build_cifar_vit(image_size=64, num_classes=200, patch_size=8),
        (2, 3, 64, 64),
        (2, 200),
        id="cifar-tinyimagenet",
    ),
    pytest.param(note002.build_linear_attention_vit, (2, 3, 32, 32), (2, 10), id="cifar-linear"),
    pytest.param(note002.build_dynamic_vit, (2, 3, 32, 32), (2, 10), id="cifar-dynamic"),
    pytest.param(note004.build_note004_vit, (2, 3, 224, 224), (2, 1000), id="note004"),
]


@pytest.mark.parametrize(("factory", "in_shape", "out_shape"), META_CASES)
def test_builds_and_runs_on_meta(
    factory: Callable[[], nn.Module], in_shape: tuple[int, ...], out_shape: tuple[int, ...]
) -> None:
    with torch.device("meta"):
        model = factory()
        out = model(torch.randn(in_shape))
    assert all(p.is_meta for p in model.parameters())
    assert out.is_meta
    assert tuple(out.shape) == out_shape


# --------------------------------------------------------------------------- note 001

# One note-001 TransformerEncoder at D=768, MLP 3072 (every Linear has a bias):
NOTE001_BLOCK = (
    2 * (2 * 768)  # norm_0, norm_1: weight + bias                          =     3_072
    + (768 * 3 * 768 + 3 * 768)  # multihead_attention.in_proj_weight/_bias = 1_771_776
    + (768 * 768 + 768)  # multihead_attention.out_proj                     =   590_592
    + (768 * 3072 + 3072)  # mlp[0]                                         = 2_362_368
    + (3072 * 768 + 768)  # mlp[3]                                          = 2_360_064
)  #                                                                        = 7_087_872


@pytest.fixture(scope="module")
def note001_vit() -> nn.Module:
    return note001.build_note001_vit()


def test_note001_total_matches_torchinfo(note001_vit: nn.Module) -> None:
    expected = (
        (3 * 16 * 16 * 768 + 768)  # patcher.conv                    =    590_592
        + 1 * 1 * 768  # pos_embedding.class_token (1, 1, 768)       =        768
        + 1 * 197 * 768  # pos_embedding.pos_embedding (1, 197, 768) =    151_296
        + 12 * NOTE001_BLOCK  # 12 * 7_087_872                       = 85_054_464
        + 2 * 768  # mlp_head.norm                                   =      1_536
        + (768 * 768 + 768)  # mlp_head.linear_0                     =    590_592
        + (768 * 10 + 10)  # mlp_head.linear_1                       =      7_690
    )
    assert expected == 86_396_938  # Codeblock 19: "Total params: 86,396,938"
    assert n_params(note001_vit) == expected


def test_note001_rows_match_torchinfo(note001_vit: nn.Module) -> None:
    encoder = note001_vit.transformer_encoders[0]
    rows = {
        note001_vit.patcher.conv: 3 * 16 * 16 * 768 + 768,  # 590,592
        note001_vit.pos_embedding: 768 + 197 * 768,  # 152,064
        encoder.norm_0: 2 * 768,  # 1,536
        encoder.multihead_attention: 768 * 2304 + 2304 + 768 * 768 + 768,  # 2,362,368
        encoder.mlp: 768 * 3072 + 3072 + 3072 * 768 + 768,  # 4,722,432
        note001_vit.mlp_head.linear_0: 768 * 768 + 768,  # 590,592
        note001_vit.mlp_head.linear_1: 768 * 10 + 10,  # 7,690
    }
    assert [n_params(module) for module in rows] == list(rows.values())
    assert list(rows.values()) == [590_592, 152_064, 1_536, 2_362_368, 4_722_432, 590_592, 7_690]


def test_note001_forward_on_cpu(note001_vit: nn.Module) -> None:
    assert run(note001_vit, (1, 3, 224, 224)).shape == (1, 10)


def test_note001_names(note001_vit: nn.Module) -> None:
    names = dict(note001_vit.named_parameters())
    assert names["pos_embedding.class_token"].shape == (1, 1, 768)
    assert names["pos_embedding.pos_embedding"].shape == (1, 197, 768)
    assert names["transformer_encoders.11.multihead_attention.in_proj_weight"].shape == (2304, 768)
    assert names["mlp_head.linear_1.weight"].shape == (10, 768)
    assert note001_vit.transformer_encoders[0].multihead_attention.batch_first


def test_note001_class_token_is_shaped_by_batch_size() -> None:
    """The note's bug: parameters of shape (batch_size, ...) fix the batch the model accepts."""
    vit = note001.ViT(
        batch_size=2,
        image_size=32,
        patch_size=16,
        num_heads=2,
        num_encoders=1,
        embed_dim=8,
        mlp_size=16,
    )
    assert vit.pos_embedding.class_token.shape == (2, 1, 8)
    assert vit.pos_embedding.pos_embedding.shape == (2, (32 // 16) ** 2 + 1, 8)  # (2, 5, 8)
    assert run(vit, (2, 3, 32, 32)).shape == (2, 10)
    with pytest.raises(RuntimeError):
        run(vit, (3, 3, 32, 32))


def test_note001_params_grow_with_batch_size() -> None:
    with torch.device("meta"):
        vit = note001.build_note001_vit(batch_size=2)
    # one more class token and position embedding: 86_396_938 + 768 + 197 * 768 = 86_549_002
    assert n_params(vit) == 86_396_938 + 768 + 197 * 768 == 86_549_002


def test_note001_patchers_are_the_same_linear_map() -> None:
    conv = note001.PatcherConv(in_channels=3, patch_size=4, embed_dim=8)
    unfold = note001.PatcherUnfold(in_channels=3, patch_size=4, embed_dim=8)
    assert n_params(conv) == n_params(unfold) == 3 * 4 * 4 * 8 + 8  # = 392
    with torch.no_grad():
        unfold.linear_projection.weight.copy_(conv.conv.weight.reshape(8, -1))
        unfold.linear_projection.bias.copy_(conv.conv.bias)
        x = torch.randn(2, 3, 8, 8)
        out = conv(x)
        assert out.shape == (2, (8 // 4) ** 2, 8)  # (2, 4, 8)
        torch.testing.assert_close(unfold(x), out)


def test_note001_unfold_factory_on_cpu() -> None:
    vit = note001.ViT(
        image_size=32,
        patch_size=16,
        num_heads=2,
        num_encoders=1,
        embed_dim=8,
        mlp_size=16,
        patcher="unfold",
    )
    assert isinstance(vit.patcher, note001.PatcherUnfold)
    assert run(vit, (1, 3, 32, 32)).shape == (1, 10)


def test_note001_rejects_unknown_patcher() -> None:
    with pytest.raises(ValueError, match="patcher"):
        note001.build_note001_vit(patcher="linear")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- note 002


def cifar_block_params(d: int) -> int:
    """One note-002 block at width d, MLP 4d, every Linear with a bias.

    norm1 + norm2 2*(2d) + q, k, v, proj 4*(d*d + d) + fc1 (d*4d + 4d) + fc2 (4d*d + d)
    = 4d + 4d^2 + 4d + 4d^2 + 4d + 4d^2 + d = 12 d^2 + 13 d.
    """
    return 12 * d * d + 13 * d


def cifar_rest_params(d: int, num_patches: int = 64, num_classes: int = 10) -> int:
    """Everything outside the blocks: patch conv, CLS token, positions, final norm, head.

    (3*4*4*d + d) + d + (num_patches + 1)*d + 2d + (d*num_classes + num_classes);
    at 64 patches and 10 classes: 49d + d + 65d + 2d + 10d + 10 = 127 d + 10.
    """
    return 3 * 4 * 4 * d + d + d + (num_patches + 1) * d + 2 * d + d * num_classes + num_classes


# One note-002 block of the Base model at D=512, MLP 4 * 512 = 2048 (every Linear has a bias):
CIFAR_BASE_BLOCK = (
    2 * (2 * 512)  # norm1, norm2                    =     2_048
    + 4 * (512 * 512 + 512)  # attn.q, .k, .v, .proj = 1_050_624
    + (512 * 2048 + 2048)  # mlp.fc1                 = 1_050_624
    + (2048 * 512 + 512)  # mlp.fc2                  = 1_049_088
)  #                                                 = 3_152_384


def test_cifar_base_param_count() -> None:
    with torch.device("meta"):
        vit = note002.build_cifar_vit()
    expected = (
        (3 * 4 * 4 * 512 + 512)  # patch_embed.proj =     25_088
        + 512  # cls_token (1, 1, 512)              =        512
        + 65 * 512  # pos_embed (1, 64 + 1, 512)    =     33_280
        + 6 * CIFAR_BASE_BLOCK  # 6 * 3_152_384     = 18_914_304
        + 2 * 512  # norm                           =      1_024
        + (512 * 10 + 10)  # head                   =      5_130
    )
    assert expected == cifar_block_params(512) * 6 + cifar_rest_params(512) == 18_979_338
    assert n_params(vit) == expected


@pytest.mark.parametrize(
    ("size", "expected"),
    [
        # 12 * (12*192^2 + 13*192) + 127*192 + 10 = 12 * 444_864 + 24_394
        pytest.param("tiny", 5_362_762, id="tiny"),
        # 12 * (12*384^2 + 13*384) + 127*384 + 10 = 12 * 1_774_464 + 48_778
        pytest.param("small", 21_342_346, id="small"),
        # 6 * (12*512^2 + 13*512) + 127*512 + 10 = 6 * 3_152_384 + 65_034
        pytest.param("base", 18_979_338, id="base"),
        # 12 * (12*768^2 + 13*768) + 127*768 + 10 = 12 * 7_087_872 + 97_546
        pytest.param("large", 85_152_010, id="large"),
    ],
)
def test_cifar_size_table_param_counts(size: str, expected: int) -> None:
    config = note002.CIFAR_VIT_SIZES[size]
    d, depth = config["embed_dim"], config["depth"]
    assert depth * cifar_block_params(d) + cifar_rest_params(d) == expected
    with torch.device("meta"):
        vit = note002.build_cifar_vit_size(size)
    assert n_params(vit) == expected


def test_cifar_note_table_counts_weights_only_and_misses_the_blocks() -> None:
    """Note 002's "参数量" table: bias-free entries, and "~8M" for six blocks that hold ~18.9M."""
    with torch.device("meta"):
        vit = note002.build_cifar_vit()
    assert vit.patch_embed.proj.weight.numel() == 3 * 4 * 4 * 512 == 24_576
    assert vit.pos_embed.numel() == 65 * 512 == 33_280
    assert vit.head.weight.numel() == 512 * 10 == 5_120
    assert n_params(vit.blocks) == 6 * cifar_block_params(512) == 18_914_304  # note: "~8M"
    assert n_params(vit) == 18_979_338  # note: "~8.5M"


def test_cifar_vit_small_forward_on_cpu() -> None:
    vit = note002.build_cifar_vit(embed_dim=64, depth=2, num_heads=4)
    assert run(vit, (2, 3, 32, 32)).shape == (2, 10)
    names = dict(vit.named_parameters())
    for name in ("q", "k", "v", "proj"):
        assert names[f"blocks.1.attn.{name}.weight"].shape == (64, 64)
    assert names["blocks.1.mlp.fc1.weight"].shape == (4 * 64, 64)  # (256, 64)
    assert names["cls_token"].shape == (1, 1, 64)
    assert names["pos_embed"].shape == (1, 65, 64)


def test_cifar_tiny_forward_on_cpu() -> None:
    assert run(note002.build_cifar_vit_size("tiny"), (1, 3, 32, 32)).shape == (1, 10)


def test_cifar_rejects_unknown_size() -> None:
    with pytest.raises(ValueError, match="huge"):
        note002.build_cifar_vit_size("huge")


def split_qkv(attn: note002.Attention, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """q, k, v of ``attn`` split into heads, for reference computations."""
    return tuple(attn.split_heads(linear(x)) for linear in (attn.q, attn.k, attn.v))


def project(attn: note002.Attention, heads: torch.Tensor) -> torch.Tensor:
    """Merge heads (B, h, N, d) -> (B, N, h*d) and apply the output projection."""
    batch, _, tokens, _ = heads.shape
    return attn.proj(heads.transpose(1, 2).reshape(batch, tokens, -1))


def test_cifar_attention_is_scaled_dot_product_attention() -> None:
    attn = note002.Attention(dim=16, num_heads=4)
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        q, k, v = split_qkv(attn, x)
        expected = project(attn, F.scaled_dot_product_attention(q, k, v))
        torch.testing.assert_close(attn(x), expected)


def test_linear_attention_is_relu_kernel_without_softmax() -> None:
    attn = note002.LinearAttention(dim=16, num_heads=4)
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        q, k, v = split_qkv(attn, x)
        # the quadratic order of the same product: (relu(q) @ relu(k)^T) @ v, unscaled
        expected = project(attn, (q.relu() @ k.relu().transpose(-2, -1)) @ v)
        torch.testing.assert_close(attn(x), expected)


def test_linear_attention_vit() -> None:
    with torch.device("meta"):
        full = note002.build_linear_attention_vit()
    assert n_params(full) == 18_979_338  # same linears as the softmax Base model, above
    vit = note002.build_linear_attention_vit(embed_dim=64, depth=2, num_heads=4)
    assert all(type(block.attn) is note002.LinearAttention for block in vit.blocks)
    assert run(vit, (2, 3, 32, 32)).shape == (2, 10)


def test_keep_count() -> None:
    assert note002.keep_count(64, 1.0) == 64
    assert note002.keep_count(64, 0.7) == 44  # int(64 * 0.7) = int(44.8)
    assert note002.keep_count(64, 0.49) == 31  # int(64 * 0.49) = int(31.36)
    assert note002.keep_count(64, 0.001) == 1  # int(0.064) = 0, raised to 1


def test_tokens_per_block() -> None:
    # (1, 1, 0.7, 0.7, 0.49, 0.49) of 64 patches: 64, 64, int(44.8), int(44.8), int(31.36), ...
    assert note002.tokens_per_block(64, note002.DEFAULT_KEEP_RATIOS) == [64, 64, 44, 44, 31, 31]
    # (0.5, 0.5, 0.25, 0.25) of 64 patches: 32, 32, 16, 16
    assert note002.tokens_per_block(64, (0.5, 0.5, 0.25, 0.25)) == [32, 32, 16, 16]


def block_sequence_lengths(vit: note002.CifarViT, in_shape: tuple[int, ...]) -> list[int]:
    """The token count each block receives, recorded by forward hooks."""
    seen: list[int] = []
    handles = [
        block.register_forward_hook(lambda _m, args, _out: seen.append(args[0].shape[1]))
        for block in vit.blocks
    ]
    run(vit, in_shape)
    for handle in handles:
        handle.remove()
    return seen


@pytest.mark.parametrize(
    ("keep_ratios", "prune_at"),
    [
        pytest.param(note002.DEFAULT_KEEP_RATIOS, (2, 4), id="default"),
        pytest.param((0.5, 0.5, 0.25, 0.25), (0, 2), id="from-first-block"),
        pytest.param((1.0, 1.0), (), id="no-pruning"),
    ],
)
def test_dynamic_vit_sequence_lengths(
    keep_ratios: tuple[float, ...], prune_at: tuple[int, ...]
) -> None:
    vit = note002.build_dynamic_vit(keep_ratios, embed_dim=64, num_heads=4)
    assert vit.prune_at == prune_at
    assert len(vit.predictors) == len(prune_at)
    expected = [1 + tokens for tokens in note002.tokens_per_block(64, keep_ratios)]
    assert block_sequence_lengths(vit, (2, 3, 32, 32)) == expected


def test_dynamic_vit_param_count() -> None:
    with torch.device("meta"):
        vit = note002.build_dynamic_vit()
    predictor = (
        2 * 512  # LayerNorm                         =  1_024
        + (512 * 128 + 128)  # Linear(512, 512 // 4) = 65_664
        + (128 * 1 + 1)  # Linear(128, 1)            =    129
    )  #                                             = 66_817
    assert predictor == 66_817
    # the Base model plus two predictors (ratio drops before blocks 2 and 4)
    assert n_params(vit) == 18_979_338 + 2 * predictor == 19_112_972
    # the predictors live on the model, beside the blocks, not inside them
    assert {name.split(".")[0] for name, _ in vit.named_parameters()} == {
        "patch_embed",
        "cls_token",
        "pos_embed",
        "blocks",
        "norm",
        "head",
        "predictors",
    }
    assert n_params(vit.predictors) == 2 * predictor


def test_prune_tokens_keeps_cls_and_the_top_k() -> None:
    predictor = note002.TokenPredictor(8)
    tokens = torch.randn(2, 7, 8)
    with torch.no_grad():
        pruned = note002.prune_tokens(tokens, predictor, 3)
        top = predictor(tokens[:, 1:]).topk(3, dim=1).indices
    assert pruned.shape == (2, 1 + 3, 8)
    torch.testing.assert_close(pruned[:, 0], tokens[:, 0])
    for b in range(2):
        torch.testing.assert_close(pruned[b, 1:], tokens[b, 1:][top[b]])


@pytest.mark.parametrize(
    "keep_ratios",
    [
        pytest.param((1.0, 0.5, 0.7), id="increasing"),
        pytest.param((1.0, 0.0), id="zero"),
        pytest.param((1.5, 1.0), id="above-one"),
    ],
)
def test_dynamic_vit_rejects_bad_schedules(keep_ratios: tuple[float, ...]) -> None:
    with pytest.raises(ValueError, match="keep ratios"):
        note002.build_dynamic_vit(keep_ratios, embed_dim=16, num_heads=2)


def test_dynamic_vit_rejects_schedule_of_wrong_length() -> None:
    with pytest.raises(ValueError, match="one per block"):
        note002.build_dynamic_vit((1.0, 0.5), depth=3, embed_dim=16, num_heads=2)


# --------------------------------------------------------------------------- note 004

# One note-004 Block at D=768 with qkv_bias=False (every other Linear has a bias):
NOTE004_BLOCK = (
    2 * 768  # norm1                     =     1_536
    + 768 * 3 * 768  # attn.qkv, no bias = 1_769_472
    + (768 * 768 + 768)  # attn.proj     =   590_592
    + 2 * 768  # norm2                   =     1_536
    + (768 * 3072 + 3072)  # mlp.fc1     = 2_362_368
    + (3072 * 768 + 768)  # mlp.fc2      = 2_360_064
)  #                                     = 7_085_568


@pytest.fixture(scope="module")
def note004_vit() -> nn.Module:
    return note004.build_note004_vit()


def test_note004_param_count(note004_vit: nn.Module) -> None:
    expected = (
        (3 * 16 * 16 * 768 + 768)  # patch_embed.proj =    590_592
        + 768  # cls_token (1, 1, 768)                =        768
        + 197 * 768  # pos_embed (1, 197, 768)        =    151_296
        + 12 * NOTE004_BLOCK  # 12 * 7_085_568        = 85_026_816
        + 2 * 768  # norm                             =      1_536
        + (768 * 1000 + 1000)  # head                 =    769_000
    )
    assert expected == 86_540_008
    assert n_params(note004_vit) == expected


def test_note004_qkv_bias_adds_one_bias_per_block() -> None:
    with torch.device("meta"):
        vit = note004.build_note004_vit(qkv_bias=True)
    # 86_540_008 + 12 * (3 * 768) = 86_540_008 + 27_648 = 86_567_656
    assert n_params(vit) == 86_540_008 + 12 * 3 * 768 == 86_567_656


def test_note004_tally_is_the_weight_matrices(note004_vit: nn.Module) -> None:
    """Section 6.4's numbers are exactly the weights' numel: no bias, no LayerNorm counted."""
    block = note004_vit.blocks[0]
    tally = {
        "Conv2d: 3×768×16×16": (note004_vit.patch_embed.proj.weight, 589_824),
        "CLS token: 1×1×768": (note004_vit.cls_token, 768),
        "Position Embedding: 1×197×768": (note004_vit.pos_embed, 151_296),
        "QKV: 768×(768×3)": (block.attn.qkv.weight, 1_769_472),
        "Proj: 768×768": (block.attn.proj.weight, 589_824),
        "fc1: 768×3072": (block.mlp.fc1.weight, 2_359_296),
        "fc2: 3072×768": (block.mlp.fc2.weight, 2_359_296),
        "Linear: 768×1000": (note004_vit.head.weight, 768_000),
    }
    assert {label: p.numel() for label, (p, _) in tally.items()} == {
        label: number for label, (_, number) in tally.items()
    }
    assert block.attn.qkv.bias is None  # qkv_bias=False
    # "最后的 LayerNorm: 768" is its weight alone; with the bias it holds 2 * 768 = 1_536
    assert note004_vit.norm.weight.numel() == 768
    assert n_params(note004_vit.norm) == 1_536


def test_note004_forward_on_cpu(note004_vit: nn.Module) -> None:
    assert run(note004_vit, (1, 3, 224, 224)).shape == (1, 1000)


def test_note004_small_image_forward_on_cpu() -> None:
    vit = note004.VisionTransformer(img_size=32, num_classes=10, embed_dim=64, depth=2, num_heads=4)
    assert vit.pos_embed.shape == (1, (32 // 16) ** 2 + 1, 64)  # (1, 5, 64)
    assert run(vit, (2, 3, 32, 32)).shape == (2, 10)


def test_note004_attention_is_scaled_dot_product_attention() -> None:
    attn = note004.Attention(dim=16, num_heads=4)
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        q, k, v = attn.qkv(x).reshape(2, 5, 3, 4, 4).permute(2, 0, 3, 1, 4)
        heads = F.scaled_dot_product_attention(q, k, v)
        expected = attn.proj(heads.transpose(1, 2).reshape(2, 5, 16))
        torch.testing.assert_close(attn(x), expected)
