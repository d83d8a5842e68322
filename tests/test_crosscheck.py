"""``vitprof crosscheck``: every peer's number against vitprof's, every difference explained.

The cause functions are checked on a tiny hand-written ViT whose counts are derived below by
arithmetic; the acceptance models are checked for a zero residual, peer by peer.

Tiny ViT, batch B = 2: image 8, patch 4 -> n = 4 patches, N = 5 tokens; width D = 8, 2 heads of
d = 4; MLP width M = 16; K = 3 classes. MACs:

* patch conv   B * n * (3 * 4 * 4) * D = 2 * 4 * 48 * 8 = 3_072
* in_proj      B * N * D * 3D          = 2 * 5 * 8 * 24 = 1_920
* attention    2 * B * N * N * D       = 2 * 2 * 5 * 5 * 8 = 800 (QK^T + AV)
* out_proj     B * N * D * D           = 2 * 5 * 8 * 8 = 640
* MLP          2 * B * N * D * M       = 2 * 2 * 5 * 8 * 16 = 2_560
* head         B * D * K               = 2 * 8 * 3 = 48
* total        3_072 + 1_920 + 800 + 640 + 2_560 + 48 = 9_040

Params: conv 3 * 16 * 8 + 8 = 392; class token 8; position embedding 5 * 8 = 40; two affine
LayerNorms 2 * 16 = 32; in_proj 8 * 24 + 24 = 216; out_proj 64 + 8 = 72; MLP 8 * 16 + 16 +
16 * 8 + 8 = 280; final LayerNorm without affine 0; head 8 * 3 + 3 = 27; total 1_067.
"""

from __future__ import annotations

import gc
import json
import re
import sys
import tomllib
import weakref
from functools import partial
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from vitprof import UserError, analyze
from vitprof.checks.crosscheck import PEERS, run_crosscheck
from vitprof.checks.crosscheck.causes import Cause, patch_causes, uncounted_causes
from vitprof.checks.crosscheck.peers import declared, names
from vitprof.checks.crosscheck.peers.calflops import run_calflops
from vitprof.checks.crosscheck.peers.deepspeed import run_deepspeed
from vitprof.checks.crosscheck.peers.flopcounter import run_flop_counter
from vitprof.checks.crosscheck.peers.fvcore import fvcore_norm_causes, run_fvcore
from vitprof.checks.crosscheck.peers.ptflops import (
    ptflops_aten_causes,
    ptflops_pytorch_causes,
    run_ptflops,
)
from vitprof.checks.crosscheck.peers.published import published_causes
from vitprof.checks.crosscheck.peers.torchinfo import run_torchinfo, torchinfo_causes
from vitprof.checks.crosscheck.run import TABLE
from vitprof.checks.crosscheck.table import peer_row
from vitprof.cli.main import main
from vitprof.core.records import Counts
from vitprof.count.session import Inputs, image_inputs
from vitprof.models.closed_form import ViTSpec, closed_form
from vitprof.models.zoo import Published
from vitprof.render.crosscheck import crosscheck_document
from vitprof.render.formats import render
from vitprof.workload import InputRequest, make_workload

ROOT = Path(__file__).resolve().parents[1]
BATCH = 2
ATTENTION_MACS = 800  # 2 * 2 * 5 * 5 * 8
MHA_MACS = 1_920 + 800 + 640  # in_proj + attention + out_proj = 3_360
TOTAL_MACS = 9_040
TOTAL_PARAMS = 1_067
# The optional peers (extra `peers`) and the package each one imports.
OPTIONAL = {"ptflops-pytorch": "ptflops", "ptflops-aten": "ptflops", "calflops": "calflops",
            "deepspeed": "deepspeed"}
INSTALLED = tuple(peer for peer, package in OPTIONAL.items() if find_spec(package))


def needs(package: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(find_spec(package) is None, reason=f"{package} is not installed")


class TinyBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(8)
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)
        self.ln_2 = nn.LayerNorm(8)
        self.mlp = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.ln_1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.ln_2(x))


class TinyViT(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.patch = nn.Conv2d(3, 8, kernel_size=4, stride=4)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, 8))
        self.pos_embed = nn.Parameter(torch.zeros(1, 5, 8))
        self.blocks = nn.ModuleList([TinyBlock()])
        self.norm = nn.LayerNorm(8, elementwise_affine=False)
        self.head = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x)[:, 0])


class StoredGelu(nn.Module):
    """GELU through a reference taken when the module is built (Hugging Face's GELUActivation)."""

    def __init__(self) -> None:
        super().__init__()
        self.act = nn.functional.gelu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(x)


class WeightsBlock(TinyBlock):
    """The tiny block with attention weights asked for (note 001's call) and a stored GELU."""

    def __init__(self) -> None:
        super().__init__()
        self.mlp[1] = StoredGelu()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.ln_1(x)
        x = x + self.attn(h, h, h)[0]  # need_weights=True: torch.bmm and F.softmax
        return x + self.mlp(self.ln_2(x))


