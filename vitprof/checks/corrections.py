"""The figures stated in the five source notes, as data, and their correction by vitprof.

Each :class:`Claim` quotes a note verbatim (one or more fragments, each a substring of the note
file), says where it stands, gives the note's value in its unit and how far the note's own
rounding lets it be off (``tolerance``), and holds a function that measures the correct value
with vitprof when the report is generated. The notes themselves are not read at run time.

Verdicts are computed, not typed:

* ``correct``: the measured value is within the tolerance of the note's value;
* ``correct only for ...``: it is not, but the note's own code (or the variant named) gives the
  note's value; the standard model it describes differs;
* ``wrong``: neither;
* claims about how cost *scales* (O-notation) are judged by measuring the scaling instead
  (``correct``, ``wrong`` or ``misleading`` when the order is right but the comparison the note
  draws from it is not).

Unless a claim says otherwise the standard model is torchvision ``vit_b_16`` at 224 px, batch 1,
the model notes 000, 003 and 004 describe. Quantities follow vitprof's conventions: MACs are
multiply-accumulates, FLOPs = 2 x MACs, parameters are counted once each.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

import torch

from vitprof.core.records import Component, Counts
from vitprof.count.analysis import analyze
from vitprof.count.result import Profile
from vitprof.models.closed_form import ViTSpec
from vitprof.models.spec_inference import spec_from_model
from vitprof.models.zoo import build
from vitprof.render.pages.markdown import Page, n
from vitprof.render.tables import markdown_table

C = Component
TV = "vit_b_16"
N001 = "note001_vit_b16"
N002 = "note002_cifar_vit"
N002L = "note002_linear_attention"
N004 = "note004_vit_b16"

CORRECT = "correct"
WRONG = "wrong"
MISLEADING = "misleading"


@dataclass(frozen=True)
class Note:
    """One source note: its file in ``shared/seeds`` and what it describes."""

    id: str
    file: str
    title: str
    compared_with: str


NOTES: dict[str, Note] = {
    note.id: note for note in (
        Note("000", "000_66f7f227b18f34c5.txt", "a params / FLOPs breakdown of torchvision "
             "vit_b_16, headed \"later found to be wrong\"", "torchvision `vit_b_16`"),
        Note("001", "001_63317c23ed57f6c7.txt", "an article building ViT-B/16 from scratch, "
             "with a torchinfo summary", "its own model, `note001_vit_b16` (10 classes, "
             "batch 1)"),
        Note("002", "002_197b70c6420a00dc.txt", "a CIFAR-ViT design note (32 px, patch 4, "
             "D=512, depth 6, 8 heads)", "its model, `note002_cifar_vit`, and "
             "`note002_linear_attention`"),
        Note("003", "003_018a882dc6a9bb56.txt", "the ViT math written out (generic formulas)",
             "torchvision `vit_b_16`: the formulas evaluated at ViT-B/16 (224 px, P=16, C=3, "
             "D=768, H=12, L=12, 1000 classes)"),
        Note("004", "004_db7fbe440df47912.repaired.txt", "a dimension-by-dimension walkthrough "
             "of a timm-style ViT-B/16 with a parameter tally (read from the repaired copy)",
             "torchvision `vit_b_16` (a qkv bias, as timm's default), and its own code, "
             "`note004_vit_b16` (`qkv_bias=False`)"),
    )
}


# ------------------------------------------------------------------------------- measuring


class Lab:
    """Measurements on vitprof profiles; each model and size is analyzed once (meta device)."""

    def __init__(self) -> None:
        self._profiles: dict[tuple[str, int | None, int], Profile] = {}
        self._specs: dict[str, ViTSpec] = {}

    def profile(self, name: str, image_size: int | None = None) -> Profile:
        key = (name, image_size, 1)
        if key not in self._profiles:
            self._profiles[key] = analyze(name, image_size=image_size)
        return self._profiles[key]

    def note001_at_batch(self, batch_size: int) -> Profile:
        """Note 001's model built for ``batch_size`` (its token parameters carry that axis)."""
        key = ("note001_vit_b16", None, batch_size)
        if key not in self._profiles:
            from vitprof.models.notes.note001 import build_note001_vit

            with torch.device("meta"):
                model = build_note001_vit(batch_size=batch_size)
            self._profiles[key] = analyze(model, batch_size=batch_size, name="note001_vit_b16")
        return self._profiles[key]

    def counts(self, name: str, *components: Component, image_size: int | None = None) -> Counts:
        """Counts of ``components`` (every component when none) in the whole model."""
        c = self.profile(name, image_size).components
        return sum((c[x] for x in components or tuple(c)), Counts())

    def block(self, name: str, *components: Component, index: int = 0) -> Counts:
        """Counts of ``components`` (every component when none) in one block."""
        c = self.profile(name).blocks[index].components
        return sum((c[x] for x in components or tuple(c)), Counts())

    def blocks(self, name: str) -> Counts:
        """Everything counted inside the blocks."""
        return sum((b.total for b in self.profile(name).blocks), Counts())

    def depth(self, name: str) -> int:
        return len(self.profile(name).blocks)

    def outside(self, name: str, component: Component) -> Counts:
        """What ``component`` counts outside every block."""
        total = self.counts(name, component)
        inside = sum((b.components[component] for b in self.profile(name).blocks), Counts())
        return Counts(total.params - inside.params, total.macs - inside.macs,
                      total.vector_flops - inside.vector_flops)

    def encoder(self, name: str) -> Counts:
        """The encoder as the notes mean it: the blocks and the final norm after them."""
        return self.blocks(name) + self.outside(name, C.NORM)

    def param(self, name: str, pattern: str) -> int:
        """Elements of the parameters whose name matches ``pattern`` (regex search)."""
        return sum(p.numel for p in self.profile(name).params if re.search(pattern, p.name))

    def shape(self, name: str, pattern: str, image_size: int | None = None) -> tuple[int, ...]:
        """Shape of the first parameter whose name matches ``pattern``."""
        params = self.profile(name, image_size).params
        return next(p.shape for p in params if re.search(pattern, p.name))

    def layer_norms(self, name: str) -> int:
        """Number of LayerNorms: the norm component's parameters named ``*weight``."""
        return sum(1 for p in self.profile(name).params
                   if p.component is C.NORM and p.name.endswith("weight"))

    def patches(self, name: str, image_size: int | None = None) -> int:
        """Patch tokens: patch-embedding MACs / its weight's elements (one use per patch)."""
        weight = sum(p.numel for p in self.profile(name, image_size).params
                     if p.component is C.PATCH_EMBED and p.name.endswith("weight"))
        return self.counts(name, C.PATCH_EMBED, image_size=image_size).macs // weight

    def spec(self, name: str) -> ViTSpec:
        """The model's spec as :func:`vitprof.models.spec_inference.spec_from_model` infers it."""
        if name not in self._specs:
            self._specs[name] = spec_from_model(build(name, device="meta").module)
        return self._specs[name]

    def tokens(self, name: str, image_size: int | None = None) -> int:
        """Tokens a block sees: the rows of the position embedding."""
        return self.shape(name, r"pos_embed(ding)?$", image_size)[-2]

    def exponent(self, name: str, component: Component, sizes: tuple[int, int]) -> float:
        """How ``component``'s MACs grow with the token count N between two image sizes:
        the k in MACs ~ N^k."""
        macs = [self.counts(name, component, image_size=s).macs for s in sizes]
        tokens = [self.tokens(name, s) for s in sizes]
        return math.log(macs[1] / macs[0]) / math.log(tokens[1] / tokens[0])


