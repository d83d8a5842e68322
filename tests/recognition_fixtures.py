"""One tiny model per recognition rule (docs/recognition.md), with neutral names.

Geometry: a 1x3x8x8 image, patches of 4 -> N = 4 tokens on a 2x2 map, width D = 8, MLP hidden
HID = 16, one head, L = 2 blocks in a ModuleList ``m``. The patch projection ``a`` is a 4x4
stride-4 conv, 3 -> D: 3*16*D + D = 392 params, N*48*D = 1_536 MACs; the final LayerNorm ``n``
2D params; the classifier ``b`` D -> 10: D*10 + 10 = 90 params, D*10 = 80 MACs.

A standard block (:class:`Blk`): LayerNorm ``c``, q/k/v ``d`` (D -> 3D), core softmax(q k^T) v
(2 N^2 D MACs), output ``e`` (D -> D), LayerNorm ``f``, MLP ``g`` (D -> HID) and ``h``
(HID -> D). Each fixture's expected breakdown is written as arithmetic (params, MACs) per
component in :data:`FIXTURES`; the module-level names say where each comes from.

The rules (``vitprof/recognize/rules``) and their machinery (``vitprof/recognize/graph``) speak
of the data flow only; the models that showed each case are told here, beside the fixture
showing it (``tests/test_rules_name_no_model.py`` holds them to that). Cases of the machinery
that no single rule's fixture shows:

- the walk from a core's output to its projection passes a join forking from the core's own
  q/k/v side: EfficientFormerV2's and CSWin's depthwise conv of v added to the attention's
  output before its projection;
- a linear's bias added apart from its product in its own module: ``F.linear`` on a
  non-contiguous 3-D input runs ``mm`` then ``add`` (NextViT);
- a fused attention op is never the second product of another core: gemma4_vit's rotary
  frequencies (a product of the positions and the inverse frequencies) reach its SDPA through
  cos and the rotation of q;
- a block is the child of the innermost container holding cores: lucidrains'
  ``layers[i] = ModuleList([attn, ff])`` gives ``layers.i`` (its ``[PreNorm(attn),
  PreNorm(ff)]``, children of one class, are one block's layers), Swin ``layers.s.blocks.j``,
  TimeSformer's temporal and spatial attention in one layer one block; the children of a
  container each running residual adds of their own are the blocks (timm's ``MaxxVitBlock``: an
  MBConv, then a window and a grid attention layer; torchvision's ``MaxVitLayer``); a list of
  children of several classes narrows to the one holding the core (SwiftFormer's
  ``stages.s.blocks``), but a norm beside its attention stays with it (torchvision MaxViT's
  ``Sequential(LayerNorm, attention)``);
- a core-less sibling of the blocks of their class is part of the block before it (HF LeViT's
  ``layers = [Residual(attention), Residual(mlp), ...]``), and a record run between two
  records of one block is in it (CoaT's shared convolutional position encoding);
- a fused projection: ViT-22B's parallel block (timm's ``ParallelScalingBlock``), the MLP's
  first layer and q, k, v in one ``in_proj``;
- a class token plus its position added first, then to the sequence, is ``tokens`` (ViTMAE);
- the convolutions around a hybrid's transformer: MobileViT's local representation and fusion,
  MobileNetV4-hybrid's last inverted residual, FastViT's ``final_conv`` (:class:`MapNet`,
  :class:`FinalNet`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils import parametrize

from vitprof import analysis
from vitprof.core.records import Component as C
from vitprof.count.result import Profile
from vitprof.recognize import breakdown
from vitprof.recognize.rules.base import RuleSet
from vitprof.study.token_reduction.models import merge_by_scores

D, HID, N, L = 8, 16, 4, 2
IMAGE = 8

Breakdown = dict[C, tuple[int, int]]  # component -> (params, MACs)


def analyze_under(rules: RuleSet, model: nn.Module, **options: Any) -> Profile:
    """``analyze(model, recognizer="graph", **options)``, the graph recognizer given the
    recognition ``rules`` (some switched off: a removed rule changes its fixture)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(analysis, "breakdown", partial(breakdown, rules=rules))
        return analysis.analyze(model, recognizer="graph", **options)


def _sum(*parts: Breakdown) -> Breakdown:
    total: Breakdown = {}
    for part in parts:
        for c, (params, macs) in part.items():
            p0, m0 = total.get(c, (0, 0))
            total[c] = (p0 + params, m0 + macs)
    return {c: v for c, v in total.items() if v != (0, 0)}


def _times(k: int, part: Breakdown) -> Breakdown:
    return {c: (k * p, k * m) for c, (p, m) in part.items()}


def block(n: int = N) -> Breakdown:
    """One standard block on ``n`` tokens."""
    return {
        C.NORM: (2 * 2 * D, 0),  # two LayerNorms, weight and bias
        C.ATTN_QKV: (3 * D * D + 3 * D, n * D * 3 * D),
        C.ATTN_CORE: (0, 2 * n * n * D),  # q k^T and a v
        C.ATTN_PROJ: (D * D + D, n * D * D),
        C.MLP: (D * HID + HID + HID * D + D, 2 * n * D * HID),
    }


OUTSIDE: Breakdown = {
    C.PATCH_EMBED: (3 * 16 * D + D, N * 48 * D),
    C.NORM: (2 * D, 0),
    C.HEAD: (D * 10 + 10, D * 10),
}


def net(*extra: Breakdown, n: int = N) -> Breakdown:
    """The standard net: patch projection, L standard blocks, norm, head, and ``extra``."""
    return _sum(OUTSIDE, _times(L, block(n)), *extra)


def tokens(x: torch.Tensor) -> torch.Tensor:
    return x.flatten(2).transpose(1, 2)


def grid(x: torch.Tensor) -> torch.Tensor:
    return x.transpose(1, 2).reshape(x.shape[0], D, 2, 2)


