"""The same numbers on meta and CPU, with and without grad; models are left as they were."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch
from torch import nn

from vitprof import Component as C
from vitprof import UserError, analyze
from vitprof.models.zoo import build
from vitprof.workload import make_workload


@pytest.fixture(scope="module")
def vit_b_16_meta():
    return analyze("vit_b_16")


@pytest.mark.parametrize("grad", [True, False], ids=["grad", "no_grad"])
def test_cpu_counts_equal_meta_counts(vit_b_16_meta, grad: bool) -> None:
    with torch.set_grad_enabled(grad):
        cpu = analyze("vit_b_16", device="cpu")
    assert cpu.device == "cpu"
    assert cpu.components == vit_b_16_meta.components
    assert [b.components for b in cpu.blocks] == [b.components for b in vit_b_16_meta.blocks]


def test_meta_counts_do_not_depend_on_grad_mode(vit_b_16_meta) -> None:
    with torch.no_grad():
        assert analyze("vit_b_16").components == vit_b_16_meta.components


def test_weighted_model_counts_on_meta_without_touching_it() -> None:
    model = build("vit_b_32", device="cpu").module.train()
    model.encoder.layers[0].mlp[0].weight.requires_grad_(False)
    before = {n: (p.device, p.requires_grad, p.data_ptr()) for n, p in model.named_parameters()}
    first = analyze(model)
    second = analyze(model, device="cpu")
    assert first.device == "meta"
    assert first.components == second.components
    assert model.training  # mode restored after the eval-mode count
    after = {n: (p.device, p.requires_grad, p.data_ptr()) for n, p in model.named_parameters()}
    assert after == before
    leftover = [m for m in model.modules() if m._forward_hooks or m._forward_pre_hooks]
    assert leftover == []


def test_hooks_are_removed_when_the_model_fails() -> None:
    class Broken(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            raise ValueError("boom")

    model = Broken()
    with pytest.raises(UserError) as raised:
        analyze(model, image_size=4, device="cpu")
    # one line naming the model, the error and the input; the meta run fails first
    assert str(raised.value) == ("running Broken failed: ValueError: boom (input of shape "
                                 "1x3x4x4, on meta)")
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())


def _total(counter) -> tuple[int, int]:
    records = counter.records()
    return sum(r.macs for r in records), sum(r.vector_flops for r in records)


def test_multihead_attention_fast_path_formula_matches_slow_path() -> None:
    """aten._native_multi_head_attention is charged what F.multi_head_attention_forward costs."""
    from vitprof.count.counter import OpCounter

    mha = nn.MultiheadAttention(16, 4, batch_first=True).eval()
    x = torch.randn(2, 5, 16)
    costs = {}
    for need_weights in (False, True):
        fast = OpCounter(nn.Identity(), {})
        with fast.running():
            torch._native_multi_head_attention(
                x, x, x, 16, 4, mha.in_proj_weight, mha.in_proj_bias, mha.out_proj.weight,
                mha.out_proj.bias, need_weights=need_weights,
            )
        slow = OpCounter(nn.Identity(), {})
        with slow.running():
            nn.functional.multi_head_attention_forward(
                x.transpose(0, 1), x.transpose(0, 1), x.transpose(0, 1), 16, 4,
                mha.in_proj_weight, mha.in_proj_bias, None, None, False, 0.0,
                mha.out_proj.weight, mha.out_proj.bias, training=False, need_weights=need_weights,
            )
        assert _total(fast) == _total(slow)
        costs[need_weights] = fast.records()
    # B=2, L=5, D=16: qkv 2*5*16*48 = 7_680; core 2 * 2*5*5*16 = 1_600; proj 2*5*16*16 = 2_560
    by_component = {r.component: r.macs for r in costs[False]}
    assert by_component == {C.ATTN_QKV: 7_680, C.ATTN_CORE: 1_600, C.ATTN_PROJ: 2_560}


def test_analyzing_twice_gives_the_same_numbers() -> None:
    model = build("note002_cifar_vit_tiny").module
    first = analyze(model, image_size=32)
    # D=192, 12 blocks of 12*D^2 + 13*D = 444_864, outside 127*D + 10 = 24_394
    assert first.totals.params == 12 * 444_864 + 24_394
    assert analyze(model, image_size=32).components == first.components


class DataDependent(nn.Module):
    """Keeps as many tokens as are positive: a shape meta tensors cannot know."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = x.flatten(1).reshape(-1, 4)
        kept = tokens[tokens[:, 0] >= 0]
        return self.proj(kept)