Measure = Callable[[Lab], float]
Explain = Callable[[Lab], str]


@dataclass(frozen=True)
class Claim:
    """One figure (or a structural statement that drives figures) a note states.

    ``value`` is the note's figure in ``unit`` (None for O-notation claims, which ``judge``
    decides by measuring how the cost scales); ``measure`` computes the correct value for the
    model the note describes; ``own_code`` (label, measure) is the note's own model or the
    variant it holds for, when that differs.
    """

    id: str
    where: str
    quote: tuple[str, ...]
    value: float | None
    unit: str
    measure: Measure
    reason: Explain
    tolerance: float = 0.0
    own_code: tuple[str, Measure] | None = None
    judge: Callable[[Lab], str] | None = None

    @property
    def note(self) -> Note:
        return NOTES[self.id.split("-")[0]]


@dataclass(frozen=True)
class Correction:
    """A claim with its measured value, verdict and reason."""

    claim: Claim
    measured: float
    verdict: str
    reason: str

    @property
    def difference(self) -> float | None:
        return None if self.claim.value is None else self.measured - self.claim.value


def correct(claim: Claim, lab: Lab) -> Correction:
    """Measure ``claim`` and decide its verdict."""
    measured = claim.measure(lab)
    if claim.judge is not None:
        verdict = claim.judge(lab)
    elif claim.value is None:
        raise ValueError(f"claim {claim.id} has neither a value nor a judge")
    elif abs(measured - claim.value) <= claim.tolerance:
        verdict = CORRECT
    elif claim.own_code and abs(claim.own_code[1](lab) - claim.value) <= claim.tolerance:
        verdict = f"correct only for {claim.own_code[0]}"
    else:
        verdict = WRONG
    return Correction(claim, measured, verdict, claim.reason(lab))


def _scales_as(power: int) -> Callable[[float], str]:
    return lambda k: CORRECT if abs(k - power) < 1e-9 else WRONG


def _saving(lab: Lab) -> float:
    """Per cent of the attention core's MACs that note 002's linear attention saves."""
    softmax, linear = lab.block(N002, C.ATTN_CORE).macs, lab.block(N002L, C.ATTN_CORE).macs
    return 100 * (softmax - linear) / softmax


def _m(value: float) -> str:
    """Millions with two decimals: 18.91M."""
    return f"{value / 1e6:.2f}M"


# ------------------------------------------------------------------------------- the claims
# Values in comments are the arithmetic the note itself states or implies.

_TV_BLOCK_MHA = (C.ATTN_QKV, C.ATTN_CORE, C.ATTN_PROJ)


def _share(lab: Lab, part: Counts, key: str) -> float:
    return 100 * getattr(part, key) / getattr(lab.counts(TV), key)


def _block_share(lab: Lab, *components: Component) -> float:
    return 100 * lab.block(TV, *components).macs / lab.block(TV).macs


# note 004 §6.4 per block: QKV 768 x 2304, Proj 768 x 768, fc1 768 x 3072, fc2 3072 x 768
TALLY_004_BLOCK = 1_769_472 + 589_824 + 2_359_296 + 2_359_296
# ... x 12 blocks + Conv2d + CLS + position embedding + final LayerNorm + head, as tallied
TALLY_004_TOTAL = 12 * TALLY_004_BLOCK + 589_824 + 768 + 151_296 + 768 + 768_000


def _listed_000(lab: Lab) -> str:
    listed = 84_957_000 + 769_000 + 590_592 + 151_776  # the four rows of its section II table
    return (f"its own section II rows add up to {n(listed)}, not 85.8M; the model has "
            f"{n(lab.counts(TV).params)}")


def _torchinfo_001(lab: Lab) -> str:
    name = "note001_vit_b16"
    conv = lab.counts(name, C.PATCH_EMBED).params * lab.patches(name)
    leaves = lab.counts(name, C.MLP, C.NORM, C.HEAD).params
    return (
        "torchinfo's rule, not MACs: a Linear (or LayerNorm) counts its parameters x the batch, "
        "not x the tokens, and a conv its parameters x output positions; "
        f"nn.MultiheadAttention adds nothing (its out_proj never runs as a module). Conv "
        f"{n(lab.counts(name, C.PATCH_EMBED).params)} x {lab.patches(name)} positions = "
        f"{n(conv)}, plus the MLP, LayerNorm and head parameters {n(leaves)}, is {n(conv + leaves)}"
        f" = torchinfo's figure. The model performs {n(lab.counts(name).macs)} MACs."
    )


def _param_bytes_001(lab: Lab) -> str:
    name = "note001_vit_b16"
    skipped = lab.counts(name, C.ATTN_QKV, C.ATTN_PROJ, C.TOKENS).params
    kept = lab.counts(name).params - skipped
    return (
        "torchinfo sums the bytes of the leaf layers that ran; nn.MultiheadAttention (out_proj "
        "is its child) and PosEmbedding (a Dropout child) are not leaves, so their "
        f"{n(skipped)} parameters are left out: {n(kept)} x 4 bytes = {kept * 4 / 1e6:.2f} MB. "
        f"All {n(lab.counts(name).params)} parameters in float32 take "
        f"{lab.counts(name).params * 4 / 1e6:.2f} MB, so its Estimated Total Size (335.08 MB) is "
        f"short by the same {skipped * 4 / 1e6:.2f} MB"
    )