class Blk(nn.Module):
    """The standard block; subclasses change one part."""

    def __init__(self) -> None:
        super().__init__()
        self.c, self.f = nn.LayerNorm(D), nn.LayerNorm(D)
        self.d, self.e = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.g, self.h = nn.Linear(D, HID), nn.Linear(HID, D)

    def core(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return (q * 0.5 @ k.transpose(-2, -1)).softmax(-1) @ v

    def attend(self, x: torch.Tensor) -> torch.Tensor:
        return self.e(self.core(*self.d(x).chunk(3, -1)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attend(self.c(x))
        return x + self.h(F.gelu(self.g(self.f(x))))


class Net(nn.Module):
    """Patch projection, hooks before and after the blocks, L blocks, norm, mean, head."""

    def __init__(self, blk: Callable[[], nn.Module] = Blk) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, D, 4, 4)
        self.m = nn.ModuleList([blk() for _ in range(L)])
        self.n = nn.LayerNorm(D)
        self.b = nn.Linear(D, 10)

    def before(self, x: torch.Tensor) -> torch.Tensor:
        return x

    def after(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(1)

    def prepare(self, image: torch.Tensor) -> torch.Tensor:
        return image * 0.5

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        x = self.before(tokens(self.a(self.prepare(image))))
        for k in self.m:
            x = k(x)
        return self.b(self.after(self.n(x)))


class Plain(Net):
    """The standard net with a position embedding ``p`` added to the tokens."""

    def __init__(self) -> None:
        super().__init__()
        self.p = nn.Parameter(torch.zeros(1, N, D))

    def before(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.p


class Sdpa(Blk):
    def core(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v)


class SoftmaxMixBlk(Blk):
    """One product: weights over the tokens made by a linear ``w`` (D -> N), a softmax, their
    product with the values ``v`` (D -> D), output ``e``. Seen in VOLO's outlook
    attention (a linear makes the weights, one product with the unfolded values) and CoaT's
    factorized attention (``q (softmax(k)^T v)``: its second product searched through records
    without MACs only)."""

    def __init__(self) -> None:
        super().__init__()
        del self.d
        self.w, self.v = nn.Linear(D, N), nn.Linear(D, D)

    def attend(self, x: torch.Tensor) -> torch.Tensor:
        return self.e(self.w(x).softmax(-1) @ self.v(x))


SOFTMAX_MIX = {C.ATTN_QKV: (D * N + N + D * D + D, N * D * N + N * D * D),
               C.ATTN_CORE: (0, N * N * D)}  # one product: N x N weights times N x D values


class Additive(nn.Module):
    """Additive attention (no product of two activations): q and k linears, a softmax over the
    tokens of q summed, a pooled q times k, output o. Seen in SwiftFormer's additive
    attention (``q w_g`` normalised over the tokens) and MobileViTv2's separable self-attention
    (a softmax of a one-channel query over the patches, a sum of k, a product with relu(v))."""

    def __init__(self) -> None:
        super().__init__()
        self.q, self.k, self.o = nn.Linear(D, D), nn.Linear(D, D), nn.Linear(D, D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k = self.q(x), self.k(x)
        w = q.sum(-1, keepdim=True).softmax(1)
        return self.o((w * q).sum(1, keepdim=True) * k)


class AdditiveBlk(Blk):
    def __init__(self) -> None:
        super().__init__()
        del self.d, self.e
        self.t = Additive()

    def attend(self, x: torch.Tensor) -> torch.Tensor:
        return self.t(x)


ADDITIVE = {C.ATTN_QKV: (2 * (D * D + D), 2 * N * D * D), C.ATTN_CORE: (0, 0),
            C.ATTN_PROJ: (D * D + D, N * D * D)}


class PartsBlk(Blk):
    """Attention as one fused op priced in parts (``_native_multi_head_attention``), its
    weights raw parameters: in-projection w0, b0 (3D x D), out-projection w1, b1."""

    def __init__(self) -> None:
        super().__init__()
        del self.d, self.e
        self.w0, self.b0 = nn.Parameter(torch.zeros(3 * D, D)), nn.Parameter(torch.zeros(3 * D))
        self.w1, self.b1 = nn.Parameter(torch.zeros(D, D)), nn.Parameter(torch.zeros(D))

    def attend(self, x: torch.Tensor) -> torch.Tensor:
        return torch._native_multi_head_attention(x, x, x, D, 1, self.w0, self.b0, self.w1,
                                                  self.b1, need_weights=False)[0]


# the one op reads all four parameters and its q/k/v part has the most MACs (3 N D^2 against
# N D^2): the out-projection's w1, b1 are placed with it (as an nn.MultiheadAttention's
# out_proj on its fast path), a known limit of placing a parameter by its heaviest reader
PARTS_SHIFT = {C.ATTN_QKV: (D * D + D, 0), C.ATTN_PROJ: (-(D * D + D), 0)}


class Rms(nn.Module):
    """An RMS norm written out: pow, mean, rsqrt, a multiply by its own weight ``w``. Seen in
    transformers' ``*RMSNorm`` modules."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.ones(D))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.w


class RmsBlk(Blk):
    def __init__(self) -> None:
        super().__init__()
        self.c, self.f = Rms(), Rms()


RMS = {C.NORM: (2 * D, 0)}  # two written-out norms, a weight of D each


class BiasBlk(Blk):
    """A bias of the scores made by a linear ``u`` (2 -> 1) from a table ``r`` (N x N x 2)."""

    def __init__(self) -> None:
        super().__init__()
        self.r = nn.Parameter(torch.zeros(N, N, 2))
        self.u = nn.Linear(2, 1)

    def core(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        scores = q @ k.transpose(-2, -1) + self.u(self.r)[..., 0]
        return scores.softmax(-1) @ v


SCORE_BIAS = {C.ATTN_CORE: (N * N * 2 + 2 + 1, N * N * 2)}  # the table, u's weight and bias


OFFSETS = 4  # the distinct offsets (|dy|, |dx|) between two positions of the 2x2 map


class CachedBiasBlk(Blk):
    """A bias of the scores indexed from a table ``r`` (one per offset) by a buffer ``i`` of
    each pair's offset, and in eval mode cached once when the block is switched (``ab``, a
    plain attribute), then added to the scores (TinyViT's and LeViT's original code): the
    forward reads no parameter, the switch to eval mode does."""

    def __init__(self) -> None:
        super().__init__()
        self.r = nn.Parameter(torch.zeros(1, OFFSETS))
        cells = [(y, x) for y in range(2) for x in range(2)]
        self.register_buffer("i", torch.tensor(
            [[2 * abs(a[0] - b[0]) + abs(a[1] - b[1]) for b in cells] for a in cells]))

    @torch.no_grad()
    def train(self, mode: bool = True) -> CachedBiasBlk:
        super().train(mode)
        if mode:
            self.__dict__.pop("ab", None)
        else:
            self.ab = self.r[:, self.i]
        return self

    def core(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        bias = self.r[:, self.i] if self.training else self.ab
        return (q @ k.transpose(-2, -1) + bias).softmax(-1) @ v


CACHED_BIAS = {C.ATTN_CORE: (OFFSETS, 0)}  # the table; adding it to the scores costs no MAC


class Reduced(nn.Module):
    """Spatial-reduction attention: the keys and values come
    from ``s`` (a 2x2 stride-2 conv: the 2x2 map to one token) then ``kv``; the reduced token is
    also added to the attention's output, so ``s`` feeds more than k and v (feeds-only-qkv
    does not place it)."""

    def __init__(self) -> None:
        super().__init__()
        self.q, self.o = nn.Linear(D, D), nn.Linear(D, D)
        self.s = nn.Conv2d(D, D, 2, 2)
        self.kv = nn.Linear(D, 2 * D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        r = tokens(self.s(grid(x)))
        k, v = self.kv(r).chunk(2, -1)
        return self.o((self.q(x) @ k.transpose(-2, -1)).softmax(-1) @ v + r)


class ReducedBlk(AdditiveBlk):
    def __init__(self) -> None:
        super().__init__()
        self.t = Reduced()


REDUCED = {
    # q on N tokens; s: one output position, D*4 inputs each; kv on one token
    C.ATTN_QKV: (D * D + D + D * D * 4 + D + 2 * D * D + 2 * D,
                 N * D * D + D * D * 4 + D * 2 * D),
    C.ATTN_CORE: (0, 2 * N * 1 * D),  # N queries, one key
    C.ATTN_PROJ: (D * D + D, N * D * D),
}


class FusedBlk(Blk):
    """A parallel block with one in-projection ``d`` (D -> 3D + HID): q, k, v and the MLP's
    hidden layer, split by columns; out = e(core) + h(gelu(hidden)) (``fused-projection-share``:
    ViT-22B's fused ``in_proj``, timm's ``vit_*_xp_224``)."""

    def __init__(self) -> None:
        super().__init__()
        del self.f, self.g
        self.d = nn.Linear(D, 3 * D + HID)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v, hidden = self.d(self.c(x)).split([D, D, D, HID], -1)
        return x + self.e(self.core(q, k, v)) + self.h(F.gelu(hidden))


def fused_block() -> Breakdown:
    return {
        C.NORM: (2 * D, 0),  # one LayerNorm
        C.ATTN_QKV: (3 * D * D + 3 * D, N * D * 3 * D),  # d's 3D columns
        C.ATTN_CORE: (0, 2 * N * N * D),
        C.ATTN_PROJ: (D * D + D, N * D * D),
        C.MLP: (HID * D + HID + HID * D + D, 2 * N * D * HID),  # d's HID columns, h
    }


class Pooled(Net):
    """An attention-pooling head ``z`` after the blocks: a learned query ``t`` through ``zq``,
    keys and values ``zkv`` of the N tokens, output ``zo`` (``pooling-head-attention``: timm's
    attention-pooling heads; CCT's sequence pooling is one too, a linear scoring each token, a
    softmax over the tokens and their sum so weighted)."""

    def __init__(self) -> None:
        super().__init__()
        self.t = nn.Parameter(torch.zeros(1, 1, D))
        self.zq, self.zo, self.zkv = nn.Linear(D, D), nn.Linear(D, D), nn.Linear(D, 2 * D)

    def after(self, x: torch.Tensor) -> torch.Tensor:
        k, v = self.zkv(x).chunk(2, -1)
        a = (self.zq(self.t) @ k.transpose(-2, -1)).softmax(-1) @ v
        return self.zo(a)[:, 0]


POOLED = {
    C.HEAD: (D + D * D + D + D * D + D + 2 * D * D + 2 * D, D * D + D * D + N * D * 2 * D),
    C.ATTN_CORE: (0, 2 * 1 * N * D),  # one query, N keys
}


class MixerBlk(Blk):
    """A depthwise 3x3 conv ``a`` on the token map before the attention, residual
    (``token-mixer-conv``). Seen in EfficientViT-M's ``dw0`` (and ``dw1`` after the core),
    DaViT's and SwiftFormer's convolutional position encodings; EfficientViT-M's FFN of
    pointwise layers stays ``mlp``, as do PVTv2's and FastViT's ConvMlp (pointwise layers
    around a depthwise conv)."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(D, D, 3, padding=1, groups=D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x + tokens(self.a(grid(x))))


MIXER = {C.CONV: (D * 9 + D, N * D * 9)}  # per block: 9 taps per channel and position


class ParallelBlk(Blk):
    """x + attention(x) + MLP(x), the MLP computed before the first add. Parallel
    cores summed into one residual add are one block too: timm's ``ParallelThingsBlock`` (two
    attentions), CoaT's parallel blocks mixing their scales' attention; CrossViT's two cross
    attentions, each added to its own branch, are two."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.attend(self.c(x))
        m = self.h(F.gelu(self.g(self.f(x))))
        return x + a + m


class BufferBlk(Blk):
    """A buffer ``g0`` scaled inside the block: a record with no producer."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("g0", torch.ones(N, D))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x) + self.g0 * 2.0


class Selected(Net):
    """A scorer ``s`` (D -> 1) whose top-2 indices gather the tokens the blocks read. Seen in
    DynamicViT's predictor (a LayerNorm and linears scoring the patches, whose ``topk`` indices
    gather the patches the next block reads)."""

    def __init__(self) -> None:
        super().__init__()
        self.s = nn.Linear(D, 1)

    def before(self, x: torch.Tensor) -> torch.Tensor:
        index = self.s(x)[..., 0].topk(2, -1).indices
        return x.gather(1, index[..., None].expand(-1, -1, D))


SELECTED = {C.MLP: (D + 1, N * D)}


class Embed(nn.Module):
    """The patch projection ``p`` and a residual depthwise 3x3 conv ``r`` after it. Seen in
    the residual branches outside blocks of hybrids: MBConv, RepMixer and other convolutional
    token mixers."""

    def __init__(self) -> None:
        super().__init__()
        self.p = nn.Conv2d(3, D, 4, 4)
        self.r = nn.Conv2d(D, D, 3, padding=1, groups=D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.p(x)
        return y + self.r(y)


class EmbedNet(Net):
    def __init__(self, embed: Callable[[], nn.Module] = Embed) -> None:
        super().__init__()
        self.a = embed()


class PooledEmbed(Embed):
    """The patch projection ``p`` and a depthwise 3x3 conv ``r`` beside a 3x3 average pool of
    its input (a pooled shortcut: ``pool(y) + r(y)``). Seen in ViTamin's first MBConv of
    a stage; MetaFormer's ``res_scale(x) + f(x)``, the fork scaled by a parameter, is a join
    too."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.p(x)
        return F.avg_pool2d(y, 3, 1, 1) + self.r(y)


DEPTHWISE = {C.CONV: (D * 9 + D, N * D * 9)}


class Unit(nn.Module):
    """A pointwise conv ``c`` on the map, with or without a residual add."""

    def __init__(self, skip: bool) -> None:
        super().__init__()
        self.skip = skip
        self.c = nn.Conv2d(D, D, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.c(x) if self.skip else self.c(x)


POINTWISE = {C.CONV: (D * D + D, N * D * D)}


class Units(Net):
    """Two units before the blocks: ``r0`` with its skip, ``r1`` of its class without
    (``skipless-conv-block``). Seen in MobileViT's MobileNetV2 blocks that change width or
    stride (``stages.0.0``, ``stages.1.0``, ``stages.3.0``, ``stages.4.0`` beside
    ``stages.1.1``), FastViT's downsampling of MobileOne blocks (FastViT-T8's and
    FastViT-SA12's alike) and EfficientNet-B0's last MBConv (192 to 320 channels) after the
    blocks, with its activations and squeeze-excitation."""

    def __init__(self) -> None:
        super().__init__()
        self.r0, self.r1 = Unit(True), Unit(False)

    def before(self, x: torch.Tensor) -> torch.Tensor:
        return tokens(self.r1(self.r0(grid(x))))


class MapNet(Net):
    """A 3x3 conv ``k`` on the map between the patch projection and the blocks (``map-conv``).
    Seen in MobileViT: its local representation (``conv_kxk``, then ``conv_1x1`` into the
    transformer's width), its fusion (``conv_proj``, ``conv_fusion``) and its last
    ``stages.4.1`` in a unit holding the last block (``stages.2.1``: a block of a hybrid's
    stage), MobileViTv2's ``conv_proj``; its patch embedding proper is its ``stem`` (LeViT's
    ``stem`` of four convs and crossvit_9_dagger's ``patch_embed`` whole); NextViT's
    ``patch_embed`` 1x1 beside a residual branch is not taken; NesT's ``ConvPool`` (3x3 conv,
    norm, max pooling of stride 2) downsamples."""

    def __init__(self) -> None:
        super().__init__()
        self.k = nn.Conv2d(D, D, 3, padding=1)

    def before(self, x: torch.Tensor) -> torch.Tensor:
        return tokens(self.k(grid(x)))


MAP_CONV = {C.CONV: (D * D * 9 + D, N * D * D * 9)}


class Res(nn.Module):
    """x + a 3x3 conv ``c`` of x (depthwise when ``groups`` is D)."""

    def __init__(self, groups: int = 1) -> None:
        super().__init__()
        self.c = nn.Conv2d(D, D, 3, padding=1, groups=groups)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.c(x)


class Final(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.u = Res()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.u(x))


class FinalNet(Net):
    """After the blocks, a residual 3x3 conv ``z.u`` on the map, its ReLU run in ``z``
    (``residual-branch-conv``, ``activation-with-conv``). Seen in MobileNetV4-hybrid's last
    inverted residual and FastViT's ``final_conv``; MobileViT's last ``conv_fusion.bn.act``
    goes with its conv."""

    def __init__(self) -> None:
        super().__init__()
        self.z = Final()

    def after(self, x: torch.Tensor) -> torch.Tensor:
        return self.z(grid(x)).mean((2, 3))


class ConvNet(nn.Module):
    """No attention: patch conv ``a``, residual depthwise ``r0``, pointwise ``w``, residual
    depthwise ``r1``, mean, classifier ``b`` (``pointwise-on-map``, ``residual-span``). Seen in
    ConvMixer's pointwise convolutions after each residual depthwise one and CSPDarknet's
    transitions. A convolutional network is any whose joins' branches convolve: a ResNet
    (with projection shortcuts or not), RepVGG (its multi-branch blocks summed), a ConvNeXt,
    FastViT-T8's RepMixers, ConvFormer up to its last MLP residual; a multi-branch MobileOne
    block in the stem is patch embedding."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, D, 4, 4)
        self.r0, self.r1 = Res(D), Res(D)
        self.w = nn.Conv2d(D, D, 1)
        self.b = nn.Linear(D, 10)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.b(self.r1(self.w(self.r0(self.a(image)))).mean((2, 3)))


CONV_NET = {
    C.PATCH_EMBED: (3 * 16 * D + D, N * 48 * D),
    C.CONV: (2 * (D * 9 + D) + D * D + D, 2 * N * D * 9 + N * D * D),
    C.HEAD: (D * 10 + 10, D * 10),
}


class Chain(nn.Module):
    """No attention, no residual: patch conv ``a``, a linear ``l`` on the tokens, ``b``. Seen in
    an MLP-Mixer's token-mixing MLPs."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, D, 4, 4)
        self.l = nn.Linear(D, D)
        self.b = nn.Linear(D, 10)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.b(self.l(tokens(self.a(image))).mean(1))


CHAIN = {C.OTHER: (3 * 16 * D + D + D * D + D + D * 10 + 10, N * 48 * D + N * D * D + D * 10)}


class UnreadBlk(Blk):
    """A linear ``q0`` that never runs."""

    def __init__(self) -> None:
        super().__init__()
        self.q0 = nn.Linear(D, D)


class MemBlk(Blk):
    """Memory key/values: MEM learned vectors ``k0``, ``v0`` concatenated to the keys and to
    the values of a fused attention, so each of the N queries meets N + MEM keys. A
    parameter normed by a record of another module before it joins the sequence is ``tokens``
    too: Perceiver's latents normed before their cross-attention."""

    def __init__(self) -> None:
        super().__init__()
        self.k0, self.v0 = (nn.Parameter(torch.zeros(1, MEM, D)) for _ in range(2))

    def attend(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.d(x).chunk(3, -1)
        k = torch.cat([self.k0.expand(x.shape[0], -1, -1), k], 1)
        v = torch.cat([self.v0.expand(x.shape[0], -1, -1), v], 1)
        return self.e(F.scaled_dot_product_attention(q, k, v))


MEM = 2
# per block: q k^T and a v on MEM more keys, 2 * N * MEM * D more MACs; the two memories tokens
MEMORY = {C.ATTN_CORE: (0, 2 * N * MEM * D), C.TOKENS: (2 * MEM * D, 0)}


class MemMatmulBlk(MemBlk):
    """Memory key/values as x-transformers writes them: the learned ``k0``, ``v0`` repeated
    over the batch and concatenated to the keys and values before the plain matmul core (no
    fused attention): q k^T and a v are products of activations all the same."""

    def attend(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.d(x).chunk(3, -1)
        k = torch.cat([self.k0.repeat(x.shape[0], 1, 1), k], -2)
        v = torch.cat([self.v0.repeat(x.shape[0], 1, 1), v], -2)
        return self.e(self.core(q, k, v))


HEADS = 2  # heads of a multi-head fixture, D // HEADS features each


class MemLayoutBlk(MemBlk):
    """Memory key/values in a per-head layout, (HEADS, MEM, D // HEADS) each, expanded over the
    batch and concatenated to the keys and values split into heads; the key memory normalised
    first (an l2 norm of each vector, as a QK-norm treats the keys): a weight computed by
    records, joined to activations, weights the product no more than one carried."""

    def __init__(self) -> None:
        super().__init__()
        self.k0, self.v0 = (nn.Parameter(torch.ones(HEADS, MEM, D // HEADS)) for _ in range(2))

    def attend(self, x: torch.Tensor) -> torch.Tensor:
        b = x.shape[0]
        q, k, v = (t.reshape(b, N, HEADS, D // HEADS).transpose(1, 2)
                   for t in self.d(x).chunk(3, -1))
        k = torch.cat([F.normalize(self.k0, dim=-1).expand(b, -1, -1, -1), k], -2)
        v = torch.cat([self.v0.expand(b, -1, -1, -1), v], -2)
        return self.e(self.core(q, k, v).transpose(1, 2).reshape(b, N, D))


class RawNormNet(Net):
    """A LayerNorm ``r`` over the rows of the raw image (IMAGE values) before the patch
    projection: 2 * IMAGE params, norm."""

    def __init__(self) -> None:
        super().__init__()
        self.r = nn.LayerNorm(IMAGE)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return super().forward(self.r(image))


class ClassAttn(nn.Module):
    """A class token ``t`` concatenated to the tokens is the one query: LayerNorm ``c`` on the
    N + 1 tokens, q ``q`` on the token alone, k ``k`` and v ``v`` on all, output ``o`` added
    back to the token."""

    def __init__(self) -> None:
        super().__init__()
        self.c = nn.LayerNorm(D)
        self.q, self.k, self.v, self.o = (nn.Linear(D, D) for _ in range(4))

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        y = self.c(torch.cat([t, x], 1))
        a = (self.q(y[:, :1]) @ self.k(y).transpose(-2, -1)).softmax(-1) @ self.v(y)
        return t + self.o(a)


class ClassNet(Net):
    """The standard net whose final norm's tokens go through :class:`ClassAttn` ``z``, the
    class token ``t`` (D params) its query, before the head reads the token."""

    def __init__(self) -> None:
        super().__init__()
        self.t = nn.Parameter(torch.zeros(1, 1, D))
        self.z = ClassAttn()

    def after(self, x: torch.Tensor) -> torch.Tensor:
        return self.z(x, self.t.expand(x.shape[0], -1, -1))[:, 0]


LIN = D * D + D  # a D -> D linear with bias
CLASS_ATTENTION = {
    C.NORM: (2 * D, 0), C.TOKENS: (D, 0),
    C.ATTN_QKV: (3 * LIN, D * D + 2 * (N + 1) * D * D),  # q on 1 token, k and v on N + 1
    C.ATTN_CORE: (0, 2 * (N + 1) * D),  # q k^T and a v, 1 query, N + 1 keys
    C.ATTN_PROJ: (LIN, D * D),
}


class GatedBlk(Blk):
    """A sigmoid gate, a linear ``u`` (D -> D) of the attention's input, times the core's
    output before the output linear."""

    def __init__(self) -> None:
        super().__init__()
        self.u = nn.Linear(D, D)

    def attend(self, x: torch.Tensor) -> torch.Tensor:
        return self.e(self.core(*self.d(x).chunk(3, -1)) * torch.sigmoid(self.u(x)))


GATED = {C.ATTN_QKV: (LIN, N * D * D)}  # per block: the gate, an input projection


class ConvQkvBlk(Blk):
    """A depthwise 3x3 conv ``u`` of the token map feeding only the q/k/v linear."""

    def __init__(self) -> None:
        super().__init__()
        self.u = nn.Conv2d(D, D, 3, padding=1, groups=D)

    def attend(self, x: torch.Tensor) -> torch.Tensor:
        return super().attend(tokens(self.u(grid(x))))


CONV_QKV = {C.ATTN_QKV: (D * 9 + D, N * D * 9)}  # per block: 9 taps per channel and position


class UnrunBlk(Blk):
    """A LayerNorm ``z`` registered under the MLP's second linear ``h`` that never runs: 2D
    params, norm like the LayerNorms that run, not mlp like its nearest module's."""

    def __init__(self) -> None:
        super().__init__()
        self.h.z = nn.LayerNorm(D)



class HandNorm(nn.Module):
    """A LayerNorm written by hand over the feature axis: mean, variance, square root, then
    ``* g + b`` with ``g`` and ``b`` of shape (1, 1, D): 2D params, norm (``b`` is added whole
    to the sequence as a position embedding would be, yet it is the norm's)."""

    def __init__(self) -> None:
        super().__init__()
        self.g = nn.Parameter(torch.ones(1, 1, D))
        self.b = nn.Parameter(torch.zeros(1, 1, D))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        centred = x - x.mean(-1, keepdim=True)
        var = centred.pow(2).mean(-1, keepdim=True)
        return centred / (var + 1e-5).sqrt() * self.g + self.b


class HandNormBlk(Blk):
    """The standard block with :class:`HandNorm` as its attention's norm ``c``."""

    def __init__(self) -> None:
        super().__init__()
        self.c = HandNorm()


class HandNormNet(Net):
    """Blocks :class:`HandNormBlk` and a :class:`HandNorm` as the final norm ``n`` (after the
    blocks, where a parameter joined to the sequence would be ``head``)."""

    def __init__(self) -> None:
        super().__init__(HandNormBlk)
        self.n = HandNorm()


class TokenNormAttn(ClassAttn):
    """Class attention as CaiT writes it: the LayerNorm ``c`` runs on the class token alone
    (with a batch of 1, D values: as many as its weight), whose normed copy is the one query
    and is concatenated to the tokens for k and v. XCiT's class attention norms it so too:
    the norm's weight is its affine, not its input."""

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        s = self.c(t)
        y = torch.cat([s, x], 1)
        a = (self.q(s) @ self.k(y).transpose(-2, -1)).softmax(-1) @ self.v(y)
        return t + self.o(a)


class TokenNormNet(ClassNet):
    """:class:`ClassNet` with :class:`TokenNormAttn` as its class attention ``z``: placed as
    :data:`CLASS_ATTENTION` says, the norm's 2D params ``norm`` like its op."""

    def __init__(self) -> None:
        super().__init__()
        self.z = TokenNormAttn()



class SingleKeyBlk(Blk):
    """Attention of each token over itself alone (windows of one token, as a regional
    attention over one region token): ``einsum`` products over one key, the second a broadcast
    multiply without MACs."""

    def core(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        q, k, v = (t.unsqueeze(2) for t in (q, k, v))  # (B, N, 1, D): N windows of one token
        scores = torch.einsum("bnid,bnjd->bnij", q * 0.5, k).softmax(-1)
        return torch.einsum("bnij,bnjd->bnid", scores, v).squeeze(2)


# per block: q k^T over one key, N * D MACs, instead of the standard core's 2 N^2 D
SINGLE_KEY = {C.ATTN_CORE: (0, N * D - 2 * N * N * D)}



class Merger(nn.Module):
    """A patch merger: M learned queries ``q`` (M x D) attend over the normed tokens (LayerNorm
    ``c``), keys and values the tokens themselves, no output projection: N tokens in, M out."""

    def __init__(self) -> None:
        super().__init__()
        self.c = nn.LayerNorm(D)
        self.q = nn.Parameter(torch.zeros(MERGED, D))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.c(x)
        return (self.q @ x.transpose(-1, -2) * 0.5).softmax(-1) @ x


class MergerNet(Net):
    """The standard net with a :class:`Merger` ``p`` between its two blocks: the second block
    runs on M tokens, its q/k/v linear right after the merger's core."""

    def __init__(self) -> None:
        super().__init__()
        self.p = Merger()

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        x = self.p(self.m[0](tokens(self.a(self.prepare(image)))))
        return self.b(self.after(self.n(self.m[1](x))))


MERGED = 2  # M, the merger's queries
MERGER = {  # the queries weight the scores as a linear of the tokens would: attn_qkv
    C.NORM: (2 * D, 0),
    C.ATTN_QKV: (MERGED * D, MERGED * N * D),  # the M x D queries times the N tokens
    C.ATTN_CORE: (0, MERGED * N * D),  # the M x N weights times the N tokens
}



class Stage(nn.Module):
    """A stage of one block: a linear ``w`` (D -> D, a downsampling's place), then a list
    ``k`` holding one :class:`Blk`."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Linear(D, D)
        self.k = nn.ModuleList([Blk()])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.k[0](self.w(x))


class StagesNet(Net):
    """The standard net whose list ``m`` holds L stages of one block each (:class:`Stage`):
    the stages are not the blocks, each stage's linear runs before its block: patch_embed. Seen
    in kornia's TinyViT and EfficientViT with one block per stage, and EfficientViT-M0's
    one-block first stage (its block the module of the other blocks' class below the stage)."""

    def __init__(self) -> None:
        super().__init__(Stage)


STAGES = {C.PATCH_EMBED: (L * LIN, L * N * D * D)}  # the stages' linears, before each block


WINDOWS, SPAN = 2, N // 2  # windows of the token sequence, tokens per window


class WindowBiasBlk(Blk):
    """Attention within WINDOWS windows of SPAN tokens, the scores made by ``baddbmm`` adding
    a relative-position bias gathered from a table ``r`` (one value per offset, 2 * SPAN - 1)
    by a buffer ``i`` of each pair's offset: the product of q and k is still one of two
    activations, the table the scores' bias. MViTv2's and BoTNet's relative positions
    made from q and added to the scores fork from q like a residual add but keep the scores'
    shape; MViTv2's adds rewrite the scores in place, its softmax reading both."""

    def __init__(self) -> None:
        super().__init__()
        self.r = nn.Parameter(torch.zeros(2 * SPAN - 1))
        self.register_buffer("i", torch.tensor([[SPAN - 1 + a - b for b in range(SPAN)]
                                                for a in range(SPAN)]))

    def attend(self, x: torch.Tensor) -> torch.Tensor:
        windows = x.shape[0] * WINDOWS
        q, k, v = self.d(x.reshape(windows, SPAN, D)).chunk(3, -1)
        bias = self.r[self.i].expand(windows, SPAN, SPAN)
        scores = torch.baddbmm(bias, q, k.transpose(-2, -1), alpha=0.5)
        return self.e((scores.softmax(-1) @ v).reshape(x.shape))


# per block: the table; q k^T and a v within each window, 2 * WINDOWS * SPAN^2 * D MACs in
# place of the standard core's 2 * N^2 * D
WINDOW_BIAS = {C.ATTN_CORE: (2 * SPAN - 1, 2 * WINDOWS * SPAN * SPAN * D - 2 * N * N * D)}


SIDE = 2  # the token map's side: N = SIDE * SIDE


class Scores(nn.Module):
    """softmax(q k^T / 2 + a term added to the scores) v, run in a module of its own."""

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, term: torch.Tensor
                ) -> torch.Tensor:
        return ((q @ k.transpose(-2, -1)) * 0.5 + term).softmax(-1) @ v


class QueryTermBlk(Blk):
    """Decomposed relative positions from q, as SAM and MViTv2 add them: tables ``s`` (rows)
    and ``t`` (columns) of 2 * SIDE - 1 offsets x D, gathered by a buffer ``i`` of each pair's
    offset, q . R along each axis, the two summed into a term of the scores, which the core (module
    ``u``) adds."""

    def __init__(self) -> None:
        super().__init__()
        self.u = Scores()
        self.s, self.t = (nn.Parameter(torch.zeros(2 * SIDE - 1, D)) for _ in range(2))
        self.register_buffer("i", torch.tensor([[SIDE - 1 + a - b for b in range(SIDE)]
                                                for a in range(SIDE)]))

    def attend(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.d(x).chunk(3, -1)
        grid_q = q.reshape(x.shape[0], SIDE, SIDE, D)
        rows = torch.einsum("bhwc,hkc->bhwk", grid_q, self.s[self.i])
        cols = torch.einsum("bhwc,wkc->bhwk", grid_q, self.t[self.i])
        term = (rows[..., None] + cols[..., None, :]).reshape(x.shape[0], N, N)
        return self.e(self.u(q, k, v, term))


# per block: the two tables; q . R per axis, each N * SIDE * D MACs (every position's q against
# the SIDE offsets along that axis)
QUERY_TERM = {C.ATTN_CORE: (2 * (2 * SIDE - 1) * D, 2 * N * SIDE * D)}


FEATURES = 6  # random features of a kernelised attention


class RandomFeatureBlk(Blk):
    """Kernelised attention (as Performer's): separate q ``q``, k ``k``, v ``v`` linears (D -> D),
    q and k through a random-feature buffer ``w`` (D x FEATURES) and exp (the keys' made stable
    by their maximum), phi(K)^T V first, then phi(Q) (phi(K)^T V) normalised by phi(Q) times the
    keys' features summed. The last product's output is as large as a D -> D linear's: no
    scores map runs on through the output projection and the residual into the next block's
    q/k/v linears."""

    def __init__(self) -> None:
        super().__init__()
        del self.d
        self.q, self.k, self.v = (nn.Linear(D, D) for _ in range(3))
        self.register_buffer("w", torch.ones(D, FEATURES))

    def attend(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.q(x), self.k(x), self.v(x)
        kf = k @ self.w
        kf = torch.exp(kf - kf.amax(dim=(-1, -2), keepdim=True))
        context = kf.transpose(-2, -1) @ v
        qf = torch.exp(q @ self.w)
        scale = 1.0 / (qf @ kf.sum(1).unsqueeze(-1))
        return self.e((qf @ context) * scale)


# per block: k w and q w (N * D * FEATURES each), phi(K)^T V (FEATURES * N * D), phi(Q) times
# the summed keys (N * FEATURES), phi(Q) (phi(K)^T V) (N * FEATURES * D), for the standard core
RANDOM_FEATURE = {C.ATTN_CORE: (0, 4 * N * D * FEATURES + N * FEATURES - 2 * N * N * D)}


LANDMARKS = 2  # M, the landmarks of a landmark attention: means of N // M consecutive tokens


class LandmarkBlk(Blk):
    """Landmark attention (as a Nystrom approximation runs it, the pseudo-inverse of the
    middle softmax left out): per head, the landmarks ``ql``, ``kl`` are means of N // M
    consecutive queries and keys; three softmaxes, of q kl^T, ql kl^T and ql k^T; the output
    (s1 s2) (s3 v) is a product of two cores' outputs, to which a depthwise conv ``u`` of the
    values over the tokens (one (3, 1) kernel per head, no bias) is added before the output
    linear."""

    def __init__(self) -> None:
        super().__init__()
        self.u = nn.Conv2d(HEADS, HEADS, (3, 1), padding=(1, 0), groups=HEADS, bias=False)

    def attend(self, x: torch.Tensor) -> torch.Tensor:
        b = x.shape[0]
        q, k, v = (t.reshape(b, N, HEADS, D // HEADS).transpose(1, 2)
                   for t in self.d(x).chunk(3, -1))
        ql, kl = (t.reshape(b, HEADS, LANDMARKS, N // LANDMARKS, D // HEADS).mean(3)
                  for t in (q, k))
        s1, s2, s3 = ((a @ c.transpose(-2, -1)).softmax(-1)
                      for a, c in ((q, kl), (ql, kl), (ql, k)))
        out = (s1 @ s2) @ (s3 @ v) + self.u(v)
        return self.e(out.transpose(1, 2).reshape(b, N, D))


class LambdaBlk(Blk):
    """Attention with no output projection (a lambda layer): q, k, v linears ``q``, ``k``,
    ``v`` (D -> D, no bias), q and v normalised (LayerNorms ``s``, ``t``), k by a softmax over
    the tokens; the content lambda k^T v (D x D) applied to q; position lambdas, a 3x3 conv
    ``u`` (1 -> D channels) of each value feature over the 2x2 token map, one D x D lambda
    per token, applied to its q; the two summed are the attention's output, added to the
    stream as it is."""

    def __init__(self) -> None:
        super().__init__()
        del self.d, self.e
        self.q, self.k, self.v = (nn.Linear(D, D, bias=False) for _ in range(3))
        self.s, self.t = nn.LayerNorm(D), nn.LayerNorm(D)
        self.u = nn.Conv2d(1, D, 3, padding=1)

    def attend(self, x: torch.Tensor) -> torch.Tensor:
        b = x.shape[0]
        q, k, v = self.s(self.q(x)), self.k(x).softmax(1), self.t(self.v(x))
        content = q @ (k.transpose(-2, -1) @ v)
        lambdas = self.u(v.transpose(1, 2).reshape(b * D, 1, SIDE, SIDE)).reshape(b, D, D, N)
        return content + torch.einsum("bnk,bvkn->bnv", q, lambdas)


# per block: the q, k and v linears without bias in place of the q/k/v linear's 3 D biases;
# no output projection; the two norms of q and v (2 D each); the core: k^T v and q times it
# (D * D * N each), the conv (9 taps and a bias per output channel, 9 taps for each of the
# D x D x N lambdas' elements), each token's q times its lambda (N * D * D)
LAMBDA = {C.ATTN_QKV: (-3 * D, 0), C.ATTN_PROJ: (-(D * D + D), -N * D * D),
          C.NORM: (2 * 2 * D, 0),
          C.ATTN_CORE: (9 * D + D, 2 * D * D * N + D * D * N * 9 + N * D * D - 2 * N * N * D)}


# per block, in place of the standard core's 2 * N^2 * D: q kl^T, ql kl^T and ql k^T (N * M * D,
# M * M * D, M * N * D), s1 s2 (HEADS * N * M * M), s3 v (M * N * D), (s1 s2) (s3 v) (N * M * D);
# the values' conv, HEADS kernels of 3 taps, 3 MACs per value (N * D of them)
LANDMARK = {C.ATTN_CORE: (HEADS * 3, N * LANDMARKS * D + LANDMARKS * LANDMARKS * D
                          + LANDMARKS * N * D + HEADS * N * LANDMARKS * LANDMARKS
                          + LANDMARKS * N * D + N * LANDMARKS * D + N * D * 3 - 2 * N * N * D)}




BIAS_HIDDEN = 4  # the hidden width of the score bias's MLP


class CosineWindows(nn.Module):
    """Cosine attention within WINDOWS windows of SPAN tokens: q, k, v from ``d`` (D -> 3D),
    the scores ``normalize(q) normalize(k)^T`` times ``exp(s)`` (``s`` one parameter), plus a
    bias made by an MLP ``u`` (2 -> BIAS_HIDDEN -> 1, the last without bias) from a buffer
    ``t`` of the 2 * SPAN - 1 offsets' coordinates, gathered by a buffer ``i`` of each pair's
    offset, ``16 * sigmoid``; a ``mask`` of the windows is added to the scores twice, once per
    window and once more (the masked windows of a shifted block)."""

    def __init__(self) -> None:
        super().__init__()
        self.d = nn.Linear(D, 3 * D)
        self.s = nn.Parameter(torch.zeros(1, 1, 1))
        self.u = nn.Sequential(nn.Linear(2, BIAS_HIDDEN), nn.ReLU(),
                               nn.Linear(BIAS_HIDDEN, 1, bias=False))
        self.register_buffer("t", torch.stack(
            [torch.arange(1.0 - SPAN, SPAN), torch.zeros(2 * SPAN - 1)], -1))
        self.register_buffer("i", torch.tensor([[SPAN - 1 + a - b for b in range(SPAN)]
                                                for a in range(SPAN)]))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        q, k, v = self.d(x).chunk(3, -1)
        scores = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1)
        scores = scores * self.s.exp()
        scores = scores + 16 * torch.sigmoid(self.u(self.t)[self.i][..., 0])
        per_window = scores.view(-1, WINDOWS, SPAN, SPAN) + mask
        scores = (per_window + mask).view(-1, SPAN, SPAN)
        return scores.softmax(-1) @ v


class MaskedWindowBlk(Blk):
    """The standard block with :class:`CosineWindows` (``w``) as its attention, its output
    projection ``e``; the window mask (0 or -100 per pair, WINDOWS x SPAN x SPAN) is computed
    in the block's forward from a buffer ``o`` of the windows' regions."""

    def __init__(self) -> None:
        super().__init__()
        del self.d
        self.w = CosineWindows()
        self.register_buffer("o", torch.tensor([[0, 1], [1, 1]]))

    def attend(self, x: torch.Tensor) -> torch.Tensor:
        mask = (self.o[:, :, None] != self.o[:, None, :]) * -100.0
        windows = self.w(x.reshape(x.shape[0] * WINDOWS, SPAN, D), mask)
        return self.e(windows.reshape(x.shape))


# per block: the core within windows, 2 * WINDOWS * SPAN^2 * D MACs in place of the standard
# core's 2 * N^2 * D, with the scale's one parameter and the bias MLP: 2 * BIAS_HIDDEN +
# BIAS_HIDDEN + BIAS_HIDDEN params, (2 * SPAN - 1) offsets * (2 * BIAS_HIDDEN + BIAS_HIDDEN) MACs
MASKED_WINDOW = {C.ATTN_CORE: (1 + 2 * BIAS_HIDDEN + BIAS_HIDDEN + BIAS_HIDDEN,
                               (2 * SPAN - 1) * 3 * BIAS_HIDDEN
                               + 2 * WINDOWS * SPAN * SPAN * D - 2 * N * N * D)}


class Merge(nn.Module):
    """Merges one token per call into its most similar one: the tokens split alternately into
    sets A (even positions) and B (odd), every A-B pair scored by the product of their
    l2-normalised keys, the A token with the best match added into that match (weighted by
    the tokens' sizes, ``size``: how many tokens each stands for), the rest kept; the
    matches chosen by indices (a max's, an argsort's), none of the scores' values reaching
    the tokens."""

    def forward(self, x: torch.Tensor, keys: torch.Tensor, size: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        metric = keys / keys.norm(dim=-1, keepdim=True)
        scores = metric[:, ::2] @ metric[:, 1::2].transpose(-2, -1)  # (B, |A|, |B|)
        return merge_by_scores(x, scores, size, 1)


class MergeBlk(Blk):
    """The standard block whose scores gain the log of each key's size, and whose tokens
    :class:`Merge` (``j``) merges between the attention and the MLP, on the attention's
    keys: one token fewer after each block."""

    def __init__(self) -> None:
        super().__init__()
        self.j = Merge()

    def forward(self, x: torch.Tensor, size: torch.Tensor  # type: ignore[override]
                ) -> tuple[torch.Tensor, torch.Tensor]:
        q, k, v = self.d(self.c(x)).chunk(3, -1)
        scores = (q * 0.5 @ k.transpose(-2, -1)) + size.log().unsqueeze(1)
        x, size = self.j(x + self.e(scores.softmax(-1) @ v), k, size)
        return x + self.h(F.gelu(self.g(self.f(x)))), size


class MergeNet(Net):
    """The standard net of :class:`MergeBlk` blocks, each token's size (1 to start with)
    carried from block to block: the sizes the merge of one block scatters reach the next
    block's scores."""

    def __init__(self) -> None:
        super().__init__(MergeBlk)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        x = tokens(self.a(self.prepare(image)))
        size = x.new_ones(x.shape[:2])
        for k in self.m:
            x, size = k(x, size)
        return self.b(self.after(self.n(x)))


def merge_block(n: int) -> Breakdown:
    """A :class:`MergeBlk` on ``n`` tokens: the standard block's attention on ``n``, its MLP
    on ``n - 1``, and the merge's scores, ceil(n / 2) A tokens by floor(n / 2) B tokens of D
    features each, ``attn_core``."""
    attention = {c: v for c, v in block(n).items() if c is not C.MLP}
    return _sum(attention, {C.MLP: (block(n - 1)[C.MLP][0], 2 * (n - 1) * D * HID),
                            C.ATTN_CORE: (0, (n + 1) // 2 * (n // 2) * D)})


# block 0 on N = 4 tokens, block 1 on the 3 left
MERGE = _sum(OUTSIDE, merge_block(N), merge_block(N - 1))


class FuseBlk(Blk):
    """The standard block that, given ``keep``, reorganizes its tokens between the attention
    and the MLP: of the tokens after the first, it keeps the ``keep`` that the first token's
    row of the attention map weights most (chosen by indices: an argsort's) and fuses the
    others into one token, their sum weighted by that row (one 1 x dropped by dropped x D
    product); the MLP runs on the first token, the kept ones and the fused one. Seen in the
    study's EViT (``vitprof/study/token_reduction``: keep rate 0.7, fused): the fused token's
    product was taken for an attention core of its own (its weights a softmax's), the walk
    to its output projection ran on into the MLP's first linear, and so did the walk from the
    attention's own map, read by the top-k as indices."""

    def __init__(self, keep: int | None = None) -> None:
        super().__init__()
        self.keep = keep

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.d(self.c(x)).chunk(3, -1)
        weights = (q * 0.5 @ k.transpose(-2, -1)).softmax(-1)
        x = x + self.e(weights @ v)
        if self.keep is not None:
            first, rest = x[:, :1], x[:, 1:]
            row = weights[:, 0, 1:]  # the first token's attention over the others
            order = row.argsort(dim=1, descending=True)
            kept, dropped = order[:, :self.keep], order[:, self.keep:]
            chosen = rest.gather(1, kept.unsqueeze(-1).expand(-1, -1, D))
            others = rest.gather(1, dropped.unsqueeze(-1).expand(-1, -1, D))
            x = torch.cat([first, chosen, row.gather(1, dropped).unsqueeze(1) @ others], 1)
        return x + self.h(F.gelu(self.g(self.f(x))))


class FuseNet(Net):
    """The standard net whose first block keeps 1 of the N - 1 = 3 tokens after the first and
    fuses the other 2: N - 1 = 3 tokens from its MLP on; the second block is standard."""

    def __init__(self) -> None:
        super().__init__(FuseBlk)
        self.m[0] = FuseBlk(keep=1)


# block 0: the attention on N = 4 tokens, the MLP on 1 + 1 + 1 = 3 (the first, the kept one, the
# fused one), the fused token's product 1 x 2 by 2 x D = 2 * 8 = 16 MACs in attn_core (a product
# of two activations in a block, no core's: a weighted sum of tokens, as the cores' are);
# block 1: the standard block on 3 tokens
FUSED = _sum(OUTSIDE, {c: v for c, v in block(N).items() if c is not C.MLP},
             {C.MLP: (block(N)[C.MLP][0], 2 * (N - 1) * D * HID), C.ATTN_CORE: (0, 2 * D)},
             block(N - 1))


class Unitised(nn.Module):
    """A parametrization (``torch.nn.utils.parametrize``): the weight it is given, its rows
    scaled to unit length. A weight computed by records reading no activation is a
    weight all the same: BiT's and the R50/R26 hybrids' StdConv (mean, variance, subtract,
    divide: a norm of the conv weight, not an affine), timm DiffAttention's
    ``exp(sum(lambda_q1 * lambda_k1)) - exp(...) + init``."""

    def forward(self, w: torch.Tensor) -> torch.Tensor:
        return F.normalize(w, dim=-1)


def parametrized_net() -> nn.Module:
    """The standard net whose patch projection and block linears read their weights through
    :class:`Unitised`: each weight (``...original``, as large as the plain one) is read by the
    parametrization's module, not its owner, and reaches the product through records without
    MACs; the breakdown is the plain net's."""
    model = Net()
    for module in (model.a, *(getattr(b, name) for b in model.m for name in "degh")):
        parametrize.register_parametrization(module, "weight", Unitised())
    return model


class ScaledUnit(nn.Module):
    """An RMS norm written with a vector norm: ``F.normalize(x) * sqrt(D) * w``, weight D."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.ones(D))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(x, dim=-1) * D**0.5 * self.w


class Gained(nn.Module):
    """A LayerNorm ``u`` without affine, its gain ``w`` (D) applied beside it:
    ``u(x) * (w + 1)``. Seen in x-transformers' LayerNorm (``* (gamma + offset)`` in the
    module holding a ``nn.LayerNorm`` without affine); x-transformers' RMSNorm and ScaleNorm
    are norms by a vector norm (``F.normalize(x) * scale * g``)."""

    def __init__(self) -> None:
        super().__init__()
        self.u = nn.LayerNorm(D, elementwise_affine=False)
        self.w = nn.Parameter(torch.zeros(D))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.u(x) * (self.w + 1.0)


class VectorNormBlk(Blk):
    def __init__(self) -> None:
        super().__init__()
        self.c, self.f = ScaledUnit(), Gained()


class VectorNormNet(Net):
    """The standard net with :class:`VectorNormBlk` blocks and a :class:`Gained` final norm
    ``n`` (after the blocks, where a gain beside the norm would be ``head``)."""

    def __init__(self) -> None:
        super().__init__(VectorNormBlk)
        self.n = Gained()


VECTOR_NORM = {C.NORM: (2 * D, 0)}  # two norms with a weight of D each, no bias
VECTOR_NORM_NET = _sum({**OUTSIDE, C.NORM: (D, 0)},  # the final norm's gain, D
                       _times(L, {**block(), **VECTOR_NORM}))



class HeadBiasBlk(Blk):
    """The q/k/v projection ``d`` without bias, its bias ``r`` kept as a (3, heads, head_dim)
    tensor (3, 1, D: as many elements as ``d``'s 3D outputs) and added after it, in the block's
    own forward: the breakdown is the standard block's."""

    def __init__(self) -> None:
        super().__init__()
        self.d = nn.Linear(D, 3 * D, bias=False)
        self.r = nn.Parameter(torch.zeros(3, 1, D))

    def attend(self, x: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        q, k, v = (self.d(x).view(b, n, 3, 1, D) + self.r).permute(2, 0, 3, 1, 4).unbind(0)
        return self.e(self.core(q, k, v).transpose(1, 2).reshape(b, n, D))


class ListAttn(nn.Module):
    """The standard attention alone (q/k/v ``d``, the core, output ``e``): one entry of a
    list of attentions."""

    def __init__(self) -> None:
        super().__init__()
        self.d, self.e = nn.Linear(D, 3 * D), nn.Linear(D, D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.d(x).chunk(3, -1)
        return self.e((q * 0.5 @ k.transpose(-2, -1)).softmax(-1) @ v)


class ListFf(nn.Module):
    """The standard MLP alone (``g``, GELU, ``h``): one entry of a list of feed-forwards."""

    def __init__(self) -> None:
        super().__init__()
        self.g, self.h = nn.Linear(D, HID), nn.Linear(HID, D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.h(F.gelu(self.g(x)))


class Lists(nn.Module):
    """Every layer run by one module from parallel lists: the attentions in ``u``, the
    feed-forwards in ``w``, the two LayerNorms ``c`` and ``f`` shared by all layers."""

    def __init__(self) -> None:
        super().__init__()
        self.u = nn.ModuleList([ListAttn() for _ in range(L)])
        self.w = nn.ModuleList([ListFf() for _ in range(L)])
        self.c, self.f = nn.LayerNorm(D), nn.LayerNorm(D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for attend, feed in zip(self.u, self.w, strict=True):
            x = attend(self.c(x)) + x
            x = feed(self.f(x)) + x
        return x


class ListsNet(Net):
    """The standard net whose L layers one :class:`Lists` module runs."""

    def __init__(self) -> None:
        super().__init__()
        self.m = nn.ModuleList([Lists()])


SHARED_NORMS = {C.NORM: (-(L - 1) * 2 * 2 * D, 0)}  # the two LayerNorms counted once, not L times


class Tables(nn.Module):
    """A position embedding made from parameters alone: a D x 3 x 3 table ``s`` resized to the
    2x2 map, plus a 1-D table ``t`` (one temporal position) over every position."""

    def __init__(self) -> None:
        super().__init__()
        self.s = nn.Parameter(torch.zeros(1, D, 3, 3))
        self.t = nn.Parameter(torch.zeros(D))

    def forward(self) -> torch.Tensor:
        return tokens(F.interpolate(self.s, size=(2, 2), mode="bicubic")) + self.t


class TablesNet(Net):
    """The standard net, the table of :class:`Tables` (``o``) added to the tokens."""

    def __init__(self) -> None:
        super().__init__()
        self.o = Tables()

    def before(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.o()


TABLES = {C.TOKENS: (D * 9 + D, 0)}  # the 3x3 table and the 1-D one; resizing has no MACs


SIDE = 2  # positions per row of the 2x2 map, and rows: N = SIDE * SIDE


class RepeatedTables(nn.Module):
    """A class token ``k`` joined before the patches, then a position embedding made from
    parameters alone through free ops: a table ``s`` of one row's SIDE positions repeated over
    the SIDE rows, plus a table ``t`` of SIDE rows each repeated over the row's positions
    (``repeat_interleave``), a table ``c`` for the class token concatenated before them, the
    sum added to the tokens. pytorchvideo's MViT (spatial table repeated over time, temporal
    table repeated over space) showed it: the records reading the tables only through copying
    free ops were taken for records reading the input data, so they computed no table: main
    placed both adds in ``patch_embed`` and the self-check of one module in two components
    fired."""

    def __init__(self) -> None:
        super().__init__()
        self.k, self.c = nn.Parameter(torch.zeros(1, 1, D)), nn.Parameter(torch.zeros(1, 1, D))
        self.s = nn.Parameter(torch.zeros(1, SIDE, D))
        self.t = nn.Parameter(torch.zeros(1, SIDE, D))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.cat([self.k.expand(x.shape[0], -1, -1), x], 1)
        table = self.s.repeat(1, SIDE, 1) + torch.repeat_interleave(self.t, SIDE, dim=1)
        return x + torch.cat([self.c, table], 1)


class RepeatedTablesNet(Net):
    """The standard net, the class token and position tables of :class:`RepeatedTables`
    (``o``) before the blocks, which run on N + 1 tokens."""

    def __init__(self) -> None:
        super().__init__()
        self.o = RepeatedTables()

    def before(self, x: torch.Tensor) -> torch.Tensor:
        return self.o(x)


# the blocks on N + 1 tokens; the class token and its table (2 x D), the row and column tables
# (2 x SIDE x D): tokens; repeating and adding have no MACs
REPEATED_TABLES = _sum(OUTSIDE, _times(L, block(N + 1)), {C.TOKENS: (2 * D + 2 * SIDE * D, 0)})


class PostNormBlk(Blk):
    """The standard block with its norms after the residual adds (post-norm): the block's
    first record is its q/k/v linear, reading the stream as it comes."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.c(x + self.attend(x))
        return self.f(x + self.h(F.gelu(self.g(x))))


class PostNormClassNet(Net):
    """Post-norm blocks on a class token ``t`` joined to the tokens: a position table ``p`` of
    N + 1 rows, its rows 1..N added to the patches, its row 0 to the token, which is then
    concatenated before the patches; no norm between: the first block's q/k/v linear reads
    the token first."""

    def __init__(self) -> None:
        super().__init__(PostNormBlk)
        self.t = nn.Parameter(torch.zeros(1, 1, D))
        self.p = nn.Parameter(torch.zeros(1, N + 1, D))

    def before(self, x: torch.Tensor) -> torch.Tensor:
        t = (self.t + self.p[:, :1]).expand(x.shape[0], -1, -1)
        return torch.cat([t, x + self.p[:, 1:]], 1)


# the blocks on N + 1 tokens; the class token (D) and the position table ((N + 1) x D) tokens
POST_NORM_CLASS = _sum(OUTSIDE, _times(L, block(N + 1)), {C.TOKENS: (D + (N + 1) * D, 0)})


SELECTED_QUERIES = 2  # K, the tokens a query selection keeps


class CrossBlk(Blk):
    """A decoder layer: the standard block's self-attention over its K queries, a
    cross-attention (queries ``k2`` after the LayerNorm ``n2``, keys and values ``i`` from the
    encoder's N tokens, output ``j``), then the standard MLP."""

    def __init__(self) -> None:
        super().__init__()
        self.n2, self.k2 = nn.LayerNorm(D), nn.Linear(D, D)
        self.i, self.j = nn.Linear(D, 2 * D), nn.Linear(D, D)

    def forward(self, x: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        x = x + self.attend(self.c(x))
        x = x + self.j(self.core(self.k2(self.n2(x)), *self.i(memory).chunk(2, -1)))
        return x + self.h(F.gelu(self.g(self.f(x))))


class QuerySelectionNet(Net):
    """An encoder (the standard net's blocks and norm ``n``), then a query selection: an MLP
    ``s`` (D -> D -> 1) scoring the encoder's tokens, their top-K gathered and projected by
    ``u`` into the queries of L decoder layers (:class:`CrossBlk`, ``w``) attending over all
    the encoder's tokens; the head ``b`` reads the queries' mean."""

    def __init__(self) -> None:
        super().__init__()
        self.s = nn.Sequential(nn.Linear(D, D), nn.ReLU(), nn.Linear(D, 1))
        self.u = nn.Linear(D, D)
        self.w = nn.ModuleList([CrossBlk() for _ in range(L)])

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        x = tokens(self.a(image))
        for k in self.m:
            x = k(x)
        memory = self.n(x)
        index = self.s(memory)[..., 0].topk(SELECTED_QUERIES, -1).indices
        queries = self.u(memory.gather(1, index[..., None].expand(-1, -1, D)))
        for k in self.w:
            queries = k(queries, memory)
        return self.b(queries.mean(1))


def decoder_layer(k: int = SELECTED_QUERIES, n: int = N) -> Breakdown:
    """One :class:`CrossBlk` on ``k`` queries attending over ``n`` tokens."""
    return _sum(block(k), {
        C.NORM: (2 * D, 0),  # n2
        C.ATTN_QKV: (LIN + 2 * LIN, k * D * D + n * D * 2 * D),  # k2 on the queries, i on memory
        C.ATTN_CORE: (0, 2 * k * n * D),  # q k^T and a v over the n tokens
        C.ATTN_PROJ: (LIN, k * D * D),  # j
    })


STEPS = 3  # T, the steps a decoder called in a loop runs
VOCABULARY = 10  # the tokens it chooses from: the head's classes


class LoopDecoderNet(Net):
    """An encoder (the standard net's blocks and norm ``n``), then a decoder of L layers ``w``
    (:class:`CrossBlk`: self-attention, cross-attention over the encoder's N tokens, MLP) called
    step by step in a loop: the sequence starts with token 0 (a constant), each step embeds
    the tokens so far by the table ``t`` (VOCABULARY x D), runs the layers, and the head ``b``
    scores the last position; the best token is appended. The output: the last step's scores."""

    def __init__(self) -> None:
        super().__init__()
        self.t = nn.Embedding(VOCABULARY, D)
        self.w = nn.ModuleList([CrossBlk() for _ in range(L)])

    def decode(self, chosen: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        x = self.t(chosen)
        for k in self.w:
            x = k(x, memory)
        return x

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        x = tokens(self.a(image))
        for k in self.m:
            x = k(x)
        memory = self.n(x)
        chosen = torch.zeros(image.shape[0], 1, dtype=torch.long, device=image.device)
        for _ in range(STEPS):
            scores = self.b(self.decode(chosen, memory)[:, -1])
            chosen = torch.cat([chosen, scores.argmax(-1, keepdim=True)], 1)
        return scores


class StepDecoderNet(LoopDecoderNet):
    """:class:`LoopDecoderNet` whose decoder is one module: a single :class:`CrossBlk` ``w``
    (self-attention over the tokens so far, cross-attention over the encoder's N tokens,
    MLP, three LayerNorms) called once a step, T calls of one module. Main made its T calls
    one block, the head's first T - 1 calls in it as ``mlp`` and the first call's
    self-attention projections ``head`` (an attention-pooling head: the add after it reads
    the looked-up rows, which no record made). Shown by torch's ``nn.TransformerDecoderLayer``
    called alone in a greedy loop after a torchvision ViT (its first call's projections
    ``head``), and by the decoders of x-transformers (``TransformerWrapper`` on a ``Decoder``
    with cross-attention) and transformers (``VisionEncoderDecoderModel`` with a TrOCR
    decoder, ``generate``), each layer one block over all steps."""

    def __init__(self) -> None:
        super().__init__()
        self.w = CrossBlk()  # type: ignore[assignment]

    def decode(self, chosen: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        return self.w(self.t(chosen), memory)


def loop_decoder(layers: int = L) -> Breakdown:
    """:class:`LoopDecoderNet` (:class:`StepDecoderNet`: ``layers`` 1): the net, the table in
    ``tokens``, the head's MACs at each of the T steps, the decoder layers' params once and
    their MACs on 1, 2, ..., T queries."""
    steps = [_times(layers, decoder_layer(k)) for k in range(1, STEPS + 1)]
    return _sum(net(), {C.TOKENS: (VOCABULARY * D, 0), C.HEAD: (0, (STEPS - 1) * D * 10)},
                *({c: (0, macs) for c, (_, macs) in step.items()} for step in steps),
                {c: (params, 0) for c, (params, _) in _times(layers, decoder_layer()).items()})

QUERY_SELECTION = {
    C.HEAD: (LIN + D + 1, N * D * D + N * D),  # s: D -> D and D -> 1 on the N tokens
    C.PATCH_EMBED: (LIN, SELECTED_QUERIES * D * D),  # u, the decoder's queries embedded
}


POINTS = 2  # P, the points a deformable attention samples per token


class DeformBlk(Blk):
    """The standard block, its attention deformable: each token's P offsets from the linear
    ``o`` (D -> 2P) move its reference point (its own position on the 2x2 map); the values
    (``d``, D -> D) are sampled there by ``grid_sample`` (bilinear), weighted by a softmax of
    the linear ``w`` (D -> P) over the points and summed; ``e`` projects the result."""

    def __init__(self) -> None:
        super().__init__()
        self.d, self.o, self.w = nn.Linear(D, D), nn.Linear(D, 2 * POINTS), nn.Linear(D, POINTS)
        side = torch.linspace(-0.5, 0.5, 2)
        self.register_buffer("r", torch.stack(torch.meshgrid(side, side, indexing="xy"), -1)
                             .reshape(1, N, 1, 2))

    def attend(self, x: torch.Tensor) -> torch.Tensor:
        values = grid(self.d(x))  # B x D x 2 x 2
        points = self.r + self.o(x).view(-1, N, POINTS, 2)  # B x N x P x 2, in [-1, 1]
        sampled = F.grid_sample(values, points, align_corners=False)  # B x D x N x P
        weights = self.w(x).softmax(-1)  # B x N x P
        return self.e((sampled * weights[:, None]).sum(-1).transpose(1, 2))


DEFORM = {  # per block, against the standard block: d, o and w attn_qkv; the core no MACs
    C.ATTN_QKV: (LIN + 2 * POINTS * D + 2 * POINTS + POINTS * D + POINTS
                 - (3 * D * D + 3 * D),
                 N * D * D + N * D * 2 * POINTS + N * D * POINTS - N * D * 3 * D),
    C.ATTN_CORE: (0, -2 * N * N * D),  # grid_sample, the weighting and the sum: no MACs
}


class ConstantTableBlk(Blk):
    """The standard block, its attention's input plus a sin-cos table made in the forward
    from constants (no parameter, no input): the token index times D/2 frequencies, one
    product of an N x 1 column and a 1 x D/2 row, its sines and cosines side by side."""

    def attend(self, x: torch.Tensor) -> torch.Tensor:
        where = torch.arange(N, dtype=x.dtype, device=x.device)[:, None]
        frequencies = 1.0 / 10.0 ** torch.arange(D // 2, dtype=x.dtype, device=x.device)
        angles = where @ frequencies[None]
        return super().attend(x + torch.cat([angles.sin(), angles.cos()], -1))


CONSTANT_TABLE = {C.TOKENS: (0, N * 1 * (D // 2))}  # per block: the N x 1 by 1 x D/2 product


class InputSkipLayer(Blk):
    """A model that is one post-norm encoder layer alone, fed a D x 2 x 2 map, so that its
    residual adds take the model's input itself as their skip (no record computed it): the map
    flattened to N tokens; a 2-D sin-cos table made in the forward from constants, a product
    per axis of the positions (N x 1) by D/4 frequencies, their sines and cosines side by side,
    added to the tokens for q and k (``d``: D -> 2D); v from the tokens alone (``v``); then
    ``c(x + e(core))`` and ``f(x + h(gelu(g(x))))``. ultralytics' AIFI showed it: no residual
    join was found, the feed-forward went to ``head`` and the table's products to ``conv``."""

    def __init__(self) -> None:
        super().__init__()
        self.d, self.v = nn.Linear(D, 2 * D), nn.Linear(D, D)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        x = tokens(image)
        side = torch.arange(SIDE, dtype=x.dtype, device=x.device)
        rows, columns = torch.meshgrid(side, side, indexing="ij")
        frequencies = 1.0 / 10.0 ** torch.arange(D // 4, dtype=x.dtype, device=x.device)
        by_row = rows.flatten()[:, None] @ frequencies[None]
        by_column = columns.flatten()[:, None] @ frequencies[None]
        table = torch.cat([by_row.sin(), by_row.cos(), by_column.sin(), by_column.cos()], -1)
        q, k = self.d(x + table).chunk(2, -1)
        x = self.c(x + self.e(self.core(q, k, self.v(x))))
        return self.f(x + self.h(F.gelu(self.g(x))))


# one standard block (q/k and v apart: the same params and MACs), and the table's two N x 1 by
# 1 x D/4 products in tokens
INPUT_SKIP = _sum(block(), {C.TOKENS: (0, 2 * N * 1 * (D // 4))})


@dataclass(frozen=True)
class Fixture:
    """A model, its expected breakdown, and how it is analysed: ``inputs``, the keywords of
    ``analyze`` making its input (the standard image by default)."""

    build: Callable[[], nn.Module]
    expected: Breakdown
    overrides: tuple[tuple[str, str], ...] = ()
    no_grad: bool = False
    notes: tuple[str, ...] = field(default=())
    inputs: dict[str, Any] = field(default_factory=lambda: {"image_size": IMAGE})


PLAIN = net({C.TOKENS: (N * D, 0)})  # the position embedding, N x D
FIXTURES: dict[str, Fixture] = {
    "plain_block": Fixture(Plain, PLAIN),
    "mapped_block": Fixture(Plain, {**{c: v for c, v in PLAIN.items() if c is not C.HEAD},
                                    C.OTHER: PLAIN[C.HEAD]}, overrides=(("^b$", "other"),)),
    "sdpa_block": Fixture(lambda: Net(Sdpa), net()),
    "softmax_mix_block": Fixture(lambda: Net(SoftmaxMixBlk),
                                 _sum(OUTSIDE, _times(L, {**block(), **SOFTMAX_MIX}))),
    "rms_block": Fixture(lambda: Net(RmsBlk), _sum(OUTSIDE, _times(L, {**block(), **RMS}))),
    "pooled_skip_block": Fixture(lambda: EmbedNet(PooledEmbed), net(DEPTHWISE)),
    "additive_block": Fixture(
        lambda: Net(AdditiveBlk),
        _sum(OUTSIDE, _times(L, {**block(), **ADDITIVE}))),
    "mha_block": Fixture(lambda: Net(PartsBlk), net(_times(L, PARTS_SHIFT)), no_grad=True),
    "bias_block": Fixture(lambda: Net(BiasBlk), net(_times(L, SCORE_BIAS))),
    "reduced_kv_block": Fixture(lambda: Net(ReducedBlk),
                                _sum(OUTSIDE, _times(L, {**block(), **REDUCED}))),
    "fused_block": Fixture(lambda: Net(FusedBlk), _sum(OUTSIDE, _times(L, fused_block()))),
    "pooling_head": Fixture(Pooled, net(POOLED)),
    "mixer_block": Fixture(lambda: Net(MixerBlk), net(_times(L, MIXER))),
    "parallel_block": Fixture(lambda: Net(ParallelBlk), net()),
    "neighbour_block": Fixture(lambda: Net(BufferBlk), net()),
    "selector_block": Fixture(Selected, net(SELECTED, n=2)),
    "conv_stem_block": Fixture(EmbedNet, net(DEPTHWISE)),
    "skipless_block": Fixture(Units, net(_times(2, POINTWISE))),
    "map_conv_block": Fixture(MapNet, net(MAP_CONV)),
    "final_conv_block": Fixture(FinalNet, net(MAP_CONV)),
    "residual_conv_net": Fixture(ConvNet, CONV_NET),
    "mixer_only": Fixture(Chain, CHAIN),
    "memory_block": Fixture(lambda: Net(MemBlk), net(_times(L, MEMORY))),
    "memory_matmul_block": Fixture(lambda: Net(MemMatmulBlk), net(_times(L, MEMORY))),
    "raw_norm_net": Fixture(RawNormNet, net({C.NORM: (2 * IMAGE, 0)})),
    "class_attention": Fixture(ClassNet, net(CLASS_ATTENTION)),
    "gated_block": Fixture(lambda: Net(GatedBlk), net(_times(L, GATED))),
    "conv_qkv_block": Fixture(lambda: Net(ConvQkvBlk), net(_times(L, CONV_QKV))),
    "unrun_norm": Fixture(lambda: Net(UnrunBlk), net(_times(L, {C.NORM: (2 * D, 0)}))),
    "hand_norm_block": Fixture(HandNormNet, net()),  # the norms' 2D params each in norm
    "single_key_block": Fixture(lambda: Net(SingleKeyBlk), net(_times(L, SINGLE_KEY))),
    "merger_net": Fixture(MergerNet, _sum(OUTSIDE, block(), block(MERGED), MERGER)),
    "one_block_stages": Fixture(StagesNet, net(STAGES)),
    "window_bias_block": Fixture(lambda: Net(WindowBiasBlk), net(_times(L, WINDOW_BIAS))),
    "query_term_block": Fixture(lambda: Net(QueryTermBlk), net(_times(L, QUERY_TERM))),
    "random_feature_block": Fixture(lambda: Net(RandomFeatureBlk),
                                    net(_times(L, RANDOM_FEATURE))),
    "landmark_block": Fixture(lambda: Net(LandmarkBlk), net(_times(L, LANDMARK))),
    "parallel_lists": Fixture(ListsNet, net(SHARED_NORMS)),
    "position_tables": Fixture(TablesNet, net(TABLES)),
    "post_norm_class_token": Fixture(PostNormClassNet, POST_NORM_CLASS),
    "query_selection": Fixture(QuerySelectionNet, _sum(
        net(QUERY_SELECTION), _times(L, decoder_layer()))),
    "unread_param": Fixture(lambda: Net(UnreadBlk), net(_times(L, {C.NORM: (D * D + D, 0)}))),
    "parametrized_block": Fixture(parametrized_net, net()),
    "vector_norm_block": Fixture(VectorNormNet, VECTOR_NORM_NET),
    "head_bias_block": Fixture(lambda: Net(HeadBiasBlk), net()),  # 3 D-element biases
    "index_merge_block": Fixture(MergeNet, MERGE),
    "fused_token_block": Fixture(FuseNet, FUSED),
    "deformable_block": Fixture(lambda: Net(DeformBlk), net(_times(L, DEFORM))),
    "loop_decoder": Fixture(LoopDecoderNet, loop_decoder()),
    "one_module_decoder": Fixture(StepDecoderNet, loop_decoder(1)),
    "constant_table_block": Fixture(lambda: Net(ConstantTableBlk), net(_times(L, CONSTANT_TABLE))),
    "input_skip_layer": Fixture(InputSkipLayer, INPUT_SKIP,
                                inputs={"input_shape": (1, D, SIDE, SIDE)}),
}

class SequencePooled(Net):
    """Sequence pooling after the blocks (CCT's): a linear ``z`` (D -> 1) scores each token, a
    softmax over the tokens weights them, their weighted sum is the pooled vector."""

    def __init__(self) -> None:
        super().__init__()
        self.z = nn.Linear(D, 1)

    def after(self, x: torch.Tensor) -> torch.Tensor:
        return (self.z(x).softmax(1).transpose(-2, -1) @ x)[:, 0]


# the score linear D + 1 params, N * D MACs, head; the weighted sum (1 x N by N x D) attn_core
SEQUENCE_POOL = {C.HEAD: (D + 1, N * D), C.ATTN_CORE: (0, N * D)}


# issue 35's classes whose fixture extends a rule that has a fixture of its own
CLASS_FIXTURES: dict[str, Fixture] = {
    "memory_layout_block": Fixture(lambda: Net(MemLayoutBlk), net(_times(L, MEMORY))),
    "sequence_pool": Fixture(SequencePooled, net(SEQUENCE_POOL)),
    "repeated_tables": Fixture(RepeatedTablesNet, REPEATED_TABLES),
    "lambda_block": Fixture(lambda: Net(LambdaBlk), net(_times(L, LAMBDA))),
    "masked_window_block": Fixture(lambda: Net(MaskedWindowBlk), net(_times(L, MASKED_WINDOW))),
}
