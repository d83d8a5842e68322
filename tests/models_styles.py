"""ViTs written in styles vitprof has no table for, for the graph recognizer's tests.

Every model takes a 1x3x16x16 image (patch 4: N = 16 patches), width D = 32, MLP hidden 64,
two blocks, and is small enough to build on any device. Each is written as a different code
base would write it; the closed forms of their counts are in tests/test_graph_recognizer.py.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

D, HIDDEN, HEADS, DEPTH, CLASSES = 32, 64, 4, 2, 10


def patches(image: torch.Tensor, size: int = 4) -> torch.Tensor:
    """(B, C, H, W) -> (B, N, C*size*size), no einops."""
    b, c, h, w = image.shape
    x = image.reshape(b, c, h // size, size, w // size, size).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, (h // size) * (w // size), c * size * size)


class ParallelBlock(nn.Module):
    """ViT-22B style: one LayerNorm feeds attention and MLP, summed; q/k/v/out are direct
    children of the block; QK-norm; no biases."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(D, bias=False)
        self.q, self.k, self.v = (nn.Linear(D, D, bias=False) for _ in range(3))
        self.q_norm = nn.LayerNorm(D // HEADS, bias=False)
        self.k_norm = nn.LayerNorm(D // HEADS, bias=False)
        self.out = nn.Linear(D, D, bias=False)
        self.fc1 = nn.Linear(D, HIDDEN, bias=False)
        self.fc2 = nn.Linear(HIDDEN, D, bias=False)

    def heads(self, x: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        return x.view(b, n, HEADS, D // HEADS).transpose(1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.norm(x)
        q = self.q_norm(self.heads(self.q(y)))
        k = self.k_norm(self.heads(self.k(y)))
        a = F.scaled_dot_product_attention(q, k, self.heads(self.v(y)))
        a = a.transpose(1, 2).reshape(x.shape)
        return x + self.out(a) + self.fc2(F.gelu(self.fc1(y)))


class ParallelViT(nn.Module):
    block: type[nn.Module] = ParallelBlock

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Conv2d(3, D, 4, 4)
        self.pos = nn.Parameter(torch.zeros(1, 16, D))
        self.blocks = nn.ModuleList(self.block() for _ in range(DEPTH))
        self.norm = nn.LayerNorm(D)
        self.head = nn.Linear(D, CLASSES)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        x = self.embed(image).flatten(2).transpose(1, 2) + self.pos
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x).mean(1))


class MapAttention(nn.Module):
    """Attention on (B, C, H, W) maps with 1x1-convolution q/k/v and output (CoAtNet style)."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Conv2d(D, 3 * D, 1)
        self.proj = nn.Conv2d(D, D, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, h, w = x.shape
        q, k, v = self.qkv(x).reshape(b, 3, HEADS, c // HEADS, h * w).unbind(1)
        attn = (q.transpose(-2, -1) @ k) * (c // HEADS) ** -0.5
        out = v @ attn.softmax(-1).transpose(-2, -1)
        return self.proj(out.reshape(b, c, h, w))


class MapBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.BatchNorm2d(D), nn.BatchNorm2d(D)
        self.attn = MapAttention()
        self.mlp = nn.Sequential(nn.Conv2d(D, HIDDEN, 1), nn.GELU(), nn.Conv2d(HIDDEN, D, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class ConvResidual(nn.Module):
    """A conv block without attention: depthwise 3x3 then pointwise, residual."""

    def __init__(self) -> None:
        super().__init__()
        self.dw = nn.Conv2d(D, D, 3, padding=1, groups=D, bias=False)
        self.pw = nn.Conv2d(D, D, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.pw(F.relu(self.dw(x)))


class HybridMapViT(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, D, 4, 4)
        self.conv = ConvResidual()
        self.stages = nn.Sequential(*(MapBlock() for _ in range(DEPTH)))
        self.fc = nn.Linear(D, CLASSES)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        x = self.stages(self.conv(self.stem(image)))
        return self.fc(x.mean((2, 3)))


class Mixer(nn.Module):
    """lucidrains style attention, named like nothing attention-like."""

    def __init__(self) -> None:
        super().__init__()
        self.to_qkv = nn.Linear(D, 3 * D, bias=False)
        self.to_out = nn.Linear(D, D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        q, k, v = (t.reshape(b, n, HEADS, -1).transpose(1, 2) for t in self.to_qkv(x).chunk(3, -1))
        dots = torch.matmul(q, k.transpose(-1, -2)) * (D // HEADS) ** -0.5
        out = torch.matmul(dots.softmax(dim=-1), v)
        return self.to_out(out.transpose(1, 2).reshape(b, n, D))


class Scale(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.full((D,), 0.1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.scale


class Layer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.pre, self.post = nn.LayerNorm(D), nn.LayerNorm(D)
        self.mixer, self.mixer_scale = Mixer(), Scale()
        self.ff = nn.Sequential(nn.Linear(D, HIDDEN), nn.GELU(), nn.Linear(HIDDEN, D))
        self.ff_scale = Scale()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.mixer_scale(self.mixer(self.pre(x)))
        return x + self.ff_scale(self.ff(self.post(x)))


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(Layer() for _ in range(DEPTH))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


class PoolingViT(nn.Module):
    """An attention-pooling Linear(D, 1) registered before the blocks, the blocks inside a
    module named ``patch_transformer``, a raw projection parameter after them, layer scales
    named ``scale``, attention in a ``Mixer``."""

    def __init__(self) -> None:
        super().__init__()
        self.pool_logits = nn.Linear(D, 1)
        self.to_patch_embedding = nn.Linear(48, D)
        self.pos_embedding = nn.Parameter(torch.zeros(1, 16, D))
        self.patch_transformer = Encoder()
        self.proj = nn.Parameter(torch.zeros(D, CLASSES))

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        x = self.to_patch_embedding(patches(image)) + self.pos_embedding
        x = self.patch_transformer(x)
        weights = self.pool_logits(x).softmax(dim=1)  # (B, N, 1)
        pooled = (weights.transpose(1, 2) @ x).squeeze(1)
        return pooled @ self.proj


class FlatViT(nn.Module):
    """A hand-written forward looping over raw parameters: no block modules at all."""

    def __init__(self) -> None:
        super().__init__()

        def stack(*shape: int) -> nn.ParameterList:
            return nn.ParameterList(torch.zeros(*shape) for _ in range(DEPTH))

        self.w_patch = nn.Parameter(torch.zeros(48, D))
        self.cls = nn.Parameter(torch.zeros(1, 1, D))
        self.pos = nn.Parameter(torch.zeros(1, 17, D))
        self.ln1, self.ln2 = stack(D), stack(D)
        self.w_qkv, self.w_o = stack(D, 3 * D), stack(D, D)
        self.w_1, self.w_2 = stack(D, HIDDEN), stack(HIDDEN, D)
        self.w_head = nn.Parameter(torch.zeros(D, CLASSES))

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        x = patches(image) @ self.w_patch
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        for i in range(DEPTH):
            h = F.layer_norm(x, (D,), self.ln1[i])
            q, k, v = (h @ self.w_qkv[i]).chunk(3, dim=-1)
            x = x + ((q @ k.transpose(1, 2) * D**-0.5).softmax(-1) @ v) @ self.w_o[i]
            x = x + F.gelu(F.layer_norm(x, (D,), self.ln2[i]) @ self.w_1[i]) @ self.w_2[i]
        return x[:, 0] @ self.w_head


KEEP = 8  # patch tokens the token-pruning models keep before their second block


class Gate(nn.Module):
    """A token scorer with no norm: Linear(D, D/2), GELU, a bias-free Linear(D/2, 1)."""

    def __init__(self) -> None:
        super().__init__()
        self.hidden = nn.Linear(D, D // 2)
        self.score = nn.Linear(D // 2, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, N, D) -> (B, N)."""
        return self.score(F.gelu(self.hidden(x))).squeeze(-1)


class GatedViT(nn.Module):
    """Token pruning EViT-style in its indexing: gates in a ``ModuleDict`` keyed by the layer
    they precede, tokens ranked by ``argsort(descending=True)[:, :k]`` and picked by fancy
    indexing ``x[rows, order]``; no class token (mean pooling), lucidrains-style layers."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, D, 4, 4)
        self.pos = nn.Parameter(torch.zeros(1, 16, D))
        self.gates = nn.ModuleDict({"1": Gate()})
        self.layers = nn.ModuleList(Layer() for _ in range(DEPTH))
        self.norm = nn.LayerNorm(D)
        self.head = nn.Linear(D, CLASSES)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        x = self.stem(image).flatten(2).transpose(1, 2) + self.pos
        for i, layer in enumerate(self.layers):
            if str(i) in self.gates:
                order = self.gates[str(i)](x).argsort(dim=1, descending=True)[:, :KEEP]
                rows = torch.arange(x.shape[0], device=x.device)[:, None]
                x = x[rows, order]
            x = layer(x)
        return self.head(self.norm(x.mean(1)))


def batch_index_select(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """DynamicViT's (its repository's) gather: rows ``idx`` of each batch item of ``x``, through
    offsets into the flattened batch (integer arithmetic on the indices)."""
    b, n, c = x.shape
    offset = torch.arange(b, dtype=torch.long, device=x.device).view(b, 1) * n
    flat = (idx + offset).reshape(-1)
    return x.reshape(b * n, c)[flat].reshape(b, idx.shape[1], c)


class PredictorLG(nn.Module):
    """DynamicViT's predictor without its local/global split: LayerNorm, Linear(D, D), GELU,
    Linear(D, D/2), GELU, Linear(D/2, 2), log-softmax over keep / drop."""

    def __init__(self) -> None:
        super().__init__()
        self.in_conv = nn.Sequential(nn.LayerNorm(D), nn.Linear(D, D), nn.GELU())
        self.out_conv = nn.Sequential(nn.Linear(D, D // 2), nn.GELU(), nn.Linear(D // 2, 2),
                                      nn.LogSoftmax(dim=-1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out_conv(self.in_conv(x))


class ScoreNetViT(nn.Module):
    """Token pruning DynamicViT-repository style: ``score_predictor`` list, the keep
    log-probability ranked by ``torch.argsort``, :func:`batch_index_select`; a class token kept
    apart; parallel blocks."""

    def __init__(self) -> None:
        super().__init__()
        self.patch_embed = nn.Linear(48, D)
        self.cls = nn.Parameter(torch.zeros(1, 1, D))
        self.blocks = nn.ModuleList(ParallelBlock() for _ in range(DEPTH))
        self.score_predictor = nn.ModuleList([PredictorLG()])
        self.head = nn.Linear(D, CLASSES)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(patches(image))
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1)
        for i, block in enumerate(self.blocks):
            if i == 1:
                spatial = x[:, 1:]
                keep = self.score_predictor[0](spatial)[:, :, 0]
                order = torch.argsort(keep, dim=1, descending=True)[:, :KEEP]
                x = torch.cat([x[:, :1], batch_index_select(spatial, order)], dim=1)
            x = block(x)
        return self.head(x[:, 0])


def grid(x: torch.Tensor) -> torch.Tensor:
    """(B, N, C) tokens -> (B, C, 4, 4) map of the 16 patches."""
    b, n, c = x.shape
    return x.transpose(1, 2).reshape(b, c, 4, n // 4)


class Smear(nn.Module):
    """A depthwise 3x3 conv over the token grid and nothing else: mixes tokens, no channels."""

    def __init__(self) -> None:
        super().__init__()
        self.taps = nn.Conv2d(D, D, 3, padding=1, groups=D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.taps(grid(x)).flatten(2).transpose(1, 2)


class GridFeedForward(nn.Module):
    """Linear up, a depthwise 3x3 conv over the grid, GELU, linear down (an MLP with a
    depthwise conv inside)."""

    def __init__(self) -> None:
        super().__init__()
        self.widen = nn.Linear(D, HIDDEN)
        self.taps = nn.Conv2d(HIDDEN, HIDDEN, 3, padding=1, groups=HIDDEN)
        self.narrow = nn.Linear(HIDDEN, D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.gelu(self.taps(grid(self.widen(x)))).flatten(2).transpose(1, 2)
        return self.narrow(h)


class SmearBlock(nn.Module):
    """Attention (a ``Mixer``), then a residual depthwise conv without a norm, then a
    normalised ``GridFeedForward``: three residual units."""

    def __init__(self) -> None:
        super().__init__()
        self.ln_a, self.ln_f = nn.LayerNorm(D), nn.LayerNorm(D)
        self.talk = Mixer()
        self.smear = Smear()
        self.feed = GridFeedForward()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.talk(self.ln_a(x))
        x = x + self.smear(x)
        return x + self.feed(self.ln_f(x))


class SmearViT(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Conv2d(3, D, 4, 4)
        self.trunk = nn.ModuleList(SmearBlock() for _ in range(DEPTH))
        self.ln = nn.LayerNorm(D)
        self.classify = nn.Linear(D, CLASSES)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        x = self.embed(image).flatten(2).transpose(1, 2)
        for block in self.trunk:
            x = block(x)
        return self.classify(self.ln(x).mean(1))


class Sandwich(nn.Module):
    """Two transformer ``Layer``s between convolutions on their map, no skip around them: a 3x3
    then a 1x1 into the layers, a 1x1 then a 3x3 out of them (a local-global hybrid's unit)."""

    def __init__(self) -> None:
        super().__init__()
        self.local = nn.Conv2d(D, D, 3, padding=1)
        self.into = nn.Conv2d(D, D, 1)
        self.layers = nn.Sequential(Layer(), Layer())
        self.out_of = nn.Conv2d(D, D, 1)
        self.fuse = nn.Conv2d(D, D, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, h, w = x.shape
        y = self.layers(self.into(self.local(x)).flatten(2).transpose(1, 2))
        return self.fuse(self.out_of(y.transpose(1, 2).reshape(b, c, h, w)))


class SandwichViT(nn.Module):
    """Two ``Sandwich`` stages, on the 4x4 map of patches then, after a strided 2x2 conv
    (a downsampling), on a 2x2 map; a head of a 3x3 conv, a mean pooling and a linear."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Conv2d(3, D, 4, 4)
        self.first = Sandwich()
        self.shrink = nn.Conv2d(D, D, 2, 2)
        self.second = Sandwich()
        self.refine = nn.Conv2d(D, D, 3, padding=1)
        self.classify = nn.Linear(D, CLASSES)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        x = self.second(self.shrink(self.first(self.embed(image))))
        return self.classify(self.refine(x).mean((2, 3)))


class FusedBlock(nn.Module):
    """A parallel block whose one linear ``mix`` computes q, k, v and the MLP's hidden layer
    (``D -> 3D + HIDDEN``, with a bias), sliced apart; attention by a hand-written softmax;
    names that say neither attention nor MLP."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(D)
        self.mix = nn.Linear(D, 3 * D + HIDDEN)
        self.out = nn.Linear(D, D)
        self.down = nn.Linear(HIDDEN, D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        y = self.mix(self.norm(x))
        q, k, v = (t.reshape(b, n, HEADS, D // HEADS).transpose(1, 2)
                   for t in y[..., : 3 * D].chunk(3, dim=-1))
        scores = (q @ k.transpose(-2, -1)) * (D // HEADS) ** -0.5
        a = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, n, D)
        return x + self.out(a) + self.down(F.gelu(y[..., 3 * D:]))


class FusedViT(ParallelViT):
    """``ParallelViT`` with ``FusedBlock``s."""

    block = FusedBlock
