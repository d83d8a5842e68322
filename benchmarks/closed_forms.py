"""Closed forms of held-out third-party models (issue 35): each model's params and MACs per
component, written from the package's own forward code at the size ``held_out.py`` builds it,
to hold vitprof's breakdown against.

Conventions (the README's): MACs are multiply-accumulates of matmuls, convolutions and
attention products, as ``FlopCounterMode`` prices them (element-wise ops, softmax and norms are
free); ``attn_core`` holds the products of queries with keys (relative-position logits computed
from q included) and of the attention weights with values, and what runs on the values beside
them before the output projection; pooling after the last block is ``head``; ``norm`` holds the
affine of every norm. A component not listed is 0.

Run as a command, the module checks its own bookkeeping (no third-party package needed)::

    python benchmarks/closed_forms.py --model tests/strangers/parallel.py:Net --image-size 16

the helpers against the arithmetic they name, and the verdict against a model's own breakdown
taken as its closed form (it matches) and that breakdown with 5 params moved from ``mlp`` to
``attn_proj`` (it names those two). One line per check; exit code 1 when one fails.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from vitprof import Component as C
from vitprof.count.result import Profile

Form = dict[C, tuple[int, int]]  # component -> (params, MACs)


def linear(tokens: int, fan_in: int, fan_out: int, bias: bool = True) -> tuple[int, int]:
    """A Linear (or 1x1 conv) run on ``tokens`` rows: its params and MACs."""
    return fan_in * fan_out + (fan_out if bias else 0), tokens * fan_in * fan_out


def times(count: int, form: tuple[int, int]) -> tuple[int, int]:
    return count * form[0], count * form[1]


def plus(*forms: tuple[int, int]) -> tuple[int, int]:
    return sum(f[0] for f in forms), sum(f[1] for f in forms)


def _pre_norm_vit(tokens: int, patches: int, patch_dim: int, dim: int, inner: int, hidden: int,
                  depth: int, qkv_bias: bool, tables: int, norms: int, classes: int) -> Form:
    """A plain ViT: a linear patch projection (or a conv with kernel = stride, the same
    products), ``depth`` blocks of one q/k/v projection dim -> 3 x inner, full attention over
    ``tokens``, an output projection inner -> dim (with bias), an MLP dim -> hidden -> dim
    (with biases), ``norms`` LayerNorms of dim, ``tables`` token/position parameters, and a
    classifier dim -> classes on one token."""
    return {
        C.PATCH_EMBED: linear(patches, patch_dim, dim),
        C.TOKENS: (tables, 0),
        C.ATTN_QKV: times(depth, linear(tokens, dim, 3 * inner, bias=qkv_bias)),
        C.ATTN_CORE: (0, depth * 2 * tokens * tokens * inner),  # q k^T and attn v
        C.ATTN_PROJ: times(depth, linear(tokens, inner, dim)),
        C.MLP: times(depth, plus(linear(tokens, dim, hidden), linear(tokens, hidden, dim))),
        C.NORM: (norms * 2 * dim, 0),
        C.HEAD: linear(1, dim, classes) if classes else (0, 0),
    }


def vformer_vanilla_vit() -> Form:
    """vformer 0.1.3 VanillaViT(img 32, patch 8, dim 32, 2 heads x 16, depth 2, mlp 64):
    LinearEmbedding (Rearrange + Linear(192, 32)), cls token, PosEmbedding (17 x 32),
    VanillaEncoder (PreNorm attention: to_qkv without bias, to_out with; PreNorm FeedForward),
    x[:, 0], MLPDecoder(32): LayerNorm + Linear(32, 10). 5 norms: 2 per block + the decoder's."""
    return _pre_norm_vit(tokens=17, patches=16, patch_dim=3 * 8 * 8, dim=32, inner=32,
                         hidden=64, depth=2, qkv_bias=False, tables=32 + 17 * 32, norms=5,
                         classes=10)


def torchmultimodal_vit() -> Form:
    """torchmultimodal VisionTransformer via vision_transformer(patch 8, hidden 32, ff 64,
    2 layers, 2 heads, image 32), pre- or post-norm alike: PatchEmbeddings (Conv2d 3 -> 32,
    kernel = stride = 8; cls token; 17 x 32 position table), TransformerEncoder layers of
    MultiHeadSelfAttention (input_proj Linear(32, 96) with bias, output_proj Linear(32, 32)),
    an MLP 32 -> 64 -> 32, two Fp32LayerNorms a layer and a final one; no pooler, no head."""
    return _pre_norm_vit(tokens=17, patches=16, patch_dim=3 * 8 * 8, dim=32, inner=32,
                         hidden=64, depth=2, qkv_bias=True, tables=32 + 17 * 32, norms=5,
                         classes=0)