class BiasedAttention(nn.Module):
    """SDPA with a learned bias of the scores as its mask (BEiT's relative position bias), 2
    heads of 4: with grad enabled the mask requires a gradient, so the CPU runs SDPA's math
    path (``bmm`` kernels, no SDPA kernel)."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(8, 24)
        self.bias = nn.Parameter(torch.zeros(2, 5, 5))
        self.proj = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, 2, 4).permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=self.bias)
        return self.proj(out.transpose(1, 2).reshape(b, n, 8))


class BiasedBlock(TinyBlock):
    """The tiny block with :class:`BiasedAttention`: the same MACs (its qkv is the in_proj, its
    proj the out_proj), 2 x 5 x 5 = 50 params more."""

    def __init__(self) -> None:
        super().__init__()
        self.attn = BiasedAttention()  # type: ignore[assignment]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


@pytest.fixture(scope="module")
def tiny() -> TinyViT:
    torch.manual_seed(0)
    return TinyViT()


@pytest.fixture(scope="module")
def tiny_profile(tiny: TinyViT):
    return analyze(tiny, image_size=8, batch_size=BATCH)


@pytest.fixture
def tiny_inputs() -> Inputs:
    return image_inputs(torch.randn(BATCH, 3, 8, 8))


def test_tiny_counts_match_the_arithmetic(tiny_profile) -> None:
    assert (tiny_profile.totals.params, tiny_profile.totals.macs) == (TOTAL_PARAMS, TOTAL_MACS)


# --------------------------------------------------------------------------- cause functions


def test_fvcore_does_not_count_sdpa(tiny, tiny_profile, tiny_inputs) -> None:
    run = run_fvcore(tiny, tiny_inputs)
    causes = uncounted_causes(tiny_profile, run.unsupported, "does not count", "::")
    assert [c.macs for c in causes] == [-ATTENTION_MACS]
    assert "aten::scaled_dot_product_attention" in causes[0].text


def test_fvcore_under_no_grad_misses_the_whole_mha_fast_path(
    tiny, tiny_profile, tiny_inputs
) -> None:
    run = run_fvcore(tiny, tiny_inputs, grad=False)
    causes = uncounted_causes(tiny_profile, run.unsupported, "does not count", "::")
    assert [c.macs for c in causes] == [-MHA_MACS]
    assert "_native_multi_head_attention" in causes[0].text


def test_fvcore_counts_layer_norm_at_5_or_4_per_element(tiny, tiny_profile, tiny_inputs) -> None:
    run = run_fvcore(tiny, tiny_inputs)
    # ln_1 and ln_2 have weights: 2 * (B * N * D = 80 elements) * 5 = 800;
    # the final norm has none: 80 * 4 = 320
    assert [c.macs for c in fvcore_norm_causes(tiny_profile, tiny, run.unsupported)] == [1_120]
    # fvcore's own total: every product except attention, plus the norms
    assert run.total == TOTAL_MACS - ATTENTION_MACS + 1_120


def test_torchinfo_rules_cause_by_cause(tiny, tiny_profile, tiny_inputs) -> None:
    run = run_torchinfo(tiny, tiny_inputs)
    amounts = {c.text.split(":")[0]: c.macs for c in torchinfo_causes(tiny_profile, run.layers,
                                                                       tiny)}
    assert list(amounts.values()) == [
        # mlp.0 and mlp.2 on (B, N, .) outputs: (B - B * N) * weight = (2 - 10) * 128, twice
        -2_048,
        # Linear biases x out[0]: mlp.0 2 * 16 + mlp.2 2 * 8 + head 2 * 3 = 54
        54,
        # conv bias x batch x positions: 8 * 2 * 4 = 64
        64,
        # LayerNorm weight and bias x out[0]: ln_1 and ln_2, 2 * 16 * 2 = 64
        64,
        # nn.MultiheadAttention runs in_proj, attention and out_proj functionally
        -MHA_MACS,
    ]
    assert "MultiheadAttention blindness" in list(amounts)[-1]
    # torchinfo's own total: conv 392 * 8 + LayerNorms 64 + mlp.0 144 * 2 + mlp.2 136 * 2
    # + head 27 * 2 = 3_136 + 64 + 288 + 272 + 54 = 3_814
    assert run.total_mult_adds == 3_814 == TOTAL_MACS + sum(amounts.values())
    assert run.total_params == TOTAL_PARAMS


def test_flop_counter_on_cpu_has_no_formula_for_the_cpu_attention_kernel(
    tiny, tiny_profile, tiny_inputs
) -> None:
    run = run_flop_counter(tiny, tiny_inputs)
    causes = uncounted_causes(tiny_profile, run.uncounted, "has no formula for")
    assert [c.macs for c in causes] == [-ATTENTION_MACS]
    assert "_scaled_dot_product_flash_attention_for_cpu" in causes[0].text
    assert run.total_flops == 2 * (TOTAL_MACS - ATTENTION_MACS)


def test_flop_counter_under_no_grad_misses_the_mha_fast_path(
    tiny, tiny_profile, tiny_inputs
) -> None:
    run = run_flop_counter(tiny, tiny_inputs, grad=False)
    causes = uncounted_causes(tiny_profile, run.uncounted, "has no formula for")
    assert [c.macs for c in causes] == [-MHA_MACS]
    assert run.total_flops == 2 * (TOTAL_MACS - MHA_MACS)


def test_flop_counter_on_meta_counts_every_product(tiny, tiny_profile) -> None:
    run = run_flop_counter(tiny, image_inputs(torch.empty(BATCH, 3, 8, 8, device="meta")))
    assert uncounted_causes(tiny_profile, run.uncounted, "has no formula for") == []
    assert run.total_flops == 2 * TOTAL_MACS


@needs("ptflops")
@pytest.mark.parametrize("grad", [True, False], ids=["grad", "no-grad"])
def test_ptflops_pytorch_rules_cause_by_cause(tiny, tiny_profile, tiny_inputs, grad: bool) -> None:
    run = run_ptflops(tiny, tiny_inputs, "pytorch", grad)
    causes = ptflops_pytorch_causes(tiny_profile, tiny, run)
    assert [c.macs for c in causes] == [
        # ln_1, ln_2 and norm: 3 * (B * N * D = 80) input elements, x1 (LayerNorm has no
        # `affine` attribute, so the BatchNorm rule's x2 never applies)
        240,
        # Linear biases x tokens: mlp.0 10 * 16 + mlp.2 10 * 8 + head 2 * 3 = 246
        246,
        # conv bias x batch x positions: 8 * 2 * 4 = 64
        64,
        # nn.GELU output elements: B * N * M = 2 * 5 * 16 = 160
        160,
        # MHA hook, per image: query scaling N * D = 40, in-projection bias 3 * N * D = 120,
        # softmax H * N * N = 50, out-projection bias N * D = 40; 250 * B = 500. The hook
        # reads shapes, so the fast path under no_grad changes nothing.
        500,
        # hook counts divided by B: (9_040 + 240 + 246 + 64 + 160 + 500) / 2 - 10_250 = -5_125
        -5_125,
        # the patched F.gelu, called inside nn.GELU, counts its 160 elements again, per batch
        160,
    ]
    assert run.macs == 5_285 == TOTAL_MACS + sum(c.macs for c in causes)
    assert "F.gelu" in causes[-1].text and "batch size 2" in causes[-2].text


@pytest.mark.parametrize(
    ("runner", "explain", "grad", "expected"),
    [
        # no formula for the CPU flash kernel: -800; bias elements of addmm: out_proj 10 * 8
        # + mlp.0 10 * 16 + mlp.2 10 * 8 + head 2 * 3 = 326, of the conv 8 * 2 * 4 = 64: +390
        pytest.param(lambda m, x, g: run_ptflops(m, x, "aten", g), ptflops_aten_causes, True,
                     [-ATTENTION_MACS, 390], marks=needs("ptflops"), id="ptflops-aten"),
        # the fast path kernel has no formula: -3_360, and out_proj's 80 bias elements are
        # inside it: 390 - 80 = 310
        pytest.param(lambda m, x, g: run_ptflops(m, x, "aten", g), ptflops_aten_causes, False,
                     [-MHA_MACS, 310], marks=needs("ptflops"), id="ptflops-aten-no-grad"),
        pytest.param(run_calflops, partial(patch_causes, peer="calflops",
                                           patches_attention=False),
                     True, [-ATTENTION_MACS], marks=needs("calflops"), id="calflops"),
        pytest.param(run_calflops, partial(patch_causes, peer="calflops",
                                           patches_attention=False),
                     False, [-MHA_MACS], marks=needs("calflops"), id="calflops-no-grad"),
        pytest.param(run_deepspeed, partial(patch_causes, peer="DeepSpeed",
                                            patches_attention=True),
                     True, [], marks=needs("deepspeed"), id="deepspeed"),
        pytest.param(run_deepspeed, partial(patch_causes, peer="DeepSpeed",
                                            patches_attention=True),
                     False, [-MHA_MACS], marks=needs("deepspeed"), id="deepspeed-no-grad"),
    ],
)
def test_patch_peers_miss_attention_and_the_fast_path(
    tiny, tiny_profile, tiny_inputs, runner, explain, grad: bool, expected: list[int]
) -> None:
    run = runner(tiny, tiny_inputs, grad)
    causes = explain(tiny_profile, tiny, run)
    assert [c.macs for c in causes] == expected
    assert run.macs == TOTAL_MACS + sum(expected)
    assert run.params == TOTAL_PARAMS
    if not grad:
        assert "fast path" in causes[0].text


@needs("calflops")
@needs("ptflops")
def test_attention_weights_path_and_a_stored_gelu(tiny_inputs) -> None:
    torch.manual_seed(0)
    model = TinyViT()
    model.blocks[0] = WeightsBlock()
    profile = analyze(model, image_size=8, batch_size=BATCH)
    causes = ptflops_pytorch_causes(profile, model, run_ptflops(model, tiny_inputs, "pytorch"))
    assert [c.macs for c in causes] == [
        240, 246, 64, 500,  # LayerNorm, Linear bias, conv bias, MHA hook, as on the tiny ViT
        # the patched torch.bmm inside the hooked MHA counts QK^T and AV again: 800
        ATTENTION_MACS,
        # F.softmax on B * H * N * N = 2 * 2 * 5 * 5 = 100 scores
        100,
        # hooks without an nn.GELU now: 9_040 + 240 + 246 + 64 + 500 = 10_090, halved: -5_045
        -5_045,
        # no F.gelu cause: the stored reference bypasses ptflops's patched F.gelu
    ]
    calflops = run_calflops(model, tiny_inputs)
    (cause,) = patch_causes(profile, model, calflops, peer="calflops", patches_attention=False)
    assert cause.macs == -ATTENTION_MACS and "torch.bmm, 2 calls" in cause.text


def test_every_peer_explains_sdpa_on_its_math_path() -> None:
    """With a mask that requires a gradient, the CPU computes SDPA with bmm kernels: calflops
    still misses the call (main left its 800 MACs unnamed, a residual of -800), and every
    peer's named causes sum to its difference."""
    torch.manual_seed(0)
    model = TinyViT()
    model.blocks[0] = BiasedBlock()
    check = run_crosscheck(model, InputRequest(image_size=8, batch_size=BATCH))
    assert (check.vitprof.macs, check.vitprof.params) == (TOTAL_MACS, TOTAL_PARAMS + 2 * 5 * 5)
    rows = {row.peer: row for row in check.rows}
    for row in rows.values():
        if row.macs is not None:
            _explained(row)
    if find_spec("calflops"):
        assert [c.macs for c in rows["calflops"].causes] == [-ATTENTION_MACS]


