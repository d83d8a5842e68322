"""Formulas, priced one op at a time on meta tensors; unsupported ops are reported."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import vitprof
from vitprof import Component as C
from vitprof import UserError, analyze
from vitprof.core.records import Cost
from vitprof.count.counter import OpCounter
from vitprof.count.formulas import FORMULAS, FREE_OPS, arguments, aten, numel, register
from vitprof.count.formulas.forward import convolution_cost
from vitprof.count.formulas.table import replace_cost_table

DOCS = Path(__file__).resolve().parents[1] / "docs" / "formulas.md"


def priced(fn, *tensors: torch.Tensor) -> tuple[int, int, dict[str, int]]:
    """(MACs, vector FLOPs, unsupported) of running ``fn`` on meta copies of ``tensors``."""
    counter = OpCounter(nn.Identity(), {})
    with counter.running():
        fn(*[t.to("meta") for t in tensors])
    records = counter.records()
    return sum(r.macs for r in records), sum(r.vector_flops for r in records), dict(
        counter.unsupported
    )


def test_linear_on_three_dims_counts_every_token() -> None:
    x, w, b = torch.empty(2, 197, 768), torch.empty(3072, 768), torch.empty(3072)
    # 2 * 197 * 768 * 3072 MACs = 929_562_624; bias add 2 * 197 * 3072 = 1_210_368
    assert priced(F.linear, x, w, b) == (2 * 197 * 768 * 3072, 2 * 197 * 3072, {})


def test_bmm_and_matmul() -> None:
    a, b = torch.empty(12, 197, 64), torch.empty(12, 64, 197)
    assert priced(torch.bmm, a, b)[0] == 12 * 197 * 64 * 197  # 29_805_312
    q, k = torch.empty(2, 3, 5, 8), torch.empty(2, 3, 8, 7)
    assert priced(torch.matmul, q, k)[0] == 2 * 3 * 5 * 8 * 7  # 1_680


def test_baddbmm_scaling_and_add_are_vector_work() -> None:
    c, a, b = torch.empty(4, 5, 6), torch.empty(4, 5, 3), torch.empty(4, 3, 6)
    # 4*5*3*6 = 360 MACs; beta*c add 4*5*6 = 120, alpha scaling another 120
    assert priced(lambda c, a, b: torch.baddbmm(c, a, b, alpha=0.5), c, a, b)[:2] == (360, 240)


def test_a_scatter_sum_adds_each_source_element_once() -> None:
    into, src = torch.empty(2, 9, 16), torch.empty(2, 5, 16)
    index = torch.zeros(2, 5, 16, dtype=torch.long)
    # ToMe's merge: 2 * 5 * 16 = 160 source elements, each added into a destination of 2 * 9 * 16
    assert priced(lambda d, i, s: d.scatter_add(1, i, s), into, index, src) == (0, 160, {})
    # index_add of 3 rows of 16 into a 9 x 16 table: 3 * 16 = 48 adds
    rows, where = torch.empty(3, 16), torch.zeros(3, dtype=torch.long)
    assert priced(lambda d, i, s: d.index_add(0, i, s), into[0], where, rows) == (0, 48, {})


def test_patch_convolution() -> None:
    x, w, b = torch.empty(1, 3, 224, 224), torch.empty(768, 3, 16, 16), torch.empty(768)
    conv = lambda x, w, b: F.conv2d(x, w, b, stride=16)  # noqa: E731
    # 196 outputs x 768 channels x 3*16*16 = 115_605_504 MACs; bias 196 * 768 = 150_528
    assert priced(conv, x, w, b)[:2] == (115_605_504, 150_528)


def test_grouped_convolution() -> None:
    x, w = torch.empty(1, 8, 10, 10), torch.empty(8, 2, 3, 3)
    conv = lambda x, w: F.conv2d(x, w, groups=4, padding=1)  # noqa: E731
    # 8 * 10 * 10 outputs x (8 / 4 = 2) inputs x 3*3 = 14_400
    assert priced(conv, x, w)[:2] == (14_400, 0)


def test_scaled_dot_product_attention_is_one_op() -> None:
    q, k, v = torch.empty(2, 4, 10, 16), torch.empty(2, 4, 12, 16), torch.empty(2, 4, 12, 32)
    macs, vector, unsupported = priced(F.scaled_dot_product_attention, q, k, v)
    # QK^T 2*4*10*12*16 = 15_360, AV 2*4*10*12*32 = 30_720; 960 scores x (1 + 5)
    assert (macs, vector, unsupported) == (15_360 + 30_720, 960 * 6, {})


def test_sdpa_with_mask_charges_the_mask() -> None:
    q, mask = torch.empty(1, 2, 4, 8), torch.zeros(4, 4)
    fn = lambda q, m: F.scaled_dot_product_attention(q, q, q, attn_mask=m)  # noqa: E731
    # 1*2*4*4 = 32 scores x (1 + 5 + 1)
    assert priced(fn, q, mask)[1] == 32 * 7


def test_cpu_sdpa_kernel_has_a_formula() -> None:
    q = torch.randn(1, 2, 5, 4)
    counter = OpCounter(nn.Identity(), {})
    with counter.running():
        torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, q, q)
    # 2 heads x 5 x 5 scores x (4 + 4) = 400 MACs
    assert [(r.op, r.macs) for r in counter.records()] == [
        ("aten._scaled_dot_product_flash_attention_for_cpu", 400)
    ]


def test_layer_norm_gelu_softmax_costs() -> None:
    x = torch.empty(197, 768)
    w, b = torch.empty(768), torch.empty(768)
    elements = 197 * 768
    assert priced(lambda x, w, b: F.layer_norm(x, (768,), w, b), x, w, b)[1] == 7 * elements
    assert priced(lambda x: F.layer_norm(x, (768,)), x)[1] == 5 * elements
    assert priced(F.gelu, x)[1] == 5 * elements
    assert priced(lambda x: x.softmax(-1), x)[1] == 5 * elements
    assert priced(lambda x: x + x, x)[1] == elements


def test_views_and_copies_are_free() -> None:
    x = torch.empty(2, 197, 768)
    free = lambda x: x.transpose(1, 2).reshape(2, -1).contiguous()[:, :5].clone()  # noqa: E731
    assert priced(free, x) == (0, 0, {})


def test_shuffles_of_channels_and_space_are_free() -> None:
    """They only move elements (main reported them as unsupported ops)."""
    x = torch.empty(1, 8, 4, 4)
    for shuffle in (lambda x: F.pixel_shuffle(x, 2), lambda x: F.pixel_unshuffle(x, 2),
                    lambda x: F.channel_shuffle(x, 2), nn.ChannelShuffle(2)):
        assert priced(shuffle, x) == (0, 0, {})


def test_in_place_views_are_free() -> None:
    def in_place(x: torch.Tensor) -> torch.Tensor:
        return x.unsqueeze_(0).squeeze_(0).transpose_(0, 1).as_strided_((6, 4), (4, 1))

    assert priced(in_place, torch.empty(2, 3, 4)) == (0, 0, {})


def test_vector_norm_costs_two_per_input_and_one_per_output() -> None:
    x = torch.empty(2, 197, 64)
    # F.normalize: norm over 64 -> 2 * 197 outputs; 2 * 25_216 + 394 = 50_826 for the norm,
    # then clamp_min 394, expand (free), divide 25_216 elements -> 76_436
    assert priced(torch.linalg.vector_norm, x)[1] == 2 * 25_216 + 1
    assert priced(lambda x: F.normalize(x, dim=-1), x)[1] == 2 * 25_216 + 394 + 394 + 25_216


def test_hard_activations_max_and_fold() -> None:
    x = torch.empty(2, 10, 8)  # 160 elements
    assert priced(F.hardsigmoid, x)[1] == 3 * 160
    assert priced(F.hardswish, x)[1] == 4 * 160
    assert priced(lambda x: x.max(dim=-1).values, x)[1] == 160  # one comparison per input
    assert priced(torch.min, x)[1] == 160
    # element-wise against a broadcast row: one comparison per output element
    assert priced(torch.max, x, torch.empty(8))[1] == 160
    assert priced(torch.max, torch.empty(8), x)[1] == 160
    cols = torch.empty(1, 3 * 2 * 2, 9)  # 3 channels, 2x2 kernel, 3x3 positions: 108 values
    assert priced(lambda c: F.fold(c, (4, 4), kernel_size=2), cols)[1] == 108


def test_addcmul_addcdiv_and_lerp() -> None:
    beta, alpha, x = torch.empty(8), torch.empty(8), torch.empty(2, 10, 8)  # 160 outputs
    # ResMLP's affine beta + alpha * x: multiply, add = 2 * 160
    assert priced(torch.addcmul, beta, alpha, x)[1] == 2 * 160
    # a value other than 1 adds its scaling: 3 * 160
    assert priced(lambda b, a, x: torch.addcmul(b, a, x, value=0.5), beta, alpha, x)[1] == 480
    assert priced(torch.addcdiv, beta, alpha, x)[1] == 2 * 160
    # start + weight * (end - start): 3 * 160
    assert priced(lambda s, e: torch.lerp(s, e, 0.3), x, x)[1] == 3 * 160
    assert priced(lambda s, e: s.lerp_(e, 0.3), x.clone(), x)[1] == 3 * 160


def test_interpolation_charges_two_per_tap_and_nearest_is_free() -> None:
    grid = torch.empty(1, 64, 7, 7)
    # 64 channels x 14 x 14 outputs = 12_544; bilinear reads 4 taps, bicubic 16
    bilinear = lambda g: F.interpolate(g, size=(14, 14), mode="bilinear")  # noqa: E731
    bicubic = lambda g: F.interpolate(g, size=(14, 14), mode="bicubic")  # noqa: E731
    nearest = lambda g: F.interpolate(g, size=(14, 14), mode="nearest")  # noqa: E731
    assert priced(bilinear, grid) == (0, 2 * 4 * 12_544, {})
    assert priced(bicubic, grid) == (0, 2 * 16 * 12_544, {})
    assert priced(nearest, grid) == (0, 0, {})


def test_antialiased_resampling_charges_the_taps_of_each_pass() -> None:
    grid = torch.empty(1, 2, 8, 8)  # 2 channels, 8 x 8 to 4 x 4: scale 2 on each axis
    # bilinear: support 1 x 2 = 2 around centres 2 (i + 0.5) = 1, 3, 5, 7: inputs [0, 3), [1, 5),
    # [3, 7), [5, 8): 3 + 4 + 4 + 3 = 14 taps per axis. The horizontal pass runs on every input
    # row (2 channels x 8 rows x 14), the vertical on every output column (2 x 4 x 14):
    # (224 + 112) taps x 2 = 672
    bilinear = lambda g: F.interpolate(g, size=(4, 4), mode="bilinear", antialias=True)  # noqa: E731
    assert priced(bilinear, grid) == (0, 2 * (2 * 8 * 14 + 2 * 4 * 14), {})
    # bicubic: support 2 x 2 = 4: [0, 5), [0, 7), [1, 8), [3, 8): 5 + 7 + 7 + 5 = 24 per axis
    bicubic = lambda g: F.interpolate(g, size=(4, 4), mode="bicubic", antialias=True)  # noqa: E731
    assert priced(bicubic, grid) == (0, 2 * (2 * 8 * 24 + 2 * 4 * 24), {})
    # only the width changes: one pass, 2 x 8 rows x 14 taps
    wide = lambda g: F.interpolate(g, size=(8, 4), mode="bilinear", antialias=True)  # noqa: E731
    assert priced(wide, grid) == (0, 2 * 2 * 8 * 14, {})


def test_position_encoding_index_arithmetic_is_priced() -> None:
    mask = torch.empty(2, 6, dtype=torch.bool)  # 12 elements
    # EdgeNeXt's positional encoding: not, then a running sum, each 1 per element
    assert priced(lambda m: (~m).cumsum(1), mask) == (0, 12 + 12, {})
    index = torch.empty(12, dtype=torch.long)
    # Gemma-4's patch positions: a floor division, a remainder (1 each), all() reads all 12
    assert priced(lambda i: (i // 4, i % 4, (i >= 0).all()), index) == (0, 12 + 12 + 12 + 12, {})


def test_op_without_formula_is_reported_not_zeroed() -> None:
    x = torch.empty(4, 8)  # a Fourier transform: its cost depends on the algorithm, no formula
    assert priced(lambda x: torch.fft.rfft(x), x)[2] == {"aten._fft_r2c": 1}


def test_unsupported_ops_reach_the_profile() -> None:
    class Odd(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(8, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.fft.rfft(self.proj(x))

    profile = analyze(Odd(), image_size=8)
    assert profile.unsupported_ops == {"aten._fft_r2c": 1}
    assert any("aten._fft_r2c" in w for w in profile.warnings)


def test_registry_refuses_a_second_formula() -> None:
    with pytest.raises(ValueError, match="already registered"):
        register(aten.mm)(lambda args, kwargs, out: None)


def test_no_op_is_both_free_and_priced() -> None:
    assert not FREE_OPS & FORMULAS.keys()


def test_fused_mha_parts_land_in_their_components() -> None:
    mha = nn.MultiheadAttention(16, 4, batch_first=True)
    x = torch.empty(1, 6, 16)
    counter = OpCounter(nn.Identity(), {})
    with counter.running():
        torch._native_multi_head_attention(
            x.to("meta"), x.to("meta"), x.to("meta"), 16, 4, mha.in_proj_weight.to("meta"),
            mha.in_proj_bias.to("meta"), mha.out_proj.weight.to("meta"),
            mha.out_proj.bias.to("meta"), need_weights=False,
        )
    got = {r.component: (r.macs, r.vector_flops) for r in counter.records()}
    assert got == {
        C.ATTN_QKV: (6 * 16 * 48, 6 * 48),  # 4_608 MACs, qkv bias 288
        C.ATTN_CORE: (2 * 6 * 6 * 16, 4 * 36 * 6),  # 1_152 MACs; 4 heads x 36 scores x 6
        C.ATTN_PROJ: (6 * 16 * 16, 6 * 16),  # 1_536 MACs, bias 96
    }


def test_arguments_passed_by_keyword_or_position_cost_the_same() -> None:
    """A transposed convolution: C_in = 4, 5 x 5 input (100 elements), 2 outputs per group,
    3 x 3 kernel: each input element is scattered through the kernel, 100 * 2 * 9 = 1_800."""
    x, w = torch.empty(1, 4, 5, 5, device="meta"), torch.empty(4, 2, 3, 3, device="meta")
    op = aten.convolution.default
    rest = {"bias": None, "stride": [1, 1], "padding": [0, 0], "dilation": [1, 1],
            "transposed": True, "output_padding": [0, 0], "groups": 1}
    by_position = arguments(op, (x, w, *rest.values()), {})
    by_keyword = arguments(op, (x, w), rest)
    assert by_position == by_keyword
    out = op(x, w, *rest.values())
    assert convolution_cost(by_keyword, out) == Cost(macs=100 * 2 * 9) == convolution_cost(
        by_position, out
    )
    # dispatched with every argument named, as with every argument in place
    assert priced(lambda x, w: op(input=x, weight=w, **rest), x, w) == (1_800, 0, {})
    # defaults are filled in from the schema: addmm's keyword-only beta is 1
    assert arguments(aten.addmm.default, (x, x, x), {})["beta"] == 1


def test_attention_options_by_keyword_or_position_cost_the_same() -> None:
    q, mask = torch.empty(1, 2, 4, 8), torch.zeros(4, 4)
    sdpa = F.scaled_dot_product_attention
    # 1 * 2 * 4 * 4 = 32 scores x (scale 1 + softmax 5 + mask or causal 1)
    assert priced(lambda q, m: sdpa(q, q, q, m), q, mask)[1] == 32 * 7
    assert priced(lambda q, m: sdpa(q, q, q, attn_mask=m), q, mask)[1] == 32 * 7
    assert priced(lambda q: sdpa(q, q, q, None, 0.0, True), q)[1] == 32 * 7
    assert priced(lambda q: sdpa(q, q, q, is_causal=True), q)[1] == 32 * 7


def test_register_adds_a_formula_that_is_used() -> None:
    x = torch.empty(4, 8)  # 32 elements
    assert vitprof.formulas.register is register
    try:
        register(aten._fft_r2c, lambda inputs, out: Cost(vector_flops=numel(inputs["self"])))

        @vitprof.formulas.register(aten.cumprod)
        def cumprod_cost(inputs, out) -> Cost:
            return Cost(vector_flops=2 * numel(out))

        # one per input element (32), two per element of the product (64): none unsupported
        assert priced(lambda x: torch.fft.rfft(x), x) == (0, 32, {})
        assert priced(lambda x: torch.cumprod(x, 1), x) == (0, 2 * 32, {})
    finally:
        FORMULAS.pop(aten._fft_r2c, None)
        FORMULAS.pop(aten.cumprod, None)
    assert priced(lambda x: torch.fft.rfft(x), x)[2] == {"aten._fft_r2c": 1}


def test_analyze_formulas_override_one_op_for_one_call() -> None:
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 10))
    # one addmm, (1, 192) @ (192, 10): 1_920 MACs, bias add 10
    default = analyze(model, image_size=8).totals
    assert (default.macs, default.vector_flops) == (192 * 10, 10)
    # priced instead at 3 MACs per element of mat1, read by name: 3 * 192 = 576
    by_name = {aten.addmm: lambda inputs, out: Cost(macs=3 * numel(inputs["mat1"]))}
    overridden = analyze(model, image_size=8, formulas=by_name).totals
    assert (overridden.macs, overridden.vector_flops) == (576, 0)
    # an overload names its packet
    overload = {aten.addmm.default: lambda inputs, out: Cost(macs=7)}
    assert analyze(model, image_size=8, formulas=overload).totals.macs == 7
    # the next call is back to the registered formula
    assert analyze(model, image_size=8).totals.macs == 192 * 10


@pytest.mark.parametrize(
    ("formulas", "message"),
    [
        pytest.param({"aten.addmm": lambda inputs, out: Cost()}, "not an aten operation",
                     id="name-as-string"),
        pytest.param({aten.addmm: 3}, "aten.addmm is not callable", id="not-callable"),
    ],
)
def test_analyze_refuses_a_malformed_formulas_mapping(formulas, message) -> None:
    with pytest.raises(UserError, match=message):
        analyze(nn.Linear(8, 8), image_size=8, formulas=formulas)


def test_docs_cost_table_is_the_generated_one() -> None:
    text = DOCS.read_text()
    assert replace_cost_table(text) == text, (
        "docs/formulas.md's cost table is stale: python -m vitprof.count.formulas.table "
        "docs/formulas.md"
    )


Q, K = torch.empty(2, 3, 8, 16, device="meta"), torch.empty(2, 3, 10, 16, device="meta")
BIAS = torch.empty(2, 3, 8, 10, device="meta")


@pytest.mark.parametrize(
    ("kernel", "per_score"),
    [
        pytest.param(lambda: aten._scaled_dot_product_flash_attention(Q, K, K, 0.1, True),
                     1 + 5 + 1 + 1, id="flash-dropout-causal"),
        pytest.param(lambda: aten._scaled_dot_product_efficient_attention(Q, K, K, BIAS, True),
                     1 + 5 + 1, id="efficient-bias"),
        pytest.param(lambda: aten._scaled_dot_product_cudnn_attention(
            Q, K, K, None, True, is_causal=True), 1 + 5 + 1, id="cudnn-causal"),
        pytest.param(lambda: aten._scaled_dot_product_flash_attention_for_cpu(
            Q, K, K, dropout_p=0.1, attn_mask=BIAS[0, 0]), 1 + 5 + 1 + 1, id="cpu-mask-dropout"),
    ],
)
def test_every_attention_kernel_costs_what_sdpa_costs(kernel, per_score) -> None:
    """2 x 3 heads x 8 x 10 = 480 scores; QK^T and AV 480 * 16 MACs each = 15_360; per score
    scale 1 + softmax 5, +1 with a mask or causal, +1 with dropout, read by argument name."""
    counter = OpCounter(nn.Identity(), {})
    with counter.running():
        kernel()
    assert [(r.macs, r.vector_flops) for r in counter.records()] == [(15_360, 480 * per_score)]



def test_a_product_and_an_all_true_check_are_reductions_of_one_flop_per_input() -> None:
    # transformers' Siglip2 checks its spatial shapes with prod and _is_all_true (torch_check)
    shapes = torch.empty(3, 2, dtype=torch.long)  # 6 elements
    # prod over the last axis reads 6; (x > 0) 6; all() reads 6; _is_all_true reads 1
    assert priced(lambda s: s.prod(-1), shapes) == (0, 6, {})
    assert priced(lambda s: torch._is_all_true((s > 0).all()), shapes) == (0, 6 + 6 + 1, {})


def test_variance_and_deviation_are_reductions_of_four_flops_per_input() -> None:
    # vit-pytorch's hand-written LayerNorm: torch.var(x, dim=-1, unbiased=False, keepdim=True)
    x = torch.empty(2, 5, 8)  # 80 elements, 10 rows
    # per input: mean, subtract, square, accumulate = 4 x 80; per row: divide by the count 1
    assert priced(lambda t: t.var(-1, keepdim=True), x) == (0, 4 * 80 + 1 * 10, {})
    # std: var's and a square root per row
    assert priced(lambda t: t.std(-1), x) == (0, 4 * 80 + 2 * 10, {})
    # var_mean: var's and the mean's divide per row; std_mean: and the root
    assert priced(lambda t: torch.var_mean(t, -1), x) == (0, 4 * 80 + 2 * 10, {})
    assert priced(lambda t: torch.std_mean(t, -1), x) == (0, 4 * 80 + 3 * 10, {})


def test_masks_identities_and_index_writes_are_free() -> None:
    # issue 35's ops without a formula that only make, keep or place elements
    scores, mask = torch.empty(2, 5, 5), torch.empty(2, 5, 5, dtype=torch.bool)
    values, rows = torch.empty(3, 5), torch.tensor([0, 2, 4])

    def masks(s: torch.Tensor, m: torch.Tensor) -> None:
        torch.eye(5, device=s.device)
        s.tril().triu(-1).diagonal(dim1=-2, dim2=-1)
        s.masked_fill_(m, 0.0)
        s.tril_()

    def index_writes(s: torch.Tensor, v: torch.Tensor, i: torch.Tensor) -> None:
        s[0].index_put_((i,), v)
        s[1].index_put((i,), v)

    assert priced(masks, scores, mask) == (0, 0, {})
    assert priced(index_writes, scores, values, rows) == (0, 0, {})


def test_drawing_indices_by_weights_is_free_as_every_random_draw() -> None:
    # a random masking's choice of tokens (monai's MaskedAutoEncoderViT draws with
    # multinomial); main reported aten.multinomial as an op without a formula
    weights = torch.empty(2, 10)
    assert priced(lambda w: torch.multinomial(w, 3), weights) == (0, 0, {})


def test_sign_and_isnan_are_one_flop_per_element() -> None:
    x = torch.empty(4, 6)  # 24 elements, one operation or comparison each
    assert priced(lambda x: (torch.sign(x), torch.isnan(x)), x) == (0, 24 + 24, {})


def test_a_3d_max_pool_charges_its_window_as_the_2d_one() -> None:
    clip = torch.empty(1, 2, 4, 8, 8)
    # kernel 2 x 2 x 2, stride 2: 2 channels x 2 x 4 x 4 = 64 outputs, 8 comparisons each
    assert priced(lambda c: F.max_pool3d(c, 2, 2, return_indices=True), clip) == (
        0, 8 * 64, {})
    # (1, 2, 2): 4 comparisons per output, 2 x 4 x 4 x 4 = 128 outputs
    assert priced(lambda c: F.max_pool3d(c, (1, 2, 2)), clip) == (0, 4 * 2 * 4 * 4 * 4, {})
    assert priced(lambda c: F.avg_pool3d(c, 2), clip) == (0, 8 * 64, {})


def test_grid_sampling_charges_its_taps_and_its_coordinates() -> None:
    image, grid = torch.empty(1, 3, 8, 8), torch.empty(1, 5, 6, 2)
    # 3 channels x 5 x 6 samples = 90 outputs; the grid holds 5 x 6 x 2 = 60 coordinates, 2 each
    bilinear = lambda i, g: F.grid_sample(i, g, mode="bilinear", align_corners=False)  # noqa: E731
    bicubic = lambda i, g: F.grid_sample(i, g, mode="bicubic", align_corners=False)  # noqa: E731
    nearest = lambda i, g: F.grid_sample(i, g, mode="nearest", align_corners=False)  # noqa: E731
    assert priced(bilinear, image, grid) == (0, 2 * 4 * 90 + 2 * 60, {})  # 720 + 120
    assert priced(bicubic, image, grid) == (0, 2 * 16 * 90 + 2 * 60, {})  # 2_880 + 120
    assert priced(nearest, image, grid) == (0, 2 * 60, {})  # a select per output


def test_weight_norm_is_three_flops_per_element_of_its_direction() -> None:
    v, g = torch.empty(16, 8), torch.empty(16, 1)
    # square and accumulate, then scale: 3 per element of v, 16 x 8 = 128
    assert priced(lambda v, g: torch._weight_norm(v, g, 0), v, g) == (0, 3 * 128, {})