def pytorch_pretrained_vit() -> Form:
    """pytorch-pretrained-vit 0.0.7 ViT(patches 8, dim 32, ff 64, 2 heads, 2 layers, image 32):
    Conv2d patch embedding, class token, PositionalEmbedding1D (17 x 32), blocks of proj_q,
    proj_k, proj_v (Linear(32, 32) with bias each), proj, fc1 / fc2, norm1 / norm2; the final
    LayerNorm on every token, then fc on the class token."""
    return _pre_norm_vit(tokens=17, patches=16, patch_dim=3 * 8 * 8, dim=32, inner=32,
                         hidden=64, depth=2, qkv_bias=True, tables=32 + 17 * 32, norms=5,
                         classes=10)


def vformer_cct() -> Form:
    """vformer 0.1.3 CCT(img 32, patch 4, dim 32, 2 layers, 2 heads x 16, mlp ratio 2,
    decoder_config 32): CVTEmbedding (Conv2d 3 -> 32, kernel = stride = 4, ReLU, MaxPool 3 / 2
    / 1: 8 x 8 -> 4 x 4 = 16 tokens), a learnable 16 x 32 position table, two VanillaEncoder
    blocks (as VanillaViT's), sequence pooling (attention_pool Linear(32, 1), softmax over the
    tokens, (1 x 16) @ (16 x 32)) and MLPDecoder(32). The pooling runs after the last block,
    an attention pool (docs/recognition.md, ``pooling-head-attention``): its score linear is
    ``head``, its weighted sum (a product of the pool's core) ``attn_core``, in no block."""
    form = _pre_norm_vit(tokens=16, patches=64, patch_dim=3 * 4 * 4, dim=32, inner=32,
                         hidden=64, depth=2, qkv_bias=False, tables=16 * 32, norms=5,
                         classes=10)
    form[C.HEAD] = plus(linear(16, 32, 1), form[C.HEAD])  # the scores: 16 x 32 MACs, 33 params
    form[C.ATTN_CORE] = plus(form[C.ATTN_CORE], (0, 16 * 32))  # their weighted sum
    return form


def vformer_swin() -> Form:
    """vformer 0.1.3 SwinTransformer(img 32, patch 4, dim 16, depths (1, 1), heads (1, 2),
    window 4, mlp ratio 4, qkv bias, ape, patch norm): PatchEmbedding (Conv2d 3 -> 16, kernel =
    stride = 4: 8 x 8 = 64 tokens; LayerNorm), absolute_pos_embed (64 x 16); stage 1: one
    block (no shift in a first block) of WindowAttention over 4 windows of 16 tokens, 1 head
    (qkv Linear(16, 48), a (2 x 4 - 1)^2 x 1 relative_position_bias_table indexed and added to
    the scores, to_out Linear(16, 16)), an MLP 16 -> 64 -> 16; PatchMerging (LayerNorm(64),
    Linear(64, 32) without bias on 4 x 4 = 16 tokens: a downsampling between stages,
    patch_embed); stage 2: one block over 1 window of 16 tokens, 2 heads of 16 (qkv
    Linear(32, 96), a 49 x 2 table, to_out Linear(32, 32), MLP 32 -> 128 -> 32); the final
    LayerNorm(32), mean over the tokens, MLPDecoder(32): LayerNorm + Linear(32, 10)."""
    return {
        C.PATCH_EMBED: plus(linear(64, 3 * 4 * 4, 16), linear(16, 64, 32, bias=False)),
        C.TOKENS: (64 * 16, 0),
        C.ATTN_QKV: plus(linear(64, 16, 48), linear(16, 32, 96)),
        # 4 windows x 2 products of 16 x 16 x 16; 1 window x 2 products of 16 x 16 x 32
        C.ATTN_CORE: (49 * 1 + 49 * 2, 4 * 2 * 16 * 16 * 16 + 2 * 16 * 16 * 32),
        C.ATTN_PROJ: plus(linear(64, 16, 16), linear(16, 32, 32)),
        C.MLP: plus(linear(64, 16, 64), linear(64, 64, 16), linear(16, 32, 128),
                    linear(16, 128, 32)),
        # patch norm, stage 1's two, the merging's (64), stage 2's two, final, decoder's
        C.NORM: (2 * (16 + 2 * 16 + 64 + 2 * 32 + 32 + 32), 0),
        C.HEAD: linear(1, 32, 10),
    }