@needs("calflops")
def test_calflops_does_not_patch_the_matmul_operator() -> None:
    (row,) = run_crosscheck("note002_cifar_vit_tiny", peers=["calflops"]).rows
    # note 002's attention is `q @ k^T` and `attn @ v`: 12 blocks x 2 x 65^2 x 192 = 19_468_800
    assert [c.macs for c in row.causes] == [-19_468_800]
    assert "Tensor.__matmul__" in row.causes[0].text and row.residual_macs == 0


@needs("calflops")
@needs("ptflops")
def test_rows_with_grad_say_what_the_fast_path_would_hide(tiny) -> None:
    calflops, ptflops = run_crosscheck(tiny, InputRequest(image_size=8, batch_size=BATCH),
                                       peers=["ptflops-pytorch", "calflops"]).rows[::-1]
    # all of nn.MultiheadAttention: in_proj 1_920 + attention 800 + out_proj 640 = 3_360
    assert "fast path hides all 3,360 MACs" in calflops.note
    assert "does not patch F.scaled_dot_product_attention" in calflops.causes[0].text
    # ptflops's MHA hook computes from shapes: the fast path hides nothing from it
    assert ptflops.note == "run in eval mode, grad enabled"


def test_fvcore_and_the_cpu_flop_counter_say_what_the_fast_path_would_hide(tiny) -> None:
    rows = {row.peer: row for row in run_crosscheck(
        tiny, InputRequest(image_size=8, batch_size=BATCH),
        peers=["fvcore", "flopcounter-meta", "flopcounter-cpu"]).rows}
    # all of nn.MultiheadAttention: in_proj 1_920 + attention 800 + out_proj 640 = 3_360
    for peer in ("fvcore", "flopcounter-cpu"):
        assert rows[peer].note.startswith("run in eval mode, grad enabled; under "
                                          "torch.no_grad() the nn.MultiheadAttention fast "
                                          f"path hides all 3,360 MACs of its modules from {peer}")
    assert "no_grad" not in rows["flopcounter-meta"].note  # no fast path on meta


