"""Strangers' ViTs (tests/strangers/): styles nobody tuned vitprof for, written with neutral names,
each held to its exact breakdown, per component, written as arithmetic (issue 24). Each runs as
written and again after :func:`vitprof.testing.neutral_names` (which also renames torch's own
classes: no ``LayerNorm``, no ``Linear`` left): the breakdown must not move.

Sizes (strangers/parts.py): 1x3x16x16 image, 4x4 tiles -> N = 16 tokens of P = 48 values, width
D = 32, 4 heads of DH = 8, feed-forward F = 64, K = 10 classes. Costs per block on n tokens:
fused q/k/v 3*n*D*D, attention products QK^T and AV 2*n*m*D against m keys (summed over heads),
output n*D*D, feed-forward 2*n*D*F; LayerNorms, softmax, GELU, adds cost no MACs.
Placements follow issue 24's classes: a parameter joined to the sequence (concatenated, expanded,
added) is ``tokens``, a class attention's query included; every block of every stack is a
block; ``head`` is only what runs after the last block; a norm that never runs stays ``norm``,
with a warning that names it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
import torch
from strangers import (
    additive,
    autocast,
    classattn,
    convqkv,
    deepconv,
    factorized,
    firstconv,
    flex,
    gated,
    idle,
    latents,
    linear,
    memory,
    mixer,
    parallel,
    rawnorm,
    registers,
    rotary,
    video,
)
from strangers.parts import DH, F_WIDTH, D, K, N, P
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from vitprof import Component as C
from vitprof import Profile, analyze
from vitprof.count.counter import FLEX_ATTENTION
from vitprof.testing import neutral_names

Expected = dict[C, tuple[int, int]]  # component -> (params, MACs); a component not named: (0, 0)

QKV_P = 3 * D * D + 3 * D  # 3_168: one fused q/k/v linear with bias
LIN_P = D * D + D  # 1_056: a D -> D linear with bias
FF_P = 2 * D * F_WIDTH + F_WIDTH + D  # 4_192
LN_P = 2 * D  # 64
STEM = (P * D + D, N * P * D)  # (1_568, 24_576): 4x4 stride-4 conv, 16 positions x 48 x 32
OUT = (D * K + K, D * K)  # (330, 320): the classifier on one pooled token


def qkv(n: int) -> int:
    return 3 * n * D * D


def core(n: int, m: int | None = None) -> int:
    return 2 * n * (n if m is None else m) * D


def lin(n: int) -> int:
    return n * D * D


def ff(n: int) -> int:
    return 2 * n * D * F_WIDTH


def plain(blocks: int = 2, n: int = N) -> Expected:
    """The breakdown of Stem + ``blocks`` x Unit(Mha) on n tokens + Out: the baseline every
    style below changes in one place."""
    return {
        C.PATCH_EMBED: STEM, C.TOKENS: (N * D, 0),
        C.ATTN_QKV: (blocks * QKV_P, blocks * qkv(n)), C.ATTN_CORE: (0, blocks * core(n)),
        C.ATTN_PROJ: (blocks * LIN_P, blocks * lin(n)), C.MLP: (blocks * FF_P, blocks * ff(n)),
        C.NORM: (blocks * 2 * LN_P + LN_P, 0), C.HEAD: OUT,
    }


@dataclass(frozen=True)
class Style:
    make: Callable[[], nn.Module]
    expected: tuple[Expected, ...]  # the breakdowns the issue accepts (two: it leaves a choice)
    blocks: int
    inputs: dict[str, object] = field(default_factory=lambda: {"image_size": 16})
    warned: Callable[[nn.Module], list[nn.Module]] = lambda model: []  # modules a warning names
    no_blocks: bool = False  # a model without attention: NO_BLOCKS warned


STYLES: dict[str, Style] = {
    # the gate linear D -> D reads the attention's input as q/k/v do and its product joins the
    # core's output before the output linear: an input projection, attn_qkv
    "gated": Style(gated.Net, ({
        **plain(), C.ATTN_QKV: (2 * (QKV_P + LIN_P), 2 * (qkv(N) + lin(N)))},), 2),
    # depthwise 3x3 conv (9*D + D = 320 params, N*D*9 MACs) inside the attention, feeding only
    # the separate q, k, v linears (3 x 1_056): attn_qkv
    "conv-before-qkv": Style(convqkv.Net, ({
        **plain(), C.ATTN_QKV: (2 * (9 * D + D + 3 * LIN_P), 2 * (N * D * 9 + qkv(N)))},), 2),
    # q, k linears and the scoring vector Linear(D, 1) (D params, N*D MACs) feed the pooling;
    # the pooling softmax(s) @ q, (1 x N) @ (N x D), is the one product of two activations
    "additive": Style(additive.Net, ({
        **plain(),
        C.ATTN_QKV: (2 * (2 * LIN_P + D), 2 * (2 * lin(N) + N * D)),
        C.ATTN_CORE: (0, 2 * N * D)},), 2),
    # 2 blocks on N tiles; the class-attention block: q on the class token alone (1*D*D), k, v
    # on 17 tokens (2*17*D*D), products 2*1*17*D, output and feed-forward on 1 token, 2 LNs;
    # the class token (D) is tokens; the final LN and the classifier read the class token
    "class-attention": Style(classattn.Net, ({
        C.PATCH_EMBED: STEM, C.TOKENS: (N * D + D, 0),
        C.ATTN_QKV: (2 * QKV_P + 3 * LIN_P, 2 * qkv(N) + lin(1) + 2 * lin(N + 1)),
        C.ATTN_CORE: (0, 2 * core(N) + core(1, N + 1)),
        C.ATTN_PROJ: (3 * LIN_P, 2 * lin(N) + lin(1)),
        C.MLP: (3 * FF_P, 2 * ff(N) + ff(1)),
        C.NORM: (3 * 2 * LN_P + LN_P, 0), C.HEAD: OUT},), 3),
    # LN(48) on the raw tiles (2*48 params) and LN(D) after the embedding linear: norm, whole
    "norm-on-raw-tiles": Style(rawnorm.Net, ({
        **plain(), C.NORM: (2 * P + LN_P + 2 * 2 * LN_P + LN_P, 0)},), 2),
    "parallel": Style(parallel.Net, ({**plain(), C.NORM: (2 * LN_P + LN_P, 0)},), 2),
    # M = 8 latents (M*D params, tokens); cross block: q on 8 latents, k, v on 16 tiles,
    # products 2*8*16*D, output and feed-forward on 8, 3 LNs; then a block on the 8 latents
    "latents": Style(latents.Net, ({
        C.PATCH_EMBED: STEM, C.TOKENS: (N * D + latents.M * D, 0),
        C.ATTN_QKV: (3 * LIN_P + QKV_P, lin(latents.M) + 2 * lin(N) + qkv(latents.M)),
        C.ATTN_CORE: (0, core(latents.M, N) + core(latents.M)),
        C.ATTN_PROJ: (2 * LIN_P, 2 * lin(latents.M)),
        C.MLP: (2 * FF_P, 2 * ff(latents.M)),
        C.NORM: (3 * LN_P + 2 * LN_P + LN_P, 0), C.HEAD: OUT},), 2),
    # a causal block mask priced dense, as the README says: the plain breakdown
    "flex-mask-in-forward": Style(flex.Net, (plain(),), 2),
    # Conv3d with 2x4x4 tubes: 3*2*4*4*D + D params; 4/2 x 16 = 32 tokens of 96 values; no
    # position table
    "video-tubes": Style(video.Net, ({
        **plain(n=2 * N),
        C.PATCH_EMBED: (3 * 2 * 4 * 4 * D + D, 2 * N * 96 * D), C.TOKENS: (0, 0)},), 2,
        {"input_shape": (1, 3, video.T, 16, 16)}),
    # class token + 4 registers (5*D, tokens) joined to the 16 tiles: 21 tokens; the final LN
    # runs on all, the classifier on the class token
    "registers": Style(registers.Net, ({
        **plain(n=N + 1 + registers.R), C.TOKENS: (N * D + D + registers.R * D, 0)},), 2),
    # per head K^T V is (DH x n) @ (n x DH), Q (K^T V) (n x DH) @ (DH x DH): 2*n*D*DH in all
    "linear-attention": Style(linear.Net, ({**plain(), C.ATTN_CORE: (0, 2 * 2 * N * D * DH)},), 2),
    # no attention, no convolutional residual block: everything in other, with its warning;
    # token mixing Linear(16, 32), Linear(32, 16): 16*32 + 32 + 32*16 + 16 params, D*(2*16*32)
    # MACs; channel mixing an Ff on 16 tokens; two LNs per block; the stem and the classifier
    "mixer": Style(mixer.Net, ({C.OTHER: (
        STEM[0] + N * D + 2 * (2 * LN_P + N * mixer.S + mixer.S + mixer.S * N + N + FF_P)
        + LN_P + OUT[0],
        STEM[1] + 2 * (D * 2 * N * mixer.S + ff(N)) + OUT[1])},), 0, no_blocks=True),
    # Conv3d 1x4x4 on 2 frames: 2*16 positions; spatial stack: 2 blocks on 2 sequences of
    # 1 + 16 tokens; temporal stack: 1 block on 1 + 2 tokens; two class tokens (2*D)
    "factorized-space-time": Style(factorized.Net, ({
        C.PATCH_EMBED: (P * D + D, 2 * N * P * D), C.TOKENS: (2 * D, 0),
        C.ATTN_QKV: (3 * QKV_P, 2 * qkv(2 * 17) + qkv(3)),
        C.ATTN_CORE: (0, 2 * 2 * core(17) + core(3)),
        C.ATTN_PROJ: (3 * LIN_P, 2 * lin(2 * 17) + lin(3)),
        C.MLP: (3 * FF_P, 2 * ff(2 * 17) + ff(3)),
        C.NORM: (3 * 2 * LN_P + LN_P, 0), C.HEAD: OUT},), 3,
        {"input_shape": (1, 3, factorized.T, 16, 16)}),
    # 16 queries against 16 + 4 keys; the 2 x 4 x D memory of each block in attn_qkv or in
    # tokens (the issue accepts either)
    "memory-kv": Style(memory.Net, tuple(
        {**plain(), C.ATTN_CORE: (0, 2 * core(N, N + memory.M)),
         C.ATTN_QKV: (2 * QKV_P + extra, 2 * qkv(N)), C.TOKENS: (N * D + 2 * 2 * memory.M * D
                                                                 - extra, 0)}
        for extra in (2 * 2 * memory.M * D, 0)), 2),
    # a Linear(48, D) on the tiles, no position table; rotations are an element-wise product
    "complex-rotary": Style(rotary.Net, ({**plain(), C.TOKENS: (0, 0)},), 2),
    "rotary-autocast-off": Style(autocast.Net, ({**plain(), C.TOKENS: (0, 0)},), 2),
    # each block's unused LN(D): 2 x 64 more in norm, and named in a warning
    "norm-never-runs": Style(idle.Net, ({**plain(), C.NORM: (2 * 3 * LN_P + LN_P, 0)},), 2,
                             warned=lambda model: [unit.n3 for unit in model.u]),
    # the depthwise 3x3 (9*D + D) on the 4x4 map of D channels between the blocks: conv, and
    # the image keeps its 3 channels
    "first-conv-not-reached-first": Style(firstconv.Net, ({
        **plain(), C.CONV: (9 * D + D, N * D * 9)},), 2),
    # a Linear(48, D) embeds the tiles; the same depthwise 3x3 between the blocks: conv, and
    # the image still has 3 channels (nothing declared, the first conv reached wants D)
    "no-conv-reaches-the-image": Style(deepconv.Net, ({
        **plain(), C.CONV: (9 * D + D, N * D * 9)},), 2),
}

# the defects of today's main (the same under both namings), each to flip when issue 24 fixes it
DEFECTS = {
}
XFAIL = {(style, naming): reason for style, reason in DEFECTS.items()
         for naming in ("as-written", "neutral")}

NO_EVIDENCE = "placed without data-flow evidence"


def _case(style: str, naming: str) -> object:
    reason = XFAIL.get((style, naming))
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(style, naming, marks=marks, id=f"{style}-{naming}")


def _paths(model: nn.Module, modules: list[nn.Module]) -> list[str]:
    names = {id(module): name for name, module in model.named_modules()}
    return [names[id(module)] for module in modules]


def _breakdown(profile: Profile) -> Expected:
    return {c: (n.params, n.macs) for c, n in profile.components.items() if n.params or n.macs}


@pytest.mark.parametrize(("style", "naming"), [
    _case(style, naming) for style in STYLES for naming in ("as-written", "neutral")])
def test_a_strangers_model_is_placed_as_its_closed_form_says(style: str, naming: str) -> None:
    case = STYLES[style]
    torch.manual_seed(0)
    model = case.make()
    if naming == "neutral":
        neutral_names(model)
    warned = _paths(model, case.warned(model))
    profile = analyze(model, **case.inputs)  # type: ignore[arg-type]
    assert _breakdown(profile) in [{c: n for c, n in e.items() if n != (0, 0)}
                                   for e in case.expected]
    assert len(profile.blocks) == case.blocks
    assert profile.self_checks == ()
    # only the modules the style names are placed without data-flow evidence, and said to be
    assert all(any(path in w for path in warned) for w in profile.warnings if NO_EVIDENCE in w)
    assert all(any(path in w and NO_EVIDENCE in w for w in profile.warnings) for path in warned)
    assert any("no transformer blocks" in w for w in profile.warnings) == case.no_blocks
    assert profile.input_shape[1] == 3


ON_THE_CPU = {"rotary-autocast-off"}  # torch.autocast("meta") raises


@pytest.mark.parametrize("style", [style for style in STYLES if style != "flex-mask-in-forward"])
def test_the_closed_forms_add_up_to_the_oracles(style: str) -> None:
    """Each accepted breakdown sums to the unique parameter elements and to FlopCounterMode's
    MACs (FLOPs / 2) on meta: the arithmetic above is checked apart from vitprof. (flex_attention
    runs on no meta tensor and FlopCounterMode does not price it eagerly on the CPU; its closed
    form is ``plain()``, the sum checked on the other models of two plain blocks.) A model that
    cannot run on meta runs on the CPU, under the math SDPA kernel that FlopCounterMode prices."""
    case = STYLES[style]
    model = case.make().requires_grad_(False)
    device = "cpu" if style in ON_THE_CPU else "meta"
    shape = case.inputs.get("input_shape", (1, 3, 16, 16))
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model.to(device)(torch.zeros(shape, device=device))  # type: ignore[call-overload]
    oracle = (sum(p.numel() for p in model.parameters()), counter.get_total_flops() // 2)
    for expected in case.expected:
        params, macs = (sum(pair[i] for pair in expected.values()) for i in (0, 1))
        assert (params, macs) == oracle


def test_a_fused_attention_kernel_is_named_as_fused_by_its_kind() -> None:
    """The attention line reads the kind of the core's records (``attention``), not an op name:
    flex_attention's one record is a fused kernel, not "explicit matmuls" (main said
    ``explicit matmuls (torch.nn.attention.flex_attention)``)."""
    profile = analyze(flex.Net(), **STYLES["flex-mask-in-forward"].inputs)  # type: ignore[arg-type]
    assert profile.attention_implementation == f"fused {FLEX_ATTENTION}"