def timesformer() -> Form:
    """timesformer-pytorch 0.4.1 TimeSformer(dim 32, 4 frames, image 32, patch 8, depth 2,
    2 heads x 16, rotary): to_patch_embedding Linear(192, 32) on 4 x 16 = 64 patches, a cls
    token (no position table: rotary), per layer PreNorm time attention, PreNorm space
    attention (to_qkv Linear(32, 96) without bias, to_out Linear(32, 32) on all 65 tokens),
    PreNorm GEGLU FeedForward (Linear(32, 256), Linear(128, 32)); to_out LayerNorm + Linear(32,
    10) on the cls token. Attention: the cls query over all 65 keys; time: 16 groups of 4
    queries over 1 + 4 keys; space: 4 groups of 16 queries over 1 + 16 keys."""
    inner, tokens = 32, 65
    cls = 2 * tokens * inner  # the cls query: scores over 65 keys, then their weighted sum
    time = cls + 16 * 2 * 4 * 5 * inner
    space = cls + 4 * 2 * 16 * 17 * inner
    return {
        C.PATCH_EMBED: linear(64, 3 * 8 * 8, 32),
        C.TOKENS: (32, 0),
        C.ATTN_QKV: times(4, linear(tokens, 32, 3 * inner, bias=False)),
        C.ATTN_CORE: (0, 2 * (time + space)),
        C.ATTN_PROJ: times(4, linear(tokens, inner, 32)),
        C.MLP: times(2, plus(linear(tokens, 32, 256), linear(tokens, 128, 32))),
        C.NORM: (7 * 2 * 32, 0),  # 3 PreNorms a layer, the head's LayerNorm
        C.HEAD: linear(1, 32, 10),
    }


def perceiver(depth: int = 2) -> Form:
    """perceiver-pytorch 0.11.0 Perceiver(4 freq bands, latents 8 x 32, cross 1 head x 16,
    latent 2 heads x 16) on a 32 x 32 x 3 image: the data is 1,024 tokens of 3 + 2 x (2 x 4 + 1)
    = 21 channels (fourier features, no params); per layer a PerceiverBlock: PreNorm cross
    attention (LayerNorm(32) on the latents, LayerNorm(21) on the data; to_q Linear(32, 16) and
    to_kv Linear(21, 32) without bias, to_out Linear(16, 32)), PreNorm GEGLU FeedForward
    (Linear(32, 256), Linear(128, 32)), PreNorm self attention (to_q Linear(32, 32), to_kv
    Linear(32, 64), to_out Linear(32, 32)), PreNorm FeedForward; to_logits: mean over the
    latents, LayerNorm(32), Linear(32, 10). With weight_tie_layers the layers after the first
    share one set of weights: params of min(depth, 2) layers, MACs of ``depth``."""
    owned = min(depth, 2)

    def layers(form: tuple[int, int]) -> tuple[int, int]:
        return owned * form[0], depth * form[1]

    feed_forward = plus(linear(8, 32, 256), linear(8, 128, 32))
    return {
        C.TOKENS: (8 * 32, 0),
        C.ATTN_QKV: layers(plus(linear(8, 32, 16, bias=False), linear(1024, 21, 32, bias=False),
                                linear(8, 32, 32, bias=False), linear(8, 32, 64, bias=False))),
        # cross: 8 queries x 1,024 keys x 16, twice; self: 2 products of 8 x 8 x 32
        C.ATTN_CORE: layers((0, 2 * 8 * 1024 * 16 + 2 * 8 * 8 * 32)),
        C.ATTN_PROJ: layers(plus(linear(8, 16, 32), linear(8, 32, 32))),
        C.MLP: layers(times(2, feed_forward)),
        C.NORM: (owned * 2 * (32 + 21 + 3 * 32) + 2 * 32, 0),
        C.HEAD: linear(1, 32, 10),
    }