@pytest.mark.parametrize(
    "runner",
    [
        pytest.param(run_fvcore, id="fvcore"),
        pytest.param(run_torchinfo, id="torchinfo"),
        pytest.param(run_flop_counter, id="flopcounter-cpu"),
        pytest.param(partial(run_ptflops, backend="pytorch"), marks=needs("ptflops"),
                     id="ptflops-pytorch"),
        pytest.param(partial(run_ptflops, backend="aten"), marks=needs("ptflops"),
                     id="ptflops-aten"),
        pytest.param(run_calflops, marks=needs("calflops"), id="calflops"),
        pytest.param(run_deepspeed, marks=needs("deepspeed"), id="deepspeed"),
    ],
)
def test_a_peer_keeps_nothing_of_the_model(runner, tiny_inputs) -> None:
    """After a peer's run nothing reachable refers to the model: calflops kept every model for
    good (it keeps each function it patched, among them the call log's wrappers)."""
    model = TinyViT()
    alive = weakref.ref(model)
    runner(model, tiny_inputs)
    del model
    gc.collect()
    assert alive() is None


# A factory for a model built anew at each cross-check: conv 3 -> 8 on 4 x 4 patches of an
# 8 x 8 image (2 x 2 = 4 patches), then a GELU and a linear head on the 8 * 4 = 32 features.
FRESH_MODEL_PY = """
from torch import nn


def make():
    return nn.Sequential(nn.Conv2d(3, 8, kernel_size=4, stride=4), nn.GELU(), nn.Flatten(),
                         nn.Linear(32, 3))
"""


def _live(kind: type) -> int:
    """How many objects of ``kind`` the garbage collector tracks (alive or not yet collected)."""
    return sum(issubclass(type(o), kind) for o in gc.get_objects())


def test_repeated_crosschecks_keep_no_model(tmp_path: Path) -> None:
    """Every peer runs on a CPU model built for the cross-check: none is left when it returns,
    even with the automatic garbage collector off (calflops kept each one: +340 MB per call of
    vit_b_32; ptflops's and torchinfo's reference cycles held it until the collector's next
    full pass). The first call imports the peers and fills their caches; three more leave as
    many modules and tensors as it did."""
    factory = tmp_path / "fresh.py"
    factory.write_text(FRESH_MODEL_PY)

    def check() -> None:
        rows = run_crosscheck(f"{factory}:make", InputRequest(image_size=8)).rows
        assert [row.peer for row in rows] == list(PEERS)

    check()
    gc.collect()
    before = _live(nn.Module), _live(torch.Tensor)
    gc.disable()
    try:
        for _ in range(3):
            check()
        assert (_live(nn.Module), _live(torch.Tensor)) == before
    finally:
        gc.enable()


