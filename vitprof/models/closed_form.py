"""Closed-form params, MACs and vector FLOPs of a Vision Transformer, from its spec alone.

A :class:`ViTSpec` describes a plain ViT; :func:`closed_form` turns it into counts per component
and per block, with the conventions of :mod:`vitprof.core.records` (MACs are the primary unit,
FLOPs = 2 x MACs, element-wise work is vector FLOPs at the per-element costs of
:mod:`vitprof.count.formulas`) and the counter's attribution rules (a residual add belongs to the
branch it closes). Letters, per image:

* ``C`` input channels, ``P`` patch size, ``Np = floor(height / P) x floor(width / P)`` patch
  tokens (``floor(image_size / P)^2`` for a square image: a stride-P convolution floors a side P
  does not divide and leaves the last ``side mod P`` rows or columns unread, :attr:`ViTSpec.floor`);
* ``T`` prefix tokens (class + distillation + registers), ``n`` patch tokens a block sees (``Np``,
  or fewer under token pruning), ``N = T + n`` tokens a block sees;
* ``D`` width, ``H`` heads, ``d = D / H`` head width, ``M`` MLP width, ``K`` classes.

Per block of ``N`` tokens (``S = H N^2`` attention scores):

==========  =================  ==============  ================================================
component   params             MACs            vector FLOPs
==========  =================  ==============  ================================================
norm        2 x 2D             0               2 x 7ND (LayerNorm 5 + weight 1 + bias 1)
attn_qkv    3D^2 (+ 3D bias)   3ND^2           3ND if qkv bias
attn_core   0                  2N^2 D          6S (sdpa, scaled_scores); ND + 5S (scaled_query);
                                               ND + 6S (mha_weights: q scale, softmax, head mean);
                                               + S with an attention mask (its add per score);
                                               linear attention: MACs 2NDd, vector 2ND (ReLUs)
attn_proj   D^2 + D            ND^2            ND bias + ND residual
mlp         2DM + M + D        2NDM            NM bias + 5NM GELU + ND bias + ND residual
==========  =================  ==============  ================================================

Outside the blocks: patch_embed ``C P^2 D + D`` params, ``Np C P^2 D`` MACs, ``Np D`` bias
adds; tokens ``(T + rows) D`` params with ``rows = Np + T`` (or ``Np`` when the position
embedding skips the prefix), ``rows D`` adds, and with a patch mask (Hugging Face's
``bool_masked_pos``) ``D`` params (the mask token) and ``Np (3D + 1)`` vector FLOPs; the final
norm (all ``N`` last tokens or only the pooled vectors); the head (see :class:`HeadKind`).
Under pruning, a note 002 token predictor (LayerNorm, Linear(D, D/4), GELU, Linear(D/4, 1) on
the ``n`` patch tokens it scores) runs before each pruned block and is counted in that block, as
the graph recognizer places a token selector: its LayerNorm ``norm``, the rest ``mlp``.

Params and MACs are exact for every spec. Vector FLOPs are exact for the implementations the
spec names: affine LayerNorms, erf or tanh GELU in the MLP, biases on every Linear except an
optional qkv bias, eval mode (dropout free), and the attention cores of :class:`AttentionImpl`.
Every MAC and vector FLOP scales with the batch; params do not.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from vitprof.core.errors import UserError
from vitprof.core.records import COMPONENTS, UNITS, Component, Counts
from vitprof.core.vocab import AttentionImpl, AttentionKind, FinalNorm, HeadKind
from vitprof.count.flooring import Floor, unread_tail
from vitprof.count.formulas import (
    GELU_COST,
    LAYER_NORM_COST,
    REDUCTION_COSTS,
    SDPA_SCALE_COST,
    SOFTMAX_COST,
    VECTOR_COSTS,
)

LAYER_NORM_AFFINE_COST = LAYER_NORM_COST + 2  # normalise 5, weight 1, bias 1


_ENUM_FIELDS = {
    "head": HeadKind,
    "final_norm": FinalNorm,
    "attention": AttentionKind,
    "attention_impl": AttentionImpl,
}


@dataclass(frozen=True)
class ViTSpec:
    """A plain pre-norm Vision Transformer, as far as its counts depend on it."""

    image_size: int | tuple[int, int]  # pixels: an int (height = width) or (height, width)
    patch_size: int  # P: patch height = width; at most each side (a side it does not divide floors)
    width: int  # D: token width
    depth: int  # number of blocks
    heads: int  # H: attention heads; divides width
    mlp_width: int  # M: hidden width of each block's MLP
    num_classes: int = 1000  # K: classifier outputs; 0 = no classifier
    in_chans: int = 3  # C: input channels
    class_token: bool = True  # a learned class token is prepended
    dist_token: bool = False  # a learned distillation token follows it (DeiT)
    reg_tokens: int = 0  # learned register tokens after them
    pos_embed_covers_prefix: bool = True  # position embedding rows for prefix tokens too
    qkv_bias: bool = True  # the q, k, v projections have biases (every other Linear has one)
    head: HeadKind = HeadKind.TOKEN  # how logits are made from the last tokens
    final_norm: FinalNorm = FinalNorm.TOKENS  # where the LayerNorm after the last block runs
    attention: AttentionKind = AttentionKind.SOFTMAX  # what the attention core computes
    attention_impl: AttentionImpl = AttentionImpl.SDPA  # how softmax attention is written
    attention_mask: bool = False  # an additive mask over the scores is fed (timm's attn_mask)
    mask_token: bool = False  # a learned mask token (D params, in tokens), used when a patch
    # mask is fed
    patch_mask: bool = False  # a mask over the patches is fed (Hugging Face's bool_masked_pos;
    # it needs the mask token)
    tokens_per_block: tuple[int, ...] | None = None  # patch tokens each block sees (prefix
    # tokens are never pruned); None = all Np in every block
    prune_at: tuple[int, ...] | None = None  # blocks preceded by a note 002 token predictor;
    # None = the blocks where tokens_per_block drops (given explicitly, that is stored as None)

    def __post_init__(self) -> None:
        for name, kind in _ENUM_FIELDS.items():
            value = getattr(self, name)
            try:
                object.__setattr__(self, name, kind(value))
            except ValueError:
                choices = ", ".join(k.value for k in kind)
                raise UserError(f"unknown {name} '{value}' (one of {choices})") from None
        if isinstance(self.image_size, list):
            object.__setattr__(self, "image_size", tuple(self.image_size))
        _validate_sizes(self)
        for name in ("tokens_per_block", "prune_at"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, tuple(getattr(self, name)))
        if self.tokens_per_block is not None and len(self.tokens_per_block) != self.depth:
            raise UserError(
                f"need {self.depth} entries in tokens_per_block, got {len(self.tokens_per_block)}"
            )
        if self.prune_at == self._dropping_blocks():
            object.__setattr__(self, "prune_at", None)
        _validate_structure(self)

    def _dropping_blocks(self) -> tuple[int, ...]:
        if self.tokens_per_block is None:
            return ()
        previous = [self.num_patches, *self.tokens_per_block[:-1]]
        return tuple(
            i for i, (before, n) in enumerate(zip(previous, self.tokens_per_block, strict=True))
            if n < before
        )

    @property
    def predictor_blocks(self) -> tuple[int, ...]:
        """Indices of the blocks preceded by a token predictor (``prune_at`` resolved)."""
        return self._dropping_blocks() if self.prune_at is None else self.prune_at

    @property
    def sides(self) -> tuple[int, int]:
        """The image's (height, width): an int ``image_size`` is a square."""
        size = self.image_size
        return (size, size) if isinstance(size, int) else (size[0], size[1])

    @property
    def num_patches(self) -> int:
        """Np: patch tokens made from one image, floor(height / P) x floor(width / P)."""
        height, width = self.sides
        return (height // self.patch_size) * (width // self.patch_size)

    @property
    def floor(self) -> Floor | None:
        """How the patch embedding, a stride-P convolution, floors an image whose sides P does
        not divide (:class:`~vitprof.count.flooring.Floor`); None when P divides both."""
        p = self.patch_size
        unread = tuple(unread_tail(side, p, p) for side in self.sides)
        if not any(unread):
            return None
        return Floor("the patch embedding", self.sides, tuple(side // p for side in self.sides),
                     (p, p), unread)

    @property
    def prefix_tokens(self) -> int:
        """T: class, distillation and register tokens."""
        return int(self.class_token) + int(self.dist_token) + self.reg_tokens

    @property
    def head_dim(self) -> int:
        """d = D / H."""
        return self.width // self.heads

    @property
    def block_patches(self) -> tuple[int, ...]:
        """n per block: the patch tokens each block sees."""
        return self.tokens_per_block or (self.num_patches,) * self.depth

    def as_dict(self) -> dict[str, Any]:
        """Every field, enums as their string values (JSON-ready)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out


def _validate_image_size(spec: ViTSpec) -> None:
    """``image_size``: a positive int, or two positive ints (height, width), each at least the
    patch size (a smaller side makes no patch: a strided convolution refuses it too)."""
    size = spec.image_size
    sides = [size] if isinstance(size, int) else list(size)
    if len(sides) != (1 if isinstance(size, int) else 2) or any(
            isinstance(s, bool) or not isinstance(s, int) for s in sides):
        raise UserError(f"image_size must be an int or (height, width), got {size!r}")
    if min(sides) < 1:
        raise UserError(f"image_size must be at least 1, got {size}")
    if min(sides) < spec.patch_size:
        text = "x".join(map(str, sides))
        raise UserError(f"image size {text} is smaller than the patch size {spec.patch_size}: "
                        f"it makes no patch")


def _validate_sizes(spec: ViTSpec) -> None:
    for name in ("patch_size", "width", "depth", "heads", "mlp_width", "in_chans"):
        if getattr(spec, name) < 1:
            raise UserError(f"{name} must be at least 1, got {getattr(spec, name)}")
    for name in ("num_classes", "reg_tokens"):
        if getattr(spec, name) < 0:
            raise UserError(f"{name} must not be negative, got {getattr(spec, name)}")
    _validate_image_size(spec)
    if spec.width % spec.heads:
        raise UserError(f"width {spec.width} is not divisible by {spec.heads} heads")


def _validate_structure(spec: ViTSpec) -> None:
    if spec.head in (HeadKind.TOKEN, HeadKind.HIDDEN, HeadKind.POOLER) and not spec.class_token:
        raise UserError(f"head '{spec.head}' reads the class token, but the spec has none")
    if spec.head is HeadKind.DISTILLED and not (spec.class_token and spec.dist_token):
        raise UserError("head 'distilled' needs both a class token and a distillation token")
    if spec.attention_impl is AttentionImpl.MHA_WEIGHTS and not spec.qkv_bias:
        raise UserError(
            "attention_impl 'mha_weights' needs qkv_bias: nn.MultiheadAttention has q, k, v "
            "biases whenever its output projection has one"
        )
    if spec.patch_mask and not spec.mask_token:
        raise UserError("a patch mask blends each patch with the mask token: patch_mask needs "
                        "mask_token")
    _validate_pruning(spec)


def _validate_pruning(spec: ViTSpec) -> None:
    tokens, prune_at = spec.tokens_per_block, spec.predictor_blocks
    if tokens is None:
        if prune_at:
            raise UserError("prune_at needs tokens_per_block")
        return
    if list(prune_at) != sorted(set(prune_at)) or any(not 0 <= i < spec.depth for i in prune_at):
        raise UserError(f"prune_at must be increasing block indices, got {tuple(prune_at)}")
    if prune_at and spec.width < 4:
        raise UserError("a token predictor needs width >= 4 (its hidden width is D // 4)")
    previous = spec.num_patches
    for i, n in enumerate(tokens):
        if not 1 <= n <= previous:
            raise UserError(
                f"tokens_per_block[{i}] = {n} must lie in [1, {previous}] (non-increasing)"
            )
        if n < previous and i not in prune_at:
            raise UserError(f"tokens drop before block {i}, which has no predictor in prune_at")
        previous = n


# --------------------------------------------------------------------------------------------
# building pieces, per image


def _linear(rows: int, fan_in: int, fan_out: int, bias: bool = True) -> Counts:
    """``rows`` vectors through Linear(fan_in, fan_out): bias adds are vector FLOPs, not MACs."""
    return Counts(
        params=fan_in * fan_out + (fan_out if bias else 0),
        macs=rows * fan_in * fan_out,
        vector_flops=rows * fan_out if bias else 0,
    )


def _layer_norm(rows: int, width: int) -> Counts:
    """An affine LayerNorm over ``rows`` vectors of ``width``."""
    return Counts(params=2 * width, vector_flops=LAYER_NORM_AFFINE_COST * rows * width)


def _elementwise(elements: int, cost: int) -> Counts:
    return Counts(vector_flops=elements * cost)


def patch_embed_counts(spec: ViTSpec) -> Counts:
    """Conv2d(C, D, P, stride P) on the image: one C P^2 dot product per patch and channel out."""
    c, p, d, n_p = spec.in_chans, spec.patch_size, spec.width, spec.num_patches
    return Counts(params=c * p * p * d + d, macs=n_p * c * p * p * d,
                  vector_flops=n_p * d) + patch_mask_counts(spec)[0]


def tokens_counts(spec: ViTSpec) -> Counts:
    """Prefix tokens, and the position embedding added to ``rows`` tokens; with a patch mask,
    its mask token and the product that reads it (:func:`patch_mask_counts`)."""
    rows = spec.num_patches + (spec.prefix_tokens if spec.pos_embed_covers_prefix else 0)
    return Counts(
        params=(spec.prefix_tokens + rows) * spec.width,
        vector_flops=rows * spec.width * VECTOR_COSTS["add"],
    ) + patch_mask_counts(spec)[1]


def patch_mask_counts(spec: ViTSpec) -> tuple[Counts, Counts]:
    """A patch mask ``w`` (Hugging Face's ``bool_masked_pos``, ``Np`` per image) blends each
    patch embedding ``e`` with a learned mask token ``t`` (``D`` params): ``e (1 - w) + t w``,
    whatever ``w`` holds (a masked patch is computed as an unmasked one); nothing without a mask.
    Two parts, placed as the graph recognizer places them: the work on the patch embeddings (one
    subtraction per patch; per element, ``e (1 - w)`` and the sum), in ``patch_embed``; the
    token and the product that reads it (``t w``, per element), in ``tokens``. A model with a
    mask token (``mask_token``) that is fed no mask has its ``D`` params and no work."""
    n_p, d = spec.num_patches, spec.width
    token = Counts(params=d) if spec.mask_token else Counts()
    if not spec.patch_mask:
        return Counts(), token
    on_patches = n_p * (VECTOR_COSTS["sub"] + d * (VECTOR_COSTS["mul"] + VECTOR_COSTS["add"]))
    return (Counts(vector_flops=on_patches),
            token + Counts(vector_flops=n_p * d * VECTOR_COSTS["mul"]))


def attention_core_counts(spec: ViTSpec, n_tokens: int) -> Counts:
    """QK^T and AV (or linear attention's K^T V and Q (K^T V)) with their element-wise work."""
    big_n, d, h = n_tokens, spec.width, spec.heads
    if spec.attention is AttentionKind.LINEAR:
        # per head: K^T V is d x N x d, Q (K^T V) is N x d x d; ReLU on q and on k
        return Counts(
            macs=2 * big_n * d * spec.head_dim,
            vector_flops=2 * big_n * d * VECTOR_COSTS["relu"],
        )
    scores = h * big_n * big_n
    macs = 2 * scores * spec.head_dim  # QK^T and AV: H x N x N x d each = N^2 D
    impl = spec.attention_impl
    mask = scores * VECTOR_COSTS["add"] if spec.attention_mask else 0
    if impl in (AttentionImpl.SDPA, AttentionImpl.SCALED_SCORES):
        return Counts(macs=macs, vector_flops=scores * (SDPA_SCALE_COST + SOFTMAX_COST) + mask)
    scaled_query = big_n * d * VECTOR_COSTS["mul"] + scores * SOFTMAX_COST + mask
    if impl is AttentionImpl.SCALED_QUERY:
        return Counts(macs=macs, vector_flops=scaled_query)
    mean_over_heads = scores * REDUCTION_COSTS["mean"]
    return Counts(macs=macs, vector_flops=scaled_query + mean_over_heads)


def block_counts(spec: ViTSpec, n_tokens: int) -> dict[Component, Counts]:
    """One pre-norm block on ``N = n_tokens`` tokens, per component (all nine present)."""
    big_n, d, m = n_tokens, spec.width, spec.mlp_width
    residual = _elementwise(big_n * d, VECTOR_COSTS["add"])
    counts = dict.fromkeys(COMPONENTS, Counts())
    counts[Component.NORM] = _layer_norm(big_n, d) + _layer_norm(big_n, d)
    counts[Component.ATTN_QKV] = _linear(big_n, d, 3 * d, bias=spec.qkv_bias)
    counts[Component.ATTN_CORE] = attention_core_counts(spec, big_n)
    # a residual add belongs to the branch whose output it adds
    counts[Component.ATTN_PROJ] = _linear(big_n, d, d) + residual
    counts[Component.MLP] = (
        _linear(big_n, d, m) + _elementwise(big_n * m, GELU_COST) + _linear(big_n, m, d) + residual
    )
    return counts


def predictor_counts(spec: ViTSpec, n_patches: int) -> dict[Component, Counts]:
    """Note 002's token predictor on n patch tokens: LN (``norm``), then Linear(D, D/4), GELU,
    Linear(D/4, 1) (``mlp``)."""
    d, q = spec.width, spec.width // 4
    scores = (
        _linear(n_patches, d, q)
        + _elementwise(n_patches * q, GELU_COST)
        + _linear(n_patches, q, 1)
    )
    return {Component.NORM: _layer_norm(n_patches, d), Component.MLP: scores}


def blocks_counts(spec: ViTSpec) -> list[dict[Component, Counts]]:
    """Per image, each block on its tokens with the token predictor run before it, if any."""
    before = [spec.num_patches, *spec.block_patches[:-1]]
    blocks = []
    for i, n in enumerate(spec.block_patches):
        counts = block_counts(spec, spec.prefix_tokens + n)
        if i in spec.predictor_blocks:
            for component, predictor in predictor_counts(spec, before[i]).items():
                counts[component] += predictor
        blocks.append(counts)
    return blocks


def _pooled_vectors(spec: ViTSpec) -> int:
    return 2 if spec.head is HeadKind.DISTILLED else 1


def final_norm_counts(spec: ViTSpec) -> Counts:
    """The LayerNorm after the last block: every last token, or the pooled vector(s) only."""
    if spec.final_norm is FinalNorm.NONE:
        return Counts()
    if spec.final_norm is FinalNorm.POOLED:
        return _layer_norm(_pooled_vectors(spec), spec.width)
    return _layer_norm(spec.prefix_tokens + spec.block_patches[-1], spec.width)


def head_counts(spec: ViTSpec) -> Counts:
    """Pooling, the optional hidden layer, the classifier(s), and DeiT's average."""
    d, k = spec.width, spec.num_classes
    counts = Counts()
    if spec.head is HeadKind.GAP:
        counts += _elementwise(spec.block_patches[-1] * d, REDUCTION_COSTS["mean"])
    if spec.head is HeadKind.HIDDEN:
        counts += _linear(1, d, d) + _elementwise(d, GELU_COST)
    if spec.head is HeadKind.POOLER:
        counts += _linear(1, d, d) + _elementwise(d, VECTOR_COSTS["tanh"])
    if k:
        for _ in range(_pooled_vectors(spec)):
            counts += _linear(1, d, k)
    if spec.head is HeadKind.DISTILLED:
        # (logits + logits_dist) / 2: one add and one divide per output element
        counts += _elementwise(k or d, VECTOR_COSTS["add"] + VECTOR_COSTS["div"])
    return counts


# --------------------------------------------------------------------------------------------
# the whole model


def _per_batch(counts: Counts, batch_size: int) -> Counts:
    return Counts(counts.params, counts.macs * batch_size, counts.vector_flops * batch_size)


def _per_batch_all(
    counts: dict[Component, Counts], batch_size: int
) -> dict[Component, Counts]:
    return {c: _per_batch(v, batch_size) for c, v in counts.items()}


@dataclass(frozen=True)
class ClosedForm:
    """Counts of a spec at a batch size: per component (all nine), per block, in total."""

    spec: ViTSpec
    batch_size: int
    components: dict[Component, Counts]  # outside + every block
    blocks: list[dict[Component, Counts]]  # index = block
    outside: dict[Component, Counts]  # patch embedding, tokens, final norm, head

    @property
    def totals(self) -> Counts:
        return sum(self.components.values(), Counts())

    def to_dict(self) -> dict[str, Any]:
        """The JSON interface: spec, units, totals, components, outside and blocks (zeros too)."""
        return {
            "spec": self.spec.as_dict(),
            "batch_size": self.batch_size,
            "units": dict(UNITS),
            "totals": self.totals.as_dict(),
            "components": {str(c): v.as_dict() for c, v in self.components.items()},
            "outside": {str(c): v.as_dict() for c, v in self.outside.items()},
            "blocks": [
                {"index": i, "components": {str(c): v.as_dict() for c, v in block.items()}}
                for i, block in enumerate(self.blocks)
            ],
        }


def outside_counts(spec: ViTSpec) -> dict[Component, Counts]:
    """Per image, everything that runs outside the blocks, per component."""
    counts = dict.fromkeys(COMPONENTS, Counts())
    counts[Component.PATCH_EMBED] = patch_embed_counts(spec)
    counts[Component.TOKENS] = tokens_counts(spec)
    counts[Component.NORM] = final_norm_counts(spec)
    counts[Component.HEAD] = head_counts(spec)
    return counts


def closed_form(spec: ViTSpec, batch_size: int = 1) -> ClosedForm:
    """Params, MACs and vector FLOPs of ``spec`` for a batch, per component and per block."""
    if batch_size < 1:
        raise UserError(f"batch size must be at least 1, got {batch_size}")
    blocks = [_per_batch_all(block, batch_size) for block in blocks_counts(spec)]
    outside = _per_batch_all(outside_counts(spec), batch_size)
    components = dict(outside)
    for block in blocks:
        for component, counts in block.items():
            components[component] += counts
    return ClosedForm(spec, batch_size, components, blocks, outside)