def axial_image_transformer() -> Form:
    """axial-attention 0.6.1 AxialImageTransformer(dim 16, depth 2, 2 heads, not reversible,
    axial_pos_emb_shape 16 x 16) on a 16 x 16 x 16 map: AxialPositionalEmbedding (a 16 x 16 x 1
    and a 16 x 1 x 16 table); its Sequential runs, per layer, x + attention along the height,
    x + attention along the width (PermuteToFrom, PreNorm LayerNorm(16), SelfAttention of
    2 heads x 8: to_q Linear(16, 16) and to_kv Linear(16, 32) without bias, to_out
    Linear(16, 16); 16 rows x 2 heads of 16 x 16 x 8 products, twice), then x + ff, x + ff,
    each ff a ChanLayerNorm (g and b, 16 each) and Conv2d 16 -> 64 -> 16 (3 x 3, bias), run on
    all 256 positions: the package calls it the layer's feed-forward, but it is made of
    spatial convolutions alone, each output position reading its 3 x 3 neighbours, which
    docs/recognition.md's ``token-mixer-conv`` places ``conv`` even inside a block (a unit
    after the core made of spatial convolutions alone mixes tokens), and a residual segment
    after a block whose branch mixes tokens stays out of it (``residual-segment-block``):
    ``conv``."""
    attention = {
        C.ATTN_QKV: plus(linear(256, 16, 16, bias=False), linear(256, 16, 32, bias=False)),
        C.ATTN_CORE: (0, 2 * (16 * 2) * 16 * 16 * 8),
        C.ATTN_PROJ: linear(256, 16, 16),
    }
    feed_forward = plus(linear(256, 16 * 9, 64), linear(256, 64 * 9, 16))  # 3 x 3 convs
    return {
        C.TOKENS: (2 * 16 * 16, 0),
        **{component: times(2 * 2, form) for component, form in attention.items()},
        C.CONV: times(2 * 2, feed_forward),
        C.NORM: (2 * 2 * (2 * 16) + 2 * 2 * (2 * 16), 0),  # attention LayerNorms, ChanLayerNorms
    }


def aifi() -> Form:
    """ultralytics 8.3.40 AIFI(32, cm 64, 2 heads) on a 32 x 8 x 8 map: a post-norm
    TransformerEncoderLayer on the 64 tokens; the 2D sin-cos position embedding is built in the
    forward from constants (two (64 x 1) @ (1 x 8) products: tokens, no params) and added to q
    and k; nn.MultiheadAttention (in_proj 32 -> 96 with bias, run as q, k and v projections;
    out_proj 32 -> 32), fc1 32 -> 64, fc2 64 -> 32, norm1, norm2."""
    return {
        C.TOKENS: (0, 2 * 64 * 1 * 8),
        C.ATTN_QKV: linear(64, 32, 96),
        C.ATTN_CORE: (0, 2 * 64 * 64 * 32),
        C.ATTN_PROJ: linear(64, 32, 32),
        C.MLP: plus(linear(64, 32, 64), linear(64, 64, 32)),
        C.NORM: (2 * 2 * 32, 0),
    }


def performer() -> Form:
    """performer-pytorch 1.1.4 Performer(dim 32, depth 2, 2 heads x 16, nb_features 16) on 16
    tokens: per layer PreLayerNorm SelfAttention (to_q, to_k, to_v Linear(32, 32) with bias,
    FastAttention, to_out Linear(32, 32)), PreLayerNorm FeedForward (32 -> 128 -> 32). The
    random-feature projection is a buffer. FastAttention per layer: softmax_kernel on q and on k
    (einsum of 2 heads x 16 tokens x 16 dims with the 16 x 16 projection: 8,192 each; the
    diagonal terms are element-wise), then linear_attention's einsums: D_inv from q and
    k_cumsum (2 x 16 x 16 = 512), context = k^T v (2 x 16 x 16 x 16 = 8,192), and context with
    q (2 x 16 x 16 x 16 = 8,192; the factor D_inv is element-wise)."""
    core = 2 * 8_192 + 512 + 8_192 + 8_192
    return {
        C.ATTN_QKV: times(2 * 3, linear(16, 32, 32)),
        C.ATTN_CORE: (0, 2 * core),
        C.ATTN_PROJ: times(2, linear(16, 32, 32)),
        C.MLP: times(2, plus(linear(16, 32, 128), linear(16, 128, 32))),
        C.NORM: (4 * 2 * 32, 0),
    }


def performer_scalenorm() -> Form:
    """Performer as :func:`performer`, with use_scalenorm: each PreScaleNorm divides by the
    vector norm and multiplies by one gain ``g`` (1 param), a norm."""
    return {**performer(), C.NORM: (4 * 1, 0)}