@pytest.mark.parametrize(
    ("peer", "module"),
    [
        pytest.param("ptflops-pytorch", "ptflops", id="ptflops-pytorch"),
        pytest.param("ptflops-aten", "ptflops", id="ptflops-aten"),
        pytest.param("calflops", "calflops", id="calflops"),
        pytest.param("deepspeed", "deepspeed.profiling.flops_profiler", id="deepspeed"),
    ],
)
def test_missing_optional_peer_is_a_one_line_row(
    tiny, peer: str, module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # importing it now raises ImportError
    (row,) = run_crosscheck(tiny, InputRequest(image_size=8), peers=[peer]).rows
    package = module.split(".")[0]
    assert (row.macs, row.note) == (None, f"{package} not installed: pip install vitprof[peers]")


@pytest.mark.parametrize(
    ("gmacs", "residual"),
    [
        # 9_040 MACs printed with 6 decimals (steps of 1_000 MACs) is 0.000009 G
        pytest.param(0.000009, 0, id="rounded"),
        # 0.000008 G is 8_000 MACs: 1_000 below the rounded 9_000, left as the residual
        pytest.param(0.000008, -1_000, id="wrong-figure"),
    ],
)
def test_published_figure_is_the_rounded_count(tiny_profile, gmacs: float, residual: int) -> None:
    published = Published("test", TOTAL_PARAMS, gmacs)
    causes = published_causes(tiny_profile, published)
    assert [c.macs for c in causes] == [9_000 - 9_040]
    row = peer_row("published", gmacs, "GMACs", round(gmacs * 1e9), published.params,
                   tiny_profile.totals, causes)
    assert (row.residual_macs, row.residual_params) == (residual, 0)


def test_residual_is_what_the_causes_leave() -> None:
    vitprof = Counts(params=100, macs=1_000)
    row = peer_row("peer", 900, "MACs", 900, 101, vitprof,
                   [Cause("misses a", -70), Cause("adds a param", params=1)])
    # delta 900 - 1_000 = -100, causes -70: residual -30; params 101 - 100 - 1 = 0
    assert (row.delta_macs, row.residual_macs, row.residual_params) == (-100, -30, 0)


def test_module_on_meta_runs_torchinfo_and_says_why_fvcore_cannot() -> None:
    with torch.device("meta"):
        model = TinyViT()
    check = run_crosscheck(model, InputRequest(image_size=8, batch_size=BATCH),
                           peers=["fvcore", "torchinfo", "flopcounter-cpu"])
    fvcore, torchinfo, cpu = check.rows
    assert fvcore.macs is None and "meta device" in fvcore.note
    assert torchinfo.macs == 3_814 and torchinfo.residual_macs == 0
    assert cpu.macs is None and "weights" in cpu.note


def test_closed_form_row_says_when_no_spec_describes_the_model(tiny) -> None:
    (row,) = run_crosscheck(tiny, InputRequest(image_size=8), peers=["closed-form"]).rows
    assert row.macs is None and "closed form does not describe" in row.note


def test_closed_form_row_of_a_non_square_image() -> None:
    pytest.importorskip("timm")
    # ViT-S/16 at 224 x 320: 14 x 20 patches + 1 class token = 281 tokens, the closed form's
    (row,) = run_crosscheck("timm:vit_small_patch16_224", InputRequest(image_size=(224, 320)),
                            peers=["closed-form"]).rows
    spec = ViTSpec((224, 320), 16, 384, 12, 6, 1536)
    assert spec.num_patches + 1 == 281
    totals = closed_form(spec).totals
    assert (row.macs, row.params) == (totals.macs, totals.params)
    assert row.residual_macs == 0 and row.residual_params == 0


def test_unknown_peer_is_a_user_error() -> None:
    with pytest.raises(UserError, match="unknown peer 'thop'"):
        run_crosscheck("note002_cifar_vit_tiny", peers=["thop"])


def test_named_peers_run_once_each_in_table_order(tiny) -> None:
    """The names are resolved to peers once (resolving the resolved peers again called each one
    unknown): asked for in any order, the rows follow :data:`PEERS`."""
    check = run_crosscheck(tiny, InputRequest(image_size=8), peers=["torchinfo", "closed-form"])
    assert [row.peer for row in check.rows] == ["closed-form", "torchinfo"]


# --------------------------------------------------------------------------- acceptance

TORCHVISION = ["vit_b_16", "vit_b_32", "vit_l_16", "vit_l_32", "vit_h_14"]
# Real CPU forwards of a ViT-B or larger take more than a few seconds each.
FAST = {"timm:vit_tiny_patch16_224", "timm:deit_tiny_patch16_224",
        "timm:deit_tiny_distilled_patch16_224", "note002_cifar_vit",
        "note002_linear_attention", "note002_dynamic_vit", "note002_cifar_vit_tiny"}
ACCEPTANCE = [
    *TORCHVISION,
    "timm:vit_tiny_patch16_224", "timm:deit_tiny_patch16_224", "timm:deit_small_patch16_224",
    "timm:deit_tiny_distilled_patch16_224",
    "hf:vit-base-patch16-224",
    "note001_vit_b16",
    "note002_cifar_vit", "note002_linear_attention", "note002_dynamic_vit",
    "note002_cifar_vit_tiny", "note002_cifar_vit_small", "note002_cifar_vit_base",
    "note002_cifar_vit_large",
    "note004_vit_b16",
]
ALWAYS_RUN = ("closed-form", "fvcore", "torchinfo", "flopcounter-meta", "flopcounter-cpu",
              *INSTALLED)
# Larger builds of the class of another acceptance model, their twin: the same code at other
# sizes (test_each_twin_builds_the_same_class), with the same causes. Their peers' CPU forwards
# take minutes (vit_h_14: six forwards of 167 GMACs on 2.5 GB of weights, 4 GB of memory in
# all), so every run checks their peers that run nothing on the CPU and their twin's CPU peers;
# -m exhaustive checks every peer on them too.
TWINS = {
    "vit_l_16": "vit_b_16", "vit_l_32": "vit_b_32", "vit_h_14": "vit_b_16",
    # the same timm VisionTransformer at twice the width (384, 6 heads; 4x the MACs)
    "timm:deit_small_patch16_224": "timm:vit_tiny_patch16_224",
    "note002_cifar_vit_small": "note002_cifar_vit_tiny",
    "note002_cifar_vit_base": "note002_cifar_vit_tiny",
    "note002_cifar_vit_large": "note002_cifar_vit_tiny",
}
# Under no_grad vit_b_16 runs the same torchvision code as vit_b_32 (the nn.MultiheadAttention
# fast path, the same causes) at 4x the MACs.
NO_GRAD_TWINS = {**TWINS, "vit_b_16": "vit_b_32"}
META_PEERS = ("closed-form", "flopcounter-meta", "published")  # nothing run on the CPU


def _acceptance(twins: dict[str, str]) -> list[Any]:
    """ACCEPTANCE, the models with a twin in ``twins`` marked exhaustive, the others slow
    unless FAST."""
    def marks(name: str) -> tuple[pytest.MarkDecorator, ...]:
        if name in twins:
            return (pytest.mark.slow, pytest.mark.exhaustive)
        return () if name in FAST else (pytest.mark.slow,)

    return [pytest.param(name, marks=marks(name)) for name in ACCEPTANCE]


def _explained(row) -> None:
    assert row.macs is not None, f"{row.peer}: {row.note}"
    assert (row.residual_macs, row.residual_params) in ((0, 0), (0, None)), row.peer
    assert sum(c.macs for c in row.causes) == row.delta_macs


def _assert_explained(name: str, rows: dict[str, Any]) -> None:
    """Each row of ``rows`` (peer -> row) explained to the last MAC: those ALWAYS_RUN names
    have a number, and every row with a number (torchprofile and torchscan where installed)
    has named causes that sum to its difference; the published row: exact for a torchvision
    ViT, absent for the others."""
    for peer in ALWAYS_RUN:
        if peer in rows:
            assert rows[peer].macs is not None, f"{peer}: {rows[peer].note}"
    for row in rows.values():
        if row.macs is not None:
            _explained(row)
    published = rows["published"]
    if name in TORCHVISION:
        assert (published.residual_macs, published.residual_params) == (0, 0)
    else:
        assert published.macs is None and "no published figure" in published.note


@pytest.mark.parametrize("name", _acceptance(TWINS))
def test_every_difference_is_explained(name: str, crosscheck_of) -> None:
    rows = {row.peer: row for row in crosscheck_of(name).rows}
    assert list(rows) == list(PEERS)
    _assert_explained(name, rows)


@pytest.mark.parametrize("name", TWINS)
def test_every_difference_of_the_meta_peers_is_explained(name: str) -> None:
    """The twin of test_every_difference_is_explained for the models of TWINS, in every run:
    the peers that run nothing on the CPU on the model itself (their twin runs the others)."""
    rows = {row.peer: row for row in run_crosscheck(name, peers=META_PEERS).rows}
    assert list(rows) == list(META_PEERS)
    _assert_explained(name, rows)


@pytest.mark.parametrize(("name", "twin"), NO_GRAD_TWINS.items())
def test_each_twin_builds_the_same_class(name: str, twin: str) -> None:
    assert type(make_workload(name, device="meta").module) is type(
        make_workload(twin, device="meta").module)


@pytest.mark.skipif(not INSTALLED, reason="no optional peer is installed")
@pytest.mark.parametrize("name", _acceptance(NO_GRAD_TWINS))
def test_every_difference_is_explained_under_no_grad(name: str) -> None:
    for row in run_crosscheck(name, peers=[*INSTALLED, "fvcore", "flopcounter-cpu"],
                              grad=False).rows:
        _explained(row)
        assert "torch.no_grad()" in row.note or row.peer in ("fvcore", "flopcounter-cpu")


@pytest.mark.slow
def test_vit_b_16_causes_have_their_closed_form_amounts(crosscheck_of) -> None:
    rows = {row.peer: row for row in crosscheck_of("vit_b_16").rows}
    # 12 layers of QK^T + AV: 12 * 2 * 197 * 197 * 768 = 715_327_488
    attention = 715_327_488
    assert [c.macs for c in rows["fvcore"].causes] == [
        -attention,
        # 25 LayerNorms on 197 x 768 elements at 5 each: 25 * 197 * 768 * 5 = 18_912_000
        18_912_000,
    ]
    assert [c.macs for c in rows["flopcounter-cpu"].causes] == [-attention]
    assert rows["flopcounter-meta"].causes == []
    torchinfo = [c.macs for c in rows["torchinfo"].causes]
    # MLP linears on (1, 197, .): (1 - 197) * 768 * 3072 * 2 linears * 12 blocks
    assert torchinfo[0] == -196 * 768 * 3072 * 2 * 12 == -11_098_128_384
    # in_proj 197 * 768 * 2304 + out_proj 197 * 768 * 768, 12 blocks, plus attention
    assert torchinfo[-1] == -(12 * (197 * 768 * 2304 + 197 * 768 * 768) + attention)
    # published _ops 17.564 is 17_563_828_224 MACs rounded to 3 decimals of a G
    assert [c.macs for c in rows["published"].causes] == [17_564_000_000 - 17_563_828_224]
    if "ptflops-pytorch" in INSTALLED:
        ptflops = rows["ptflops-pytorch"]
        assert [c.macs for c in ptflops.causes] == [
            25 * 197 * 768,  # LayerNorm input elements: 3_782_400
            12 * 197 * (3072 + 768) + 1000,  # Linear bias elements, head included: 9_078_760
            196 * 768,  # patch convolution bias elements: 150_528
            12 * 197 * 3072,  # nn.GELU output elements: 7_262_208
            # MHA query scaling N * D, in-projection bias 3 * N * D, out-projection bias N * D
            # and softmax H * N^2: 12 * (5 * 197 * 768 + 12 * 197 * 197) = 14_666_256
            12 * (5 * 197 * 768 + 12 * 197 * 197),
            12 * 197 * 3072,  # F.gelu again: 7_262_208
        ]
        # the +42,202,360 of reports/benchmark.md: 17_606_030_584 - 17_563_828_224
        assert ptflops.delta_macs == 42_202_360 and ptflops.residual_macs == 0


# --------------------------------------------------------------------------- command line

CLI_CASES = [
    pytest.param(["note002_cifar_vit_tiny", "--peers", "fvcore,torchinfo"], "residual MACs",
                 id="table"),
    pytest.param(["note002_cifar_vit_tiny", "--peers", "torchinfo", "--format", "markdown"],
                 "| peer |", id="markdown"),
    pytest.param(["note002_cifar_vit_tiny", "--peers", "flopcounter-meta", "--format", "json",
                  "--batch-size", "2"], '"peer": "flopcounter-meta"', id="json"),
    pytest.param(["note002_cifar_vit_tiny", "--peers", "ptflops-aten", "--no-grad"],
                 "run in eval mode, under torch.no_grad()", id="no-grad", marks=needs("ptflops")),
]


@pytest.mark.parametrize(("argv", "expected"), CLI_CASES)
def test_cli_formats(argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["crosscheck", *argv]) == 0
    out = capsys.readouterr().out
    assert expected in out
    assert "convention" in out


def test_cli_json_rows_have_zero_residuals(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["crosscheck", "note002_cifar_vit_tiny", "--format", "json",
                 "--peers", "torchinfo,published"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [(r["peer"], r["residual_macs"]) for r in data["rows"]] == [
        ("torchinfo", 0), ("published", None)
    ]
    assert data["vitprof"]["macs"] == data["rows"][0]["macs"] - data["rows"][0]["delta_macs"]


def test_cli_writes_output_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "cc.md"
    assert main(["crosscheck", "note002_cifar_vit_tiny", "--peers", "torchinfo",
                 "--format", "markdown", "--output", str(target)]) == 0
    assert capsys.readouterr().out == ""
    assert "**torchinfo**" in target.read_text()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["vit_b_61"], "vitprof: error: unknown model 'vit_b_61'", id="bad-model"),
        pytest.param(["vit_b_16", "--image-size", "225"],
                     "vitprof: error: building vit_b_16 at image size 225 failed: "
                     "AssertionError: Input shape indivisible by patch size!",
                     id="size-the-model-refuses"),
        pytest.param(["note002_cifar_vit_tiny", "--peers", "fvcore,thop"],
                     "vitprof: error: unknown peer 'thop'", id="bad-peer"),
    ],
)
def test_cli_user_errors_are_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["crosscheck", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message)
    assert err.count("\n") == 1