def test_model_that_cannot_run_on_meta_falls_back_to_cpu() -> None:
    profile = analyze(DataDependent(), image_size=4)
    assert profile.device == "cpu"
    assert profile.fallback is not None and "meta device failed" in profile.fallback
    # zeros input: all 1*3*4*4/4 = 12 rows kept, 12 * 4 * 4 = 192 MACs
    assert profile.totals.macs == 192
    assert profile.to_dict()["fallback"] == profile.fallback


def test_meta_only_model_that_cannot_run_on_meta_is_a_user_error() -> None:
    from vitprof.core.errors import UserError

    with torch.device("meta"):
        model = DataDependent()
    with pytest.raises(UserError, match=r"failed on meta .* no weights"):
        analyze(model, image_size=4)


class ScaledByBuffer(nn.Module):
    """Reads a registered buffer in its forward, as many ViTs do (relative position tables)."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.register_buffer("scale", torch.ones(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x.flatten(1).reshape(-1, 4)) * self.scale


def test_model_reading_a_buffer_counts_on_meta() -> None:
    profile = analyze(ScaledByBuffer(), image_size=4)
    assert profile.device == "meta" and profile.fallback is None
    # 1*3*4*4 / 4 = 12 rows: 12 * 4 * 4 = 192 MACs; bias 48 + buffer multiply 48
    assert (profile.totals.macs, profile.totals.vector_flops) == (192, 96)


@pytest.mark.parametrize("device", ["meta", "cpu"])
def test_an_analysis_keeps_no_reference_cycle_to_its_model(device: str) -> None:
    # a first analysis imports torch._dynamo lazily, whose module code runs torch.fx's wrap:
    # its frame holds itself (currentframe) and, through f_back, the frames of that analysis
    # and their locals, the model among them; once imported, nothing of torch's holds a frame
    analyze("note002_cifar_vit_tiny")
    work = make_workload("note002_cifar_vit_tiny")
    model = weakref.ref(work.module)
    gc.disable()
    try:
        profile = analyze(work, device=device)
        del work
        # nothing of the analysis holds the model once it returned: it went with its last
        # reference, not at a later full collection (the counter's weak-reference callbacks
        # held the counter, and through it the model, in a cycle)
        assert model() is None
    finally:
        gc.enable()
    assert profile.device == device



class _Collections:
    """Counts the cyclic collector's runs while it is installed."""

    def __init__(self) -> None:
        self.runs = 0

    def __call__(self, phase: str, _info: dict) -> None:
        self.runs += phase == "start"


@pytest.mark.parametrize("collector_on", [True, False], ids=["on", "off"])
def test_an_analysis_leaves_the_collector_as_the_caller_had_it(collector_on: bool) -> None:
    # the count on meta and the breakdown hold the cyclic collector off (they make no cycles);
    # after them it is on again, and a caller who turned it off finds it off, also after a
    # model that fails on meta and is counted again on the CPU
    analyze("note002_cifar_vit_tiny")
    seen = _Collections()
    (gc.enable if collector_on else gc.disable)()
    gc.callbacks.append(seen)
    try:
        for work in ("note002_cifar_vit_tiny", _DataDependent()):
            profile = analyze(work)
            assert gc.isenabled() is collector_on
        assert profile.device == "cpu"  # the second fell back from meta
        gc.collect()
    finally:
        gc.callbacks.remove(seen)
        gc.enable()
    assert seen.runs >= 1  # the callback was live: gc.collect() ran it