def nystromformer() -> Form:
    """nystrom-attention 0.0.14 Nystromformer(dim 32, depth 2, 2 heads x 16, 4 landmarks,
    6 pinv iterations, residual conv kernel 3) on 16 tokens: per layer PreNorm NystromAttention
    (to_qkv Linear(32, 96) without bias; landmarks are sums (free); sim1 q k_l^T 2 x 16 x 4 x
    16, sim2 q_l k_l^T 2 x 4 x 4 x 16, sim3 q_l k^T 2 x 4 x 16 x 16; the Moore-Penrose
    iteration: 4 products of 4 x 4 x 4 per head and iteration; (attn1 @ attn2_inv) 2 x 16 x 4 x
    4, (attn3 @ v) 2 x 4 x 16 x 16, their product 2 x 16 x 4 x 16; res_conv, a depthwise Conv2d
    over heads (kernel 3 x 1, no bias) on v, added to the output before to_out
    Linear(32, 32)), PreNorm FeedForward (32 -> 128 -> 32)."""
    products = (2 * 16 * 4 * 16 + 2 * 4 * 4 * 16 + 2 * 4 * 16 * 16 + 6 * 4 * 2 * 4 * 4 * 4
                + 2 * 16 * 4 * 4 + 2 * 4 * 16 * 16 + 2 * 16 * 4 * 16)
    values_conv = (2 * 3, 2 * 16 * 16 * 3)  # 2 heads x 3 taps; 2 x 16 x 16 outputs x 3 taps
    return {
        C.ATTN_QKV: times(2, linear(16, 32, 96, bias=False)),
        C.ATTN_CORE: times(2, plus((0, products), values_conv)),
        C.ATTN_PROJ: times(2, linear(16, 32, 32)),
        C.MLP: times(2, plus(linear(16, 32, 128), linear(16, 128, 32))),
        C.NORM: (4 * 2 * 32, 0),
    }


def lambda_layer() -> Form:
    """lambda-networks 0.4.0 LambdaLayer(dim 16, dim_out 32, r 3, dim_k 8, heads 2, dim_u 1) on
    a 16 x 8 x 8 map (64 positions): to_q (16 -> 16), to_k (16 -> 8), to_v (16 -> 16) 1x1 convs
    without bias, BatchNorms on q (16) and v (16); content lambda k v^T (8 x 16 x 64), Yc = q
    lambda (2 x 8 x 16 x 64); position lambdas: pos_conv, a Conv3d 1 -> 8, kernel 1 x 3 x 3 with
    bias, on v (8 x 16 x 64 outputs x 9 taps); Yp (2 x 8 x 16 x 64). No output projection."""
    pos_conv = (8 * 9 + 8, 8 * 16 * 64 * 9)
    return {
        C.ATTN_QKV: plus(linear(64, 16, 16, bias=False), linear(64, 16, 8, bias=False),
                         linear(64, 16, 16, bias=False)),
        C.ATTN_CORE: plus((0, 8 * 16 * 64 + 2 * 8 * 16 * 64 + 2 * 8 * 16 * 64), pos_conv),
        C.NORM: (2 * 16 + 2 * 16, 0),
    }


def halo_attention() -> Form:
    """halonet-pytorch 0.0.5 HaloAttention(dim 16, block 4, halo 1, 2 heads x 8) on a 16 x 8 x 8
    map: 4 blocks of 16 queries, each over a 6 x 6 = 36 window; to_q Linear(16, 16) and to_kv
    Linear(16, 32) without bias, to_out Linear(16, 16); q k^T and attn v (2 heads x 4 blocks:
    8 x 16 x 36 x 8 each); RelPosEmb: rel_height and rel_width tables (11 x 8 each) read by q
    (8 x 16 x 11 x 8 each), added to the scores."""
    return {
        C.ATTN_QKV: plus(linear(4 * 16, 16, 16, bias=False), linear(4 * 36, 16, 32, bias=False)),
        C.ATTN_CORE: (2 * 11 * 8, 2 * 8 * 16 * 36 * 8 + 2 * 8 * 16 * 11 * 8),
        C.ATTN_PROJ: linear(64, 16, 16),
    }


def image_linear_attention() -> Form:
    """linear-attention-transformer 0.19.1 ImageLinearAttention(chan 16, key 8, value 8,
    2 heads) on a 16 x 8 x 8 map: to_q, to_k, to_v 1x1 convs 16 -> 16 with bias, k and q
    softmaxes, context = k v^T (2 x 8 x 8 x 64), out = q^T context (2 x 8 x 8 x 64), to_out 1x1
    conv 16 -> 16 with bias."""
    return {
        C.ATTN_QKV: times(3, linear(64, 16, 16)),
        C.ATTN_CORE: (0, 2 * (2 * 8 * 8 * 64)),
        C.ATTN_PROJ: linear(64, 16, 16),
    }