def test_render_rejects_unknown_format() -> None:
    check = run_crosscheck("note002_cifar_vit_tiny", peers=["published"])
    with pytest.raises(ValueError, match="unknown format"):
        render(crosscheck_document(check), "yaml")


def test_peer_choices_name_every_row_of_the_peer_table() -> None:
    """The peers `vitprof crosscheck --help` lists without importing torch, read from the peer
    modules' sources, are the rows of the peer table, in its order: a module whose PEERS a
    reader of its source would miss fails here."""
    assert tuple(peer.name for peer in TABLE) == names() == PEERS
    assert len(set(names())) == len(names())


@pytest.mark.parametrize(
    "source",
    [
        pytest.param("PEERS = (Peer('a', 'MACs', f),)\n", id="no-rank"),
        pytest.param("RANK = 5\nPEERS = [Peer('a', 'MACs', f)]\n", id="a-list"),
        pytest.param("RANK = 5\nPEERS = (Peer(NAME, 'MACs', f),)\n", id="a-name-not-literal"),
        pytest.param("RANK = 5\nPEERS = (Peer(name='a', unit='MACs', build=f),)\n",
                     id="a-keyword-name"),
    ],
)
def test_a_peer_module_that_hides_its_names_is_refused(source: str) -> None:
    with pytest.raises(ValueError, match=r"RANK|string literal"):
        declared(source)