CLAIMS: tuple[Claim, ...] = (
    # ----------------------------------------------------------------------- note 000
    Claim("000-1", "§I text (line 9)", ("**8580 万参数**",), 85_800_000, "params",
          lambda lab: lab.counts(TV).params, _listed_000, tolerance=5_000),
    Claim("000-2", "§I table, 总参数量 (line 13)", (r"$\approx 85.8$ Million",), 85_800_000,
          "params", lambda lab: lab.counts(TV).params, _listed_000, tolerance=50_000),
    Claim("000-3", "§I text (line 9)", ("**5655 万次浮点运算**（FLOPs）",), 56_550_000, "FLOPs",
          lambda lab: lab.counts(TV).flops,
          lambda lab: (
              f"vit_b_16 performs {n(lab.counts(TV).macs)} MACs = {n(lab.counts(TV).flops)} "
              f"FLOPs; the note's figure is about 1/{lab.counts(TV).flops / 56_550_000:.0f} of "
              "the FLOPs. It is the sum of its §III table (56.4M + 0.147M + 1500), whose "
              "encoder row is 12 x 4.70M, a parameter count (see the §IV MLP row)"),
          tolerance=5_000),
    Claim("000-4", "§I table, 总计算量 (Mult-Adds) (line 14)", (r"$\approx 56.55$ Million",),
          56_550_000, "MACs", lambda lab: lab.counts(TV).macs,
          lambda lab: (
              f"vit_b_16 performs {n(lab.counts(TV).macs)} MACs "
              f"({lab.counts(TV).macs / 1e9:.2f} GMACs), "
              f"{lab.counts(TV).macs / 56_550_000:.0f}x the note's figure: a linear layer's "
              f"MACs are its weights x the {lab.tokens(TV)} tokens, and the note's "
              "encoder figure is 12 x the MLP's parameter count (see the §IV MLP row)"),
          tolerance=5_000),
    Claim("000-5", "§I table, Embedding Dimension (line 15)", ("| $768$ |",), 768, "width D",
          lambda lab: lab.shape(TV, r"class_token$")[-1],
          lambda lab: "right: the class token is 768 wide"),
    Claim("000-6", "§I table, Encoder Layer 数量 (line 16)", ("| $12$ |",), 12, "blocks",
          lambda lab: lab.depth(TV), lambda lab: "right: 12 encoder blocks"),
    Claim("000-7", "§II text (line 22)", ("**99% 的参数**",), 99, "% of params",
          lambda lab: _share(lab, lab.encoder(TV), "params"),
          lambda lab: (f"the encoder (12 blocks and the final LayerNorm) holds "
                       f"{n(lab.encoder(TV).params)} of {n(lab.counts(TV).params)} parameters"),
          tolerance=0.5),
    Claim("000-8", "§II table, Transformer Encoder (12 层) (line 26)", ("$84,957,000$",),
          84_957_000, "params", lambda lab: lab.encoder(TV).params,
          lambda lab: (
              f"each block holds {n(lab.block(TV).params)} parameters (LayerNorms "
              f"{n(lab.block(TV, C.NORM).params)}, attention "
              f"{n(lab.block(TV, *_TV_BLOCK_MHA).params)}, MLP "
              f"{n(lab.block(TV, C.MLP).params)}); 12 blocks and the final LayerNorm "
              f"({n(lab.outside(TV, C.NORM).params)}) make {n(lab.encoder(TV).params)}")),
    Claim("000-9", "§II table, Transformer Encoder share (line 26)", (r"$\mathbf{99.02\%}$",),
          99.02, "% of params", lambda lab: _share(lab, lab.encoder(TV), "params"),
          lambda lab: ("the share is taken against the note's wrong total: 84,957,000 / 85.8M "
                       f"= {100 * 84_957_000 / 85_800_000:.2f}%; the four shares of the table "
                       f"add up to {99.02 + 0.90 + 0.69 + 0.18:.2f}%"), tolerance=0.005),
    Claim("000-10", "§II table, MLP Head (line 27)", ("$769,000$",), 769_000, "params",
          lambda lab: lab.counts(TV, C.HEAD).params,
          lambda lab: "right: Linear(768, 1000) with its bias"),
    Claim("000-11", "§II table, MLP Head share (line 27)", (r"$\approx 0.90\%$",), 0.90,
          "% of params", lambda lab: _share(lab, lab.counts(TV, C.HEAD), "params"),
          lambda lab: f"taken against the wrong total: 769,000 / 85.8M = {769_000 / 858_000:.2f}%",
          tolerance=0.005),
    Claim("000-12", "§II table, Patch Embedding (line 28)", ("$590,592$",), 590_592, "params",
          lambda lab: lab.counts(TV, C.PATCH_EMBED).params,
          lambda lab: "right: Conv2d(3, 768, kernel 16, stride 16) with its bias"),
    Claim("000-13", "§II table, Patch Embedding share (line 28)", (r"$\approx 0.69\%$",), 0.69,
          "% of params", lambda lab: _share(lab, lab.counts(TV, C.PATCH_EMBED), "params"),
          lambda lab: f"taken against the wrong total: 590,592 / 85.8M = {590_592 / 858_000:.2f}%",
          tolerance=0.005),
    Claim("000-14", "§II table, Positional/Class Tokens (line 29)", ("$151,776$",), 151_776,
          "params", lambda lab: lab.counts(TV, C.TOKENS).params,
          lambda lab: (
              f"the class token ({n(lab.param(TV, r'^class_token$'))}) and the position "
              f"embedding ({lab.tokens(TV)} x 768 = {n(lab.param(TV, r'pos_embedding$'))}) "
              f"make {n(lab.counts(TV, C.TOKENS).params)}; 151,776 is no product of the "
              "model's dimensions (a typo)")),
    Claim("000-15", "§II table, Positional/Class Tokens share (line 29)", (r"$\approx 0.18\%$",),
          0.18, "% of params", lambda lab: _share(lab, lab.counts(TV, C.TOKENS), "params"),
          lambda lab: "right by luck: two errors (151,776 and the 85.8M total) cancel out",
          tolerance=0.005),
    Claim("000-16", "§III table, Transformer Encoder (line 43)", (r"$\approx 56.4$ Million",),
          56_400_000, "MACs", lambda lab: lab.encoder(TV).macs,
          lambda lab: (f"12 x 4.70M, the MLP's parameter count; the 12 blocks perform "
                       f"{n(lab.blocks(TV).macs)} MACs"), tolerance=50_000),
    Claim("000-17", "§III table and conclusion, Transformer Encoder share (lines 43, 49)",
          (r"$\approx \mathbf{99.8\%}$", "**99.8% 以上的计算量**"), 99.8, "% of MACs",
          lambda lab: _share(lab, lab.encoder(TV), "macs"),
          lambda lab: (f"the patch embedding takes "
                       f"{_share(lab, lab.counts(TV, C.PATCH_EMBED), 'macs'):.2f}% of the MACs"),
          tolerance=0.05),
    Claim("000-18", "§III table, Patch Embedding (line 44)", (r"$\approx 0.147$ Million",),
          147_000, "MACs", lambda lab: lab.counts(TV, C.PATCH_EMBED).macs,
          lambda lab: (f"the conv applies its {n(lab.param(TV, r'conv_proj.weight'))} weights "
                       f"at each of the {lab.patches(TV)} patches: "
                       f"{n(lab.counts(TV, C.PATCH_EMBED).macs)} MACs"), tolerance=500),
    Claim("000-19", "§III table, Patch Embedding share (line 44)", (r"$\approx 0.2\%$",), 0.2,
          "% of MACs", lambda lab: _share(lab, lab.counts(TV, C.PATCH_EMBED), "macs"),
          lambda lab: "follows from the patch-embedding MACs above", tolerance=0.05),
    Claim("000-20", "§III table, MLP Head (line 45)", (r"$\approx 1500$ 次",), 1_500, "MACs",
          lambda lab: lab.counts(TV, C.HEAD).macs,
          lambda lab: (f"Linear(768, 1000) on the class token is 768 x 1000 = "
                       f"{n(lab.counts(TV, C.HEAD).macs)} MACs"), tolerance=50),
    Claim("000-21", "§III table, MLP Head share (line 45)", (r"$\approx 0.003\%$",), 0.003,
          "% of MACs", lambda lab: _share(lab, lab.counts(TV, C.HEAD), "macs"),
          lambda lab: "follows from the head MACs above", tolerance=0.0005),
    Claim("000-22", "§IV table, MLP Block (FeedForward) (line 59)", (r"$\approx 4.70$ Million",),
          4_700_000, "MACs per block", lambda lab: lab.block(TV, C.MLP).macs,
          lambda lab: (
              f"a parameter count presented as mult-adds: the MLP has "
              f"{n(lab.block(TV, C.MLP).params)} parameters; each weight is used once per "
              f"token, so it performs {n(lab.block(TV, C.MLP).macs)} MACs per block"),
          tolerance=5_000),
    Claim("000-23", "§IV table, Multihead Attention (MHA) (line 60)",
          (r"$\approx 2.36$ Million",), 2_360_000, "MACs per block",
          lambda lab: lab.block(TV, *_TV_BLOCK_MHA).macs,
          lambda lab: (
              f"a parameter count presented as mult-adds: the attention has "
              f"{n(lab.block(TV, *_TV_BLOCK_MHA).params)} parameters; it performs "
              f"{n(lab.block(TV, C.ATTN_QKV, C.ATTN_PROJ).macs)} projection MACs plus "
              f"{n(lab.block(TV, C.ATTN_CORE).macs)} in QK^T and AV, which have no parameters"),
          tolerance=5_000),
    Claim("000-24", "§IV table, MLP share of the layer (line 59)", (r"$\approx \mathbf{67\%}$",),
          67, "% of block MACs", lambda lab: _block_share(lab, C.MLP),
          lambda lab: ("the ratio of the two parameter counts (4.72M : 2.36M); in MACs the "
                       "parameter-free attention core adds to the attention's side"),
          tolerance=0.5),
    Claim("000-25", "§IV table, MHA share of the layer (line 60)", (r"$\approx 33\%$",), 33,
          "% of block MACs", lambda lab: _block_share(lab, *_TV_BLOCK_MHA),
          lambda lab: "as the MLP share above", tolerance=0.5),
    Claim("000-26", "§IV table, LayerNorm (line 61)", (r"(极少) | $\approx 0\%$",), 0,
          "% of block MACs", lambda lab: _block_share(lab, C.NORM),
          lambda lab: (f"right: LayerNorm has no MACs; its element-wise work is "
                       f"{n(lab.block(TV, C.NORM).vector_flops)} vector FLOPs per block"),
          tolerance=0.5),
    Claim("000-27", "§I text (line 9)", ("（约 $86$M）",), 86_000_000, "params",
          lambda lab: lab.counts(TV).params,
          lambda lab: f"{n(lab.counts(TV).params)} rounds to 87M", tolerance=500_000),
    Claim("000-28", "§IV table, MLP Block (line 59)", (r"$768 \rightarrow 3072$",), 3072,
          "MLP width M", lambda lab: lab.spec(TV).mlp_width,
          lambda lab: "right: the MLP widens 768 to 3072 and back"),
    # ----------------------------------------------------------------------- note 001
    Claim("001-1", "Codeblock 2 (line 49)", ("NUM_PATCHES = (IMAGE_SIZE//PATCH_SIZE) ** 2 # "
                                            "(224//16)**2 = 196",), 196, "patches",
          lambda lab: lab.patches(N001), lambda lab: "right: a 14 x 14 grid of 16 px patches"),
    Claim("001-2", "Codeblocks 9-10 (lines 131-133, 143)",
          ("torch.randn(size=(BATCH_SIZE, 1, EMBED_DIM))",
           "torch.randn(size=(BATCH_SIZE, NUM_PATCHES+1, EMBED_DIM))"),
          2 * (1 * 768 + 197 * 768), "token params at batch 2",  # (B, 1, D) + (B, N+1, D), B = 2
          lambda lab: lab.counts(TV, C.TOKENS).params,
          lambda lab: (
              "the class token and the position embedding carry a leading BATCH_SIZE axis and "
              "the class token is concatenated without expand: built for batch 2 the model "
              f"holds {n(lab.note001_at_batch(2).components[C.TOKENS].params)} token "
              "parameters, and it accepts only batches of exactly BATCH_SIZE images. A ViT's "
              f"are shaped (1, ...) and broadcast: {n(lab.counts(TV, C.TOKENS).params)} at any "
              "batch"),
          own_code=("its own code",
                    lambda lab: lab.note001_at_batch(2).components[C.TOKENS].params)),
    Claim("001-3", "Codeblock 19 output (line 295)", ("Conv2d: 2-1 [1, 768, 14, 14] 590,592",),
          590_592, "params", lambda lab: lab.counts(N001, C.PATCH_EMBED).params,
          lambda lab: "right (weight 3 x 16 x 16 x 768 and a 768 bias)"),
    Claim("001-4", "Codeblock 19 output (line 297)", ("PosEmbedding: 1-2 [1, 197, 768] 152,064",),
          152_064, "params", lambda lab: lab.counts(N001, C.TOKENS).params,
          lambda lab: "right at BATCH_SIZE = 1: 768 + 197 x 768"),
    Claim("001-5", "Codeblock 19 output (line 301)", ("LayerNorm: 3-1 [1, 197, 768] 1,536",),
          1_536, "params", lambda lab: lab.param(N001, r"^transformer_encoders\.0\.norm_0\."),
          lambda lab: "right: weight and bias"),
    Claim("001-6", "Codeblock 19 output (line 302)",
          ("MultiheadAttention: 3-2 [1, 197, 768] 2,362,368",), 2_362_368, "params",
          lambda lab: lab.block(N001, C.ATTN_QKV, C.ATTN_PROJ).params,
          lambda lab: "right: in_proj 768 x 2304 + 2304 and out_proj 768 x 768 + 768"),
    Claim("001-7", "Codeblock 19 output (line 304)", ("Sequential: 3-4 [1, 197, 768] 4,722,432",),
          4_722_432, "params", lambda lab: lab.block(N001, C.MLP).params,
          lambda lab: "right: 768 x 3072 + 3072 and 3072 x 768 + 768"),
    Claim("001-8", "Codeblock 19 output (line 361)", ("LayerNorm: 2-16 [1, 768] 1,536",), 1_536,
          "params", lambda lab: lab.param(N001, r"^mlp_head\.norm\."),
          lambda lab: "right"),
    Claim("001-9", "Codeblock 19 output (line 362)", ("Linear: 2-17 [1, 768] 590,592",), 590_592,
          "params", lambda lab: lab.param(N001, r"^mlp_head\.linear_0\."),
          lambda lab: "right: the head's hidden layer, 768 x 768 + 768"),
    Claim("001-10", "Codeblock 19 output (line 364)", ("Linear: 2-19 [1, 10] 7,690",), 7_690,
          "params", lambda lab: lab.param(N001, r"^mlp_head\.linear_1\."),
          lambda lab: "right: 768 x 10 + 10"),
    Claim("001-11", "Codeblock 19 output (lines 366-367)",
          ("Total params: 86,396,938", "Trainable params: 86,396,938"), 86_396_938,
          "params", lambda lab: lab.counts(N001).params,
          lambda lab: (f"right for its model (10 classes, a hidden head layer, batch 1); "
                       f"torchvision's vit_b_16 has {n(lab.counts(TV).params)}")),
    Claim("001-12", "text before Codeblock 19 (line 286)", ("参数总数约为 8600 万",), 86_000_000,
          "params", lambda lab: lab.counts(N001).params,
          lambda lab: "right: the paper's ViT-B has 86M too", tolerance=500_000),
    Claim("001-13", "Codeblock 19 output (line 369)",
          ("Total mult-adds (Units.MEGABYTES): 173.06",),
          173_060_000, "MACs", lambda lab: lab.counts(N001).macs, _torchinfo_001,
          tolerance=5_000),
    Claim("001-14", "Codeblock 19 output (line 373)", ("Params size (MB): 231.59",), 231.59,
          "MB of float32 params", lambda lab: lab.counts(N001).params * 4 / 1e6,
          _param_bytes_001, tolerance=0.005),
    Claim("001-15", "Codeblock 2 (line 47)", ("MLP_SIZE = EMBED_DIM * 4 # 768*4 = 3072",), 3072,
          "MLP width M", lambda lab: lab.spec(N001).mlp_width, lambda lab: "right"),
    Claim("001-16", "text after Codeblock 4 (line 72)", ("in_features,即16×16×3 = 768",), 768,
          "inputs per patch",
          lambda lab: lab.param(N001, r"patcher\.conv\.weight") // lab.spec(N001).width,
          lambda lab: "right: the projection reads 3 x 16 x 16 values per patch"),
    Claim("001-17", "text after Codeblock 4 (line 72)", ("更改为1024或1280",), 1024,
          "width D of ViT-L", lambda lab: lab.spec("vit_l_16").width, lambda lab: "right"),
    Claim("001-18", "text after Codeblock 4 (line 72)", ("更改为1024或1280",), 1280,
          "width D of ViT-H", lambda lab: lab.spec("vit_h_14").width, lambda lab: "right"),
    Claim("001-19", "Codeblock 11 output (line 158)", ("after concat : torch.Size([1, 197, 768])",),
          197, "tokens", lambda lab: lab.spec(N001).prefix_tokens + lab.patches(N001),
          lambda lab: "right: 196 patches and the class token"),
    # ----------------------------------------------------------------------- note 002
    Claim("002-1", "复杂度分析, 计算复杂度 (line 188)", ("N: 序列长度 (64)",), 64, "tokens",
          lambda lab: lab.tokens(N002),
          lambda lab: (
              f"the CLS token makes {lab.tokens(N002)} tokens (64 patches + 1); the attention "
              f"core costs 2 N^2 D = {n(lab.block(N002, C.ATTN_CORE).macs)} MACs per block, "
              f"{100 * (lab.tokens(N002) ** 2 / 64 ** 2 - 1):.1f}% more than at 64")),
    Claim("002-2", "复杂度分析, 计算复杂度 (line 189)", ("D: 嵌入维度 (512)",), 512, "width D",
          lambda lab: lab.shape(N002, r"pos_embed$")[-1], lambda lab: "right"),
    Claim("002-3", "复杂度分析, 标准注意力 (line 178)", ("- Self-Attention: O(N²D)",), None,
          "MACs per block", lambda lab: lab.block(N002, C.ATTN_CORE).macs,
          lambda lab: (
              f"right: QK^T and AV cost N^2 D each, 2 N^2 D = "
              f"{n(lab.block(N002, C.ATTN_CORE).macs)} MACs per block at N = "
              f"{lab.tokens(N002)}; measured growth with the tokens: N^"
              f"{lab.exponent(N002, C.ATTN_CORE, (32, 64)):.2f}"),
          judge=lambda lab: _scales_as(2)(lab.exponent(N002, C.ATTN_CORE, (32, 64)))),
    Claim("002-4", "复杂度分析, 标准注意力 (line 179)", ("- Feed-Forward: O(ND²)",), None,
          "MACs per block", lambda lab: lab.block(N002, C.MLP).macs,
          lambda lab: (
              f"right: 2 N D (4D) = {n(lab.block(N002, C.MLP).macs)} MACs per block; measured "
              f"growth with the tokens: N^{lab.exponent(N002, C.MLP, (32, 64)):.2f}"),
          judge=lambda lab: _scales_as(1)(lab.exponent(N002, C.MLP, (32, 64)))),
    Claim("002-5", "§3.2 and 复杂度分析, 线性注意力 (lines 126, 183)",
          ("线性注意力: O(ND²)", "- Linear Attention: O(ND²)"), None, "MACs per block",
          lambda lab: lab.block(N002L, C.ATTN_CORE).macs,
          lambda lab: (
              "the order holds for a fixed head count, but the context K^T V is per head "
              f"(d x d, d = D / H = {512 // 8}), so the cost is 2 N D d, not N D^2: "
              f"{n(lab.block(N002L, C.ATTN_CORE).macs)} MACs per block against softmax "
              f"attention's {n(lab.block(N002, C.ATTN_CORE).macs)}. At N = {lab.tokens(N002)} "
              f"tokens, close to d, it saves {_saving(lab):.1f}% of the attention core, not "
              "the reduction the note implies; by its own O-formulas it would even cost D / N = "
              "8x more"),
          judge=lambda lab: MISLEADING if _saving(lab) < 10 else CORRECT),
    Claim("002-6", "参数量 table, Patch Embedding (line 195)", ("3×4×4×512 = 24,576",), 24_576,
          "params", lambda lab: lab.counts(N002, C.PATCH_EMBED).params,
          lambda lab: (f"the bias is left out: 24,576 weights + 512 biases = "
                       f"{n(lab.counts(N002, C.PATCH_EMBED).params)}")),
    Claim("002-7", "参数量 table, Position Embedding (line 196)", ("65×512 = 33,280",), 33_280,
          "params", lambda lab: lab.param(N002, r"^pos_embed$"),
          lambda lab: (f"right; the CLS token's {n(lab.param(N002, r'^cls_token$'))} "
                       "parameters are listed nowhere")),
    Claim("002-8", "参数量 table, Transformer Block (×6) (line 197)",
          ("| Transformer Block (×6) | ~8M |",), 8_000_000, "params",
          lambda lab: lab.blocks(N002).params,
          lambda lab: (
              f"each block holds {n(lab.block(N002).params)} parameters (Q, K, V and the "
              f"projection: 4 (D^2 + D) = {n(lab.block(N002, *_TV_BLOCK_MHA).params)}; the MLP "
              f"D -> 4D -> D: {n(lab.block(N002, C.MLP).params)}; two LayerNorms "
              f"{n(lab.block(N002, C.NORM).params)}), six hold "
              f"{n(lab.blocks(N002).params)} = {_m(lab.blocks(N002).params)}, "
              f"{lab.blocks(N002).params / 8e6:.2f}x the note's figure"),
          tolerance=500_000),
    Claim("002-9", "参数量 table, Classification Head (line 198)", ("512×10 = 5,120",), 5_120,
          "params", lambda lab: lab.counts(N002, C.HEAD).params,
          lambda lab: (f"the bias is left out: 5,120 + 10 = "
                       f"{n(lab.counts(N002, C.HEAD).params)}")),
    Claim("002-10", "参数量 table, 总计 (line 199)", ("**~8.5M**",), 8_500_000, "params",
          lambda lab: lab.counts(N002).params,
          lambda lab: (
              f"the model has {n(lab.counts(N002).params)} = {_m(lab.counts(N002).params)} "
              "parameters; the table's own rows add up to "
              f"{n(24_576 + 33_280 + 8_000_000 + 5_120)}, not 8.5M, and leave out the CLS "
              f"token and the final LayerNorm ({n(lab.outside(N002, C.NORM).params)})"),
          tolerance=50_000),
    Claim("002-11", "适配其他数据集, ImageNet (line 257)", ("patch_size=16, num_patches=196",),
          196, "patches", lambda lab: lab.patches(TV),
          lambda lab: "right: (224 / 16)^2"),
    Claim("002-12", "§2.1 Patch Embedding (line 42)", ("输出: (B, 64, 512)",), 64, "patches",
          lambda lab: lab.patches(N002),
          lambda lab: "right: 64 patches; the CLS token is added after the patch embedding"),
    # ----------------------------------------------------------------------- note 003
    Claim("003-1", "§1 Patch 数量 (line 8)", (r"N = N_h \times N_w = \frac{H \times W}{P^2}",),
          224 * 224 // 16**2, "patches", lambda lab: lab.patches(TV),  # at H = W = 224, P = 16
          lambda lab: "right"),
    Claim("003-2", "§1 线性投影 (line 15)", (r"E \in \mathbb{R}^{(P^2 \cdot C) \times D}",),
          16 * 16 * 3 * 768, "params", lambda lab: lab.counts(TV, C.PATCH_EMBED).params,
          lambda lab: (f"the projection has a bias too: (P^2 C + 1) D = "
                       f"{n(lab.counts(TV, C.PATCH_EMBED).params)}")),  # P^2 C D = 589,824
    Claim("003-3", "§2 (line 20)", (r"记为 $x_{\mathrm{class}}$",), 768, "params",
          lambda lab: lab.param(TV, r"^class_token$"), lambda lab: "right: one D-vector"),
    Claim("003-4", "§2 (line 32)", (r"E_{\mathrm{pos}} \in \mathbb{R}^{(N+1)\times D}",),
          197 * 768, "params", lambda lab: lab.param(TV, r"pos_embedding$"),  # (196 + 1) x 768
          lambda lab: "right"),
    Claim("003-5", "§3.1 (line 49)",
          (r"W_Q^{(h)}, W_K^{(h)}, W_V^{(h)} \in \mathbb{R}^{D \times d}",),
          3 * 12 * 768 * 64, "params per block", lambda lab: lab.block(TV, C.ATTN_QKV).params,
          lambda lab: (
              f"3 H D d = 3 D^2 weights, but torchvision's and timm's ViT-B/16 also have q, k, v "
              f"biases: {n(lab.block(TV, C.ATTN_QKV).params)} per block"),  # 3 H D d = 1,769,472
          own_code=("a bias-free qkv (note 004's code)",
                    lambda lab: lab.block(N004, C.ATTN_QKV).params)),
    Claim("003-6", "§3.1 (line 58)", (r"W_O\in\mathbb{R}^{D\times D}",), 768 * 768,
          "params per block", lambda lab: lab.block(TV, C.ATTN_PROJ).params,
          lambda lab: (f"the output projection has a bias: D^2 + D = "
                       f"{n(lab.block(TV, C.ATTN_PROJ).params)}")),
    Claim("003-7", "§3.1 and §3.2 (lines 62, 81)",
          (r"Z' = \mathrm{LayerNorm}\bigl(Z + \mathrm{MSA}(Z)\bigr)",
           r"Z_{\mathrm{out}} = \mathrm{LayerNorm}\bigl(Z' + \mathrm{FFN}(Z')\bigr)"),
          2 * 12, "LayerNorms", lambda lab: lab.layer_norms(TV),  # two per layer, L = 12
          lambda lab: (
              "ViT is pre-norm, Z' = Z + MSA(LN(Z)) and Z_out = Z' + FFN(LN(Z')), with one more "
              "LayerNorm after the last block (the ViT paper, torchvision, timm); the post-norm "
              f"formula has 2L LayerNorms and none before the head: it misses "
              f"{n(lab.outside(TV, C.NORM).params)} parameters and "
              f"{n(lab.outside(TV, C.NORM).vector_flops)} vector FLOPs")),
    Claim("003-8", "§3.2 (lines 70-76)",
          (r"\mathrm{GELU}(zW_1 + b_1)\,W_2 + b_2", r"D_{\mathrm{ff}} = 4D"),
          768 * 3072 + 3072 + 3072 * 768 + 768, "params per block",  # W1, b1, W2, b2
          lambda lab: lab.block(TV, C.MLP).params, lambda lab: "right, biases included"),
    Claim("003-9", "§4 (lines 94-98)",
          (r"z_0^{(L)} W_{\mathrm{cls}} + b_{\mathrm{cls}}",
           r"W_{\mathrm{cls}}\in\mathbb{R}^{D\times C'}"),
          768 * 1000 + 1000, "params", lambda lab: lab.counts(TV, C.HEAD).params,
          lambda lab: "right"),
    # ----------------------------------------------------------------------- note 004
    Claim("004-1", "§1.2 数据流 (line 39)", ("(B, 197, 768)",), 197, "tokens",
          lambda lab: lab.tokens(N004), lambda lab: "right: 196 patches + the CLS token"),
    Claim("004-2", "§2.3 (line 109)", ("3 × 768 × 16 × 16 = 589,824",), 589_824, "params",
          lambda lab: lab.counts(TV, C.PATCH_EMBED).params,
          lambda lab: (f"the conv's bias is left out: 589,824 + 768 = "
                       f"{n(lab.counts(TV, C.PATCH_EMBED).params)}, in its own code too"),
          own_code=("its own code", lambda lab: lab.counts(N004, C.PATCH_EMBED).params)),
    Claim("004-3", "§6.4 tally, Patch Embedding (line 588)", ("Conv2d: 3×768×16×16 = 589,824",),
          589_824, "params", lambda lab: lab.counts(TV, C.PATCH_EMBED).params,
          lambda lab: "as §2.3: the bias is left out",
          own_code=("its own code", lambda lab: lab.counts(N004, C.PATCH_EMBED).params)),
    Claim("004-4", "§6.4 tally, CLS token (line 591)", ("1×1×768 = 768",), 768, "params",
          lambda lab: lab.param(TV, r"^class_token$"), lambda lab: "right"),
    Claim("004-5", "§6.4 tally, Position Embedding (line 594)", ("1×197×768 = 151,296",),
          151_296, "params", lambda lab: lab.param(TV, r"pos_embedding$"), lambda lab: "right"),
    Claim("004-6", "§6.4 tally, Attention QKV (line 599)", ("QKV: 768×(768×3) = 1,769,472",),
          1_769_472, "params per block", lambda lab: lab.block(TV, C.ATTN_QKV).params,
          lambda lab: (
              f"right for its own Attention (qkv_bias=False: "
              f"{n(lab.block(N004, C.ATTN_QKV).params)}); torchvision's and timm's ViT-B/16 "
              f"have a qkv bias: {n(lab.block(TV, C.ATTN_QKV).params)}"),
          own_code=("its own code (qkv_bias=False)",
                    lambda lab: lab.block(N004, C.ATTN_QKV).params)),
    Claim("004-7", "§6.4 tally, Attention Proj (line 600)", ("Proj: 768×768 = 589,824",),
          589_824, "params per block", lambda lab: lab.block(TV, C.ATTN_PROJ).params,
          lambda lab: (f"the bias is left out, though its own proj = nn.Linear(dim, dim) has "
                       f"one: {n(lab.block(N004, C.ATTN_PROJ).params)}"),
          own_code=("its own code", lambda lab: lab.block(N004, C.ATTN_PROJ).params)),
    Claim("004-8", "§6.4 tally, MLP fc1 (line 602)", ("fc1: 768×3072 = 2,359,296",), 2_359_296,
          "params per block", lambda lab: lab.param(TV, r"layer_0\.mlp\.0\."),
          lambda lab: f"the bias is left out: {n(lab.param(N004, r'blocks.0.mlp.fc1.'))}",
          own_code=("its own code", lambda lab: lab.param(N004, r"blocks\.0\.mlp\.fc1\."))),
    Claim("004-9", "§6.4 tally, MLP fc2 (line 603)", ("fc2: 3072×768 = 2,359,296",), 2_359_296,
          "params per block", lambda lab: lab.param(TV, r"layer_0\.mlp\.3\."),
          lambda lab: f"the bias is left out: {n(lab.param(N004, r'blocks.0.mlp.fc2.'))}",
          own_code=("its own code", lambda lab: lab.param(N004, r"blocks\.0\.mlp\.fc2\."))),
    Claim("004-10", "§6.4 tally, LayerNorm × 2 (line 604)", ("LayerNorm × 2: 忽略",), 0,
          "params per block", lambda lab: lab.block(TV, C.NORM).params,
          lambda lab: (f"ignored, but not nothing: {n(lab.block(TV, C.NORM).params)} per block, "
                       f"{n(lab.counts(TV, C.NORM).params - lab.outside(TV, C.NORM).params)} in "
                       "the 12 blocks")),
    Claim("004-11", "§6.4 tally, per block (line 606)", ("Block: ~7M",), 7_000_000,
          "params per block", lambda lab: lab.block(TV).params,
          lambda lab: (f"right when rounded: {n(lab.block(TV).params)} "
                       f"({n(lab.block(N004).params)} in its own code)"),
          tolerance=500_000),
    Claim("004-12", "§6.4 tally, 12 blocks (line 607)", ("12 个 Block: ~84M",), 84_000_000,
          "params", lambda lab: lab.blocks(TV).params,
          lambda lab: (
              f"12 x the rounded 7M; the blocks hold {n(lab.blocks(TV).params)} = "
              f"{_m(lab.blocks(TV).params)} ({n(lab.blocks(N004).params)} in its own code), and "
              f"even its own bias-free terms give 12 x {n(TALLY_004_BLOCK)} = "
              f"{n(12 * TALLY_004_BLOCK)}"),
          tolerance=500_000,
          own_code=("its own code", lambda lab: lab.blocks(N004).params)),
    Claim("004-13", "§6.4 tally, final LayerNorm (line 609)", ("LayerNorm: 768",), 768, "params",
          lambda lab: lab.outside(TV, C.NORM).params,
          lambda lab: (f"a LayerNorm has a weight and a bias: "
                       f"{n(lab.outside(TV, C.NORM).params)}"),
          own_code=("its own code", lambda lab: lab.outside(N004, C.NORM).params)),
    Claim("004-14", "§6.4 tally, head (line 612)", ("Linear: 768×1000 = 768,000",), 768_000,
          "params", lambda lab: lab.counts(TV, C.HEAD).params,
          lambda lab: f"the bias is left out: {n(lab.counts(TV, C.HEAD).params)}",
          own_code=("its own code", lambda lab: lab.counts(N004, C.HEAD).params)),
    Claim("004-15", "§6.4 tally, total (line 614)", ("总计: ~86M",), 86_000_000, "params",
          lambda lab: lab.counts(TV).params,
          lambda lab: (
              f"{n(lab.counts(TV).params)} ({n(lab.counts(N004).params)} in its own code) "
              f"rounds to 87M; the tally's own exact terms add up to {n(TALLY_004_TOTAL)}, and "
              "the biases and LayerNorms it leaves out make the difference"),
          tolerance=500_000),

    Claim("004-16", "§2.1 (line 63)", ("(224/16) × (224/16) = 14×14 = 196",), 196, "patches",
          lambda lab: lab.patches(N004), lambda lab: "right"),
    Claim("004-17", "§3.2 (line 202)", ("除以 √768 ≈ 27.7",), 768, "d_k in the scale",
          lambda lab: lab.spec(N004).head_dim,
          lambda lab: (
              f"a dimension mix-up: the scores are scaled by 1/sqrt(d) with the head width d = "
              f"{lab.spec(N004).head_dim} (its own code: self.scale = head_dim ** -0.5 = 1/8), "
              "not by 1/sqrt(768); either way it is one multiply per score")),
    Claim("004-18", "§3.3 (line 242)", ("d_h = D/h = 64",), 64, "head width d",
          lambda lab: lab.spec(N004).head_dim, lambda lab: "right: 768 / 12"),
    Claim("004-19", "§3.4 (line 263)", ("qkv: (B, 197, 2304)  # 2304 = 768*3",), 2304,
          "qkv outputs", lambda lab: lab.shape(N004, r"blocks\.0\.attn\.qkv\.weight")[0],
          lambda lab: "right"),
    Claim("004-20", "§5.1 (line 451)", ("ViT-Huge 32层",), 32, "blocks",
          lambda lab: lab.depth("vit_h_14"), lambda lab: "right: vit_h_14 has 32 blocks"),
    Claim("004-21", "§7.3 (line 675)", ("384×384 → 24×24 = 576 patches",), 576, "patches",
          lambda lab: lab.patches(TV, image_size=384), lambda lab: "right: (384 / 16)^2"),
)