CLOSED_FORMS: dict[tuple[str, str], Callable[[], Form]] = {
    ("vformer", "VanillaViT"): vformer_vanilla_vit,
    ("vformer", "CCT"): vformer_cct,
    ("vformer", "SwinTransformer"): vformer_swin,
    ("torchmultimodal", "VisionTransformer"): torchmultimodal_vit,
    ("torchmultimodal", "VisionTransformer-post-norm"): torchmultimodal_vit,
    ("pytorch-pretrained-vit", "ViT"): pytorch_pretrained_vit,
    ("timesformer-pytorch", "TimeSformer"): timesformer,
    ("axial-attention", "AxialImageTransformer"): axial_image_transformer,
    ("ultralytics", "AIFI"): aifi,
    ("perceiver-pytorch", "Perceiver"): perceiver,
    ("perceiver-pytorch", "Perceiver-weight-tied"): lambda: perceiver(depth=3),
    ("performer-pytorch", "Performer"): performer,
    ("performer-pytorch", "Performer+scalenorm"): performer_scalenorm,
    ("nystrom-attention", "Nystromformer"): nystromformer,
    ("lambda-networks", "LambdaLayer"): lambda_layer,
    ("halonet-pytorch", "HaloAttention"): halo_attention,
    ("linear-attention-transformer", "ImageLinearAttention"): image_linear_attention,
}
"""The subjects with a closed form, by (package, model name) as ``held_out.py`` lists them."""


def closed_form_verdict(form: Form, profile: Profile) -> dict[str, tuple[int, int, int, int]]:
    """The components where ``profile`` differs from ``form``: ``{component: (params, MACs
    found, params, MACs of the closed form)}``; empty when every component matches."""
    differs = {}
    for component, found in profile.components.items():
        expected = form.get(component, (0, 0))
        if (found.params, found.macs) != expected:
            differs[str(component)] = (found.params, found.macs, *expected)
    return differs


def _helper_checks() -> list[tuple[str, bool]]:
    """The helpers against the arithmetic they name (a Linear 32 -> 96 on 17 tokens)."""
    return [
        ("linear: 32 * 96 + 96 = 3,168 params, 17 * 32 * 96 = 52,224 MACs",
         linear(17, 32, 96) == (32 * 96 + 96, 17 * 32 * 96)),
        ("linear without bias: 32 * 96 params", linear(17, 32, 96, bias=False) == (
            32 * 96, 17 * 32 * 96)),
        ("times: 2 x (3, 5) = (6, 10)", times(2, (3, 5)) == (6, 10)),
        ("plus: (1, 2) + (3, 4) + (5, 6) = (9, 12)", plus((1, 2), (3, 4), (5, 6)) == (9, 12)),
    ]


def _verdict_checks(profile: Profile) -> list[tuple[str, bool]]:
    """The verdict on ``profile``'s own breakdown (it matches), and on that breakdown with 5
    params moved from ``mlp`` to ``attn_proj`` (it names both, found beside closed form)."""
    found = {c: (n.params, n.macs) for c, n in profile.components.items() if n.params or n.macs}
    mlp, proj = found.get(C.MLP, (0, 0)), found.get(C.ATTN_PROJ, (0, 0))
    moved = {**found, C.MLP: (mlp[0] - 5, mlp[1]), C.ATTN_PROJ: (proj[0] + 5, proj[1])}
    return [
        ("verdict: a breakdown taken as its closed form matches",
         closed_form_verdict(found, profile) == {}),
        ("verdict: 5 params moved from mlp to attn_proj name those two",
         closed_form_verdict(moved, profile) == {
             "attn_proj": (*proj, proj[0] + 5, proj[1]), "mlp": (*mlp, mlp[0] - 5, mlp[1])}),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    import vitprof

    parser = argparse.ArgumentParser(description="Check the closed forms' helpers and verdict.")
    parser.add_argument("--model", required=True,
                        help="a model with an mlp, any name vitprof.analyze accepts")
    parser.add_argument("--image-size", type=int, help="the model's image size")
    args = parser.parse_args(argv)
    sizes = {} if args.image_size is None else {"image_size": args.image_size}
    checks = [*_helper_checks(), *_verdict_checks(vitprof.analyze(args.model, **sizes))]
    for label, holds in checks:
        print(f"{'holds' if holds else 'FAILS'}: {label}")
    failed = sum(not holds for _, holds in checks)
    print(f"{len(checks) - failed} of {len(checks)} checks hold")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