def test_a_peer_module_declares_its_rank_and_names() -> None:
    source = "RANK = 45\nPEERS = (Peer('a', 'MACs', f), Peer('b', UNIT, partial(g, x=1)))\n"
    assert declared(source) == (45, ("a", "b"))


def test_each_peer_extra_installs_its_package() -> None:
    """An optional peer's extras are those of pyproject.toml that list its package (named as
    the peer, up to a backend), and the ``peers`` extra lists the optional peers' packages only:
    that extra is the one registry line a new optional peer adds."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    optional = {peer.name.partition("-")[0]: set(peer.extras) for peer in TABLE if peer.extras}
    for package, wanted in optional.items():
        listing = {name for name, packages in extras.items()
                   if any(re.split("[<>=!~ ]", p)[0] == package for p in packages)}
        assert listing == wanted, package
    assert {re.split("[<>=!~ ]", p)[0] for p in extras["peers"]} == set(optional)


def test_a_peer_no_extra_lists_is_installed_by_its_own_package() -> None:
    """A new peer is one file: where no extra of vitprof lists its package, it names the
    package, is optional (off the model pages, which ``report --check`` regenerates), and a
    missing package says how to install it in one line."""
    from vitprof.checks.crosscheck.harness import not_installed
    from vitprof.checks.crosscheck.subject import Peer
    from vitprof.study.page_inputs import PAGE_PEERS

    alone = Peer("alone", "MACs", lambda subject, peer: None, package="alone")
    assert alone.optional and not Peer("built-in", "MACs", alone.build).optional
    assert str(not_installed("alone")) == "alone not installed: pip install alone"
    assert str(not_installed("ptflops", "peers")) == (
        "ptflops not installed: pip install vitprof[peers]")
    assert not [peer.name for peer in TABLE if peer.package and peer.name in PAGE_PEERS]


# ------------------------------------------------------------------------- the whole example

RUN_PEERS = ("fvcore", "torchinfo", "flopcounter-cpu", "ptflops-pytorch", "ptflops-aten",
             "calflops")  # the installed peers that run the model on the CPU


class KeywordViT(nn.Module):
    """The tiny ViT called as ``model(pixel_values=x)``: its forward takes the image by keyword
    only (a Hugging Face model's call), so a peer handed one positional tensor fails."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.vit = TinyViT()

    def forward(self, *, pixel_values: torch.Tensor) -> torch.Tensor:
        return self.vit(pixel_values)


class TwoImageViT(KeywordViT):
    """``model(x, *more)``: the tiny ViT on the sum of its positional images."""

    def forward(self, x: torch.Tensor, *more: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return self.vit(x + sum(more))


class ScaledViT(KeywordViT):
    """``model(pixel_values, scale=2.0)``: a keyword that is no tensor."""

    def forward(self, pixel_values: torch.Tensor, scale: float = 1.0) -> torch.Tensor:  # type: ignore[override]
        return self.vit(pixel_values * scale)


@needs("calflops")
@needs("ptflops")
def test_every_peer_runs_a_keyword_input(tiny) -> None:
    """Each peer that runs the model is given the whole example, the keyword pixel_values
    included, and counts what it counts on the positional tiny ViT, every difference explained
    (before, each one got the tensor positionally and could not run)."""
    image = torch.zeros(BATCH, 3, 8, 8)
    keyword = run_crosscheck(KeywordViT(), InputRequest(inputs={"pixel_values": image}),
                             peers=RUN_PEERS)
    positional = run_crosscheck(tiny, InputRequest(image_size=8, batch_size=BATCH), peers=RUN_PEERS)
    assert keyword.vitprof.macs == positional.vitprof.macs == TOTAL_MACS
    for row, twin in zip(keyword.rows, positional.rows, strict=True):
        assert row.macs is not None and twin.macs is not None, row.note
        assert (row.peer, row.residual_macs) == (twin.peer, 0)
        # ptflops's batch counter reads the first positional input: with keywords only it
        # divides its hook counts by 1, not by BATCH, so its twin's division cause is gone
        divided = [c.macs for c in twin.causes if c.text.startswith("divides module-hook")]
        assert row.macs == twin.macs - sum(divided)
        assert bool(divided) == (row.peer == "ptflops-pytorch")


@needs("calflops")
@needs("ptflops")
def test_a_peer_that_cannot_take_the_inputs_says_so_in_its_row() -> None:
    """ptflops calls model(x) or model(**inputs): two positional images through ``*more``
    cannot be named; calflops moves every input with .to(device): a float cannot be moved.
    The other peers run both."""
    image = torch.zeros(BATCH, 3, 8, 8)
    two = {row.peer: row for row in run_crosscheck(TwoImageViT(),
                                                   InputRequest(inputs=(image, image)),
                                                   peers=RUN_PEERS).rows}
    for name in ("ptflops-pytorch", "ptflops-aten"):
        assert two[name].macs is None
        assert two[name].note == ("ptflops calls model(x) or model(**inputs), and this forward "
                                  "takes more positionally only")
    scaled = {row.peer: row for row in run_crosscheck(
        ScaledViT(), InputRequest(inputs=((image,), {"scale": 2.0})), peers=RUN_PEERS).rows}
    assert scaled["calflops"].macs is None
    assert scaled["calflops"].note == ("calflops moves every input with .to(device), and this "
                                       "forward takes a float")
    ran = [*(two[p] for p in RUN_PEERS if not p.startswith("ptflops")),
           *(scaled[p] for p in RUN_PEERS if p != "calflops")]
    assert all(row.macs is not None and row.residual_macs == 0 for row in ran)


# ------------------------------------------------------------------------------ torchscan


@needs("torchscan")
def test_torchscan_has_no_rule_for_multihead_attention(tiny) -> None:
    """nn.MultiheadAttention is a metric leaf to torchscan with no MAC rule: in_proj 1_920 +
    attention 800 + out_proj 640 = 3_360 lost; the conv and linears are its products."""
    (row,) = run_crosscheck(tiny, InputRequest(image_size=8, batch_size=BATCH),
                            peers=["torchscan"]).rows
    assert row.macs == TOTAL_MACS - MHA_MACS == 5_680  # 9_040 - 3_360
    assert [c.macs for c in row.causes] == [-MHA_MACS]
    assert "inside MultiheadAttention" in row.causes[0].text
    assert (row.residual_macs, row.params) == (0, TOTAL_PARAMS)
    assert row.note.endswith("for GELU, LayerNorm, MultiheadAttention")  # its leaves
    image = torch.zeros(BATCH, 3, 8, 8)  # the keyword call gives it the same
    (keyword,) = run_crosscheck(KeywordViT(), InputRequest(inputs={"pixel_values": image}),
                                peers=["torchscan"]).rows
    assert (keyword.macs, keyword.residual_macs) == (row.macs, 0)


@needs("torchscan")
def test_torchscan_counts_batch_norm_and_pooling_as_macs() -> None:
    """Batch 2, image 8: conv 3 -> 8, kernel 4, stride 4: out (2, 8, 2, 2), 64 outputs x 48 =
    3_072 MACs; eval BatchNorm2d with affine: 64 elements x 2 = 128; adaptive average pool to 1:
    16 outputs x (4 - 1 + 2) = 80; linear 2 x 8 x 3 = 48. vitprof: 3_072 + 48 = 3_120 MACs;
    torchscan 3_120 + 128 + 80 = 3_328."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 4, stride=4), nn.BatchNorm2d(8),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 3))
    check = run_crosscheck(model, InputRequest(image_size=8, batch_size=BATCH), peers=["torchscan"])
    (row,) = check.rows
    assert (check.vitprof.macs, row.macs) == (3_120, 3_328)
    assert {c.text: c.macs for c in row.causes} == {
        "counts AdaptiveAvgPool2d as MACs (its AdaptiveAvgPool2d rule)": 80,
        "counts BatchNorm2d as MACs (its BatchNorm2d rule)": 128}
    assert row.residual_macs == 0


class _Sampled(nn.Module):
    """A 1x1 conv (3 -> 4 channels) on an 8x8 image, the map sampled bilinearly at a learned
    (1, 2, 2, 2) grid: 4 channels x 2 x 2 = 16 outputs."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 1)
        self.grid = nn.Parameter(torch.zeros(1, 2, 2, 2))

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return F.grid_sample(self.conv(image), self.grid, align_corners=False)


def test_grid_sampling_is_explained_to_fvcore_and_the_flop_counter() -> None:
    rows = {row.peer: row for row in run_crosscheck(_Sampled(),
                                                    InputRequest(image_size=8, batch_size=1),
                                                    peers=["fvcore", "flopcounter-meta"]).rows}
    # vitprof: the conv's 64 outputs x 3 = 192 MACs; the sampling is vector work. fvcore counts
    # it as 4 per output element: 4 x 16 = 64, the one cause; FlopCounterMode counts none
    assert [(c.text.split(" (")[0], c.macs) for c in rows["fvcore"].causes] == [
        ("counts grid_sampler as 4 flops per output element", 4 * 16)]
    assert rows["fvcore"].residual_macs == rows["flopcounter-meta"].residual_macs == 0
    assert rows["flopcounter-meta"].macs == 8 * 8 * 4 * 3  # 192