# ------------------------------------------------------------------------------- the page


def _decimals(value: float) -> int:
    """Two decimals, or as many as it takes to show a small non-zero value (0.0044)."""
    if value == 0 or abs(value) >= 0.01:
        return 2
    return 1 - math.floor(math.log10(abs(value)))


def _number(value: float, unit: str) -> str:
    if unit.startswith("%"):
        return f"{value:.{_decimals(value)}f}%"
    if unit.startswith("MB"):
        return f"{value:.2f} MB"
    return n(round(value)) if abs(value - round(value)) < 1e-9 else f"{value:,.2f}"


def _difference(c: Correction) -> str:
    diff = c.difference
    if diff is None:
        return "-"
    if c.claim.unit.startswith("%"):
        return f"{diff:+.{_decimals(diff)}f} pt"
    if diff == 0:
        return "0"
    text = f"+{_number(diff, c.claim.unit)}" if diff > 0 else f"-{_number(-diff, c.claim.unit)}"
    if c.claim.value and c.measured / c.claim.value >= 2:
        return f"{text} (x{c.measured / c.claim.value:,.1f})"
    if c.claim.value:
        return f"{text} ({100 * diff / c.claim.value:+.2f}%)"
    return text


def _quote(claim: Claim) -> str:
    return " … ".join(f"`{q.replace('|', chr(92) + '|')}`" for q in claim.quote)