class _DataDependent(nn.Module):
    """A shape only real data decides (meta fails; the CPU fallback counts it)."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x[:, : int(x.sum().abs()) % 3 + 1].flatten(1)[:, :4].expand(1, 4))


LEGACY_PY = '''
import math

import torch
from torch import nn


class LegacyLinear(nn.Module):
    """Older code: parameters from the legacy torch.Tensor(shape) constructor, then
    reset_parameters."""

    def __init__(self, n, m):
        super().__init__()
        self.weight = nn.Parameter(torch.Tensor(m, n))
        self.bias = nn.Parameter(torch.Tensor(m))
        self.reset_parameters()

    def reset_parameters(self):
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        nn.init.zeros_(self.bias)

    def forward(self, x):
        return nn.functional.linear(x, self.weight, self.bias)


class Net(nn.Module):
    """4 x 4-pixel patches of a 16 x 16 image embedded by the legacy linear, then a LayerNorm."""

    def __init__(self, data_dependent=False):
        super().__init__()
        self.embed = LegacyLinear(48, 8)
        self.norm = nn.LayerNorm(8)
        self.data_dependent = data_dependent

    def forward(self, x):
        patches = x.reshape(1, 3, 4, 4, 4, 4).permute(0, 2, 4, 1, 3, 5).reshape(1, 16, 48)
        if self.data_dependent:  # a shape meta cannot know: the fallback runs it on the CPU
            patches = patches[:, : int(x.sum()) + 16]
        return self.norm(self.embed(patches))


def net():
    return Net()


def data_dependent():
    return Net(data_dependent=True)
'''


@pytest.mark.parametrize(("factory", "device"), [
    ("net", "meta"), ("net", "cpu"), ("data_dependent", "meta")],
    ids=["meta", "cpu", "cpu-fallback"])
def test_a_legacy_tensor_constructor_parameter_is_built_on_meta_with_the_rest(
    tmp_path, factory: str, device: str
) -> None:
    path = tmp_path / "legacy.py"
    path.write_text(LEGACY_PY)
    name = f"{path}:{factory}"
    assert {p.device.type for p in build(name).module.parameters()} == {"meta"}
    profile = analyze(name, image_size=16, device=device)
    assert profile.device == ("meta" if factory == "net" and device == "meta" else "cpu")
    # 48 x 8 + 8 = 392 legacy params, 2 x 8 = 16 of the LayerNorm; 16 patches x 48 x 8 = 6,144
    assert profile.totals.params == 48 * 8 + 8 + 2 * 8 == 408
    assert profile.totals.macs == 16 * 48 * 8 == 6_144


ROTARY_PY = '''
import torch
from torch import nn


class Rotary(nn.Module):
    """A SAM2-style table kept as a plain attribute (no parameter, no buffer), made in __init__:
    on meta in a meta build."""

    def __init__(self):
        super().__init__()
        self.patch = nn.Conv2d(3, 8, kernel_size=4, stride=4)
        self.freqs = torch.randn(16, 8)

    def forward(self, x):
        return self.patch(x).flatten(2).transpose(1, 2) * self.freqs


def rotary():
    return Rotary()
'''


def test_a_plain_tensor_attribute_of_a_meta_build_runs_on_the_cpu(tmp_path) -> None:
    path = tmp_path / "rotary.py"
    path.write_text(ROTARY_PY)
    cpu = analyze(f"{path}:rotary", image_size=16, device="cpu")
    assert cpu.device == "cpu"
    # 3 x 4 x 4 x 8 + 8 = 392 params; 16 patches x 48 x 8 = 6,144 MACs; the bias and the
    # table's product: 2 x 16 x 8 = 256 vector FLOPs
    assert cpu.totals.params == 3 * 4 * 4 * 8 + 8 == 392
    assert (cpu.totals.macs, cpu.totals.vector_flops) == (16 * 48 * 8, 2 * 16 * 8)
    assert cpu.components == analyze(f"{path}:rotary", image_size=16).components