def corrections(lab: Lab | None = None) -> list[Correction]:
    """Every claim of every note, measured now."""
    lab = lab or Lab()
    return [correct(claim, lab) for claim in CLAIMS]


def corrections_page(lab: Lab | None = None) -> Page:
    """``corrections.md``: per note, a table of its figures with vitprof's values and verdicts,
    then the reason for each."""
    found = corrections(lab)
    verdicts: dict[str, int] = {}
    for c in found:
        verdicts[c.verdict] = verdicts.get(c.verdict, 0) + 1
    lines = [
        "# Corrections to the source notes", "",
        "Every parameter or FLOP figure the five source notes (`shared/seeds/`) state, and the "
        "structural claims that drive them, checked against vitprof. The quotes and their "
        "places are data in `vitprof/checks/corrections.py`; every value in the *vitprof* "
        "column, and every number in the reasons that is not the note's, is counted by vitprof "
        "when this file is generated (`vitprof report --all`).", "",
        "- units: MACs = multiply-accumulates; FLOPs = 2 x MACs; parameters counted once each; "
        "meta device, batch 1, the note's own image size",
        "- tolerance: a note's value is *correct* when it is within the rounding it states "
        "(\"≈ 85.8 Million\" allows ±0.05M, \"~8M\" ±0.5M, an exact figure nothing)",
        "- verdicts: " + ", ".join(f"{k} {v}" for k, v in sorted(verdicts.items())), "",
    ]
    for note in NOTES.values():
        rows = [c for c in found if c.claim.note is note]
        lines += [f"## Note {note.id}: {note.title}", "",
                  f"File `{note.file}`; compared with {note.compared_with}.", ""]
        cells = [
            [c.claim.id, c.claim.where, _quote(c.claim),
             "-" if c.claim.value is None else _number(c.claim.value, c.claim.unit),
             _number(c.measured, c.claim.unit), c.claim.unit, _difference(c), c.verdict]
            for c in rows
        ]
        lines += [markdown_table(["#", "where", "the note says", "note's value", "vitprof",
                                  "unit", "difference", "verdict"], cells), "", "Why:", ""]
        lines += [f"- **{c.claim.id}** ({c.verdict}): {c.reason.rstrip('.')}." for c in rows]
        lines.append("")
    return Page("corrections.md", "\n".join(lines))
