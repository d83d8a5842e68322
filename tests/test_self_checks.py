"""Self-checks on the breakdown (vitprof.count.self_checks): each rule fails on a breakdown built
to trip it and passes on its corrected twin."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from vitprof import analyze
from vitprof.core.records import Component, OpRecord
from vitprof.count.self_checks import self_checks

C = Component


def op(name: str, component: Component, block: int | None = None, macs: int = 10,
       module: str = "m") -> OpRecord:
    return OpRecord(f"aten.{name}", module, component, block, macs, 0)


def rules_failed(ops: list[OpRecord]) -> list[str]:
    return [line.split("(")[1].split(")")[0] for line in self_checks(ops)]


CASES = [
    pytest.param(  # fused attention counted as mlp
        [op("scaled_dot_product_attention", C.MLP, 0)],
        [op("scaled_dot_product_attention", C.ATTN_CORE, 0)],
        "attention outside attn_core", id="fused-attention"),
    pytest.param(  # q @ k^T, softmax, @ v in one module, counted as other
        [op("bmm", C.OTHER, 0), op("_softmax", C.OTHER, 0, 0), op("bmm", C.OTHER, 0)],
        [op("bmm", C.ATTN_CORE, 0), op("_softmax", C.ATTN_CORE, 0, 0),
         op("bmm", C.ATTN_CORE, 0)],
        "attention outside attn_core", id="explicit-attention"),
    pytest.param(
        [op("addmm", C.ATTN_QKV, 0), op("addmm", C.ATTN_PROJ, 0), op("addmm", C.MLP, 0)],
        [op("addmm", C.ATTN_QKV, 0), op("bmm", C.ATTN_CORE, 0), op("addmm", C.ATTN_PROJ, 0)],
        "projections without a core", id="projections"),
    pytest.param(  # a convolution counted as patch_embed between two ops of block 0
        [op("addmm", C.ATTN_QKV, 0), op("convolution", C.PATCH_EMBED, None),
         op("bmm", C.ATTN_CORE, 0)],
        [op("addmm", C.ATTN_QKV, 0), op("bmm", C.ATTN_CORE, 0),
         op("convolution", C.PATCH_EMBED, None),  # between block 0 and block 1: a stage change
         op("addmm", C.ATTN_QKV, 1), op("bmm", C.ATTN_CORE, 1)],
        "patch embedding inside a block", id="patch-embed"),
    pytest.param(
        [op("addmm", C.ATTN_QKV, 0), op("bmm", C.ATTN_CORE, 0), op("mm", C.TOKENS, None)],
        [op("addmm", C.ATTN_QKV, 0), op("bmm", C.ATTN_CORE, 0), op("add", C.TOKENS, None, 0)],
        "MACs in tokens", id="tokens"),
    pytest.param(  # no op is in a block: everything unrecognised belongs in other
        [op("convolution", C.MLP), op("addmm", C.HEAD)],
        [op("convolution", C.OTHER), op("addmm", C.HEAD)],
        "no blocks, yet components", id="no-blocks"),
]


@pytest.mark.parametrize(("failing", "passing", "rule"), CASES)
def test_each_rule_fails_its_case_and_passes_the_twin(failing, passing, rule) -> None:
    assert rules_failed(failing) == [rule]
    assert self_checks(passing) == []


def test_the_warning_names_the_macs_and_the_modules() -> None:
    ops = [op("scaled_dot_product_attention", C.MLP, 0, 1_000, f"blocks.{i}.mix")
           for i in range(5)]
    # 5 records of 1,000 MACs; three paths shown, the other two counted
    assert self_checks(ops) == [
        "self-check failed (attention outside attn_core): 5,000 MACs of attention products "
        "counted as mlp, in blocks.0.mix, blocks.1.mix, blocks.2.mix and 2 more"
    ]


class MixerBlock(nn.Module):
    """Attention hidden in a module named like an MLP, in a model with no table."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.mlp = nn.Linear(dim, 3 * dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.mlp(x).chunk(3, dim=-1)
        return x + torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v


class MixerNet(nn.Module):
    def __init__(self, dim: int = 8) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, dim, kernel_size=2, stride=2)
        self.mixer = MixerBlock(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mixer(self.stem(x).flatten(2).transpose(1, 2))


def test_a_breakdown_of_real_model_runs_the_checks() -> None:
    model = MixerNet()
    # the tables' generic recognizer reads the Linear named mlp as mlp; the graph would not
    found = self_checks(analyze(model, image_size=4, name="mixer", recognizer="tables").ops)
    assert any("attention outside attn_core" in line for line in found)
    assert self_checks(analyze("vit_b_16").ops) == []


MIXER_FILE = '''
import torch
from torch import nn


class Mixer(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.stem = nn.Conv2d(3, dim, kernel_size=2, stride=2)
        self.mlp = nn.Linear(dim, 3 * dim)

    def forward(self, x):
        x = self.stem(x).flatten(2).transpose(1, 2)
        q, k, v = self.mlp(x).chunk(3, dim=-1)
        return x + torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v


def build(image_size=8, num_classes=0):
    return Mixer()
'''


@pytest.mark.parametrize(("strict", "code"), [(False, 0), (True, 1)])
def test_strict_analyze_exits_1_on_a_failed_self_check(tmp_path, capsys, strict, code) -> None:
    from vitprof.cli.main import main

    factory = tmp_path / "mixer.py"
    factory.write_text(MIXER_FILE)
    argv = ["analyze", f"{factory}:build", "--format", "json", "--recognizer", "tables",
            *(["--strict"] if strict else [])]
    assert main(argv) == code
    captured = capsys.readouterr()
    assert "self-check failed (attention outside attn_core)" in captured.err
    assert ("1 self-check(s) failed (--strict)" in captured.err) is strict
    assert json.loads(captured.out)["self_checks"][0].startswith("self-check failed (attention")


def test_strict_analyze_passes_a_clean_breakdown(capsys) -> None:
    from vitprof.cli.main import main

    assert main(["analyze", "note002_cifar_vit", "--strict", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["self_checks"] == []


def test_a_failed_self_check_fails_its_budget(tmp_path, capsys) -> None:
    from vitprof.cli.main import main

    factory = tmp_path / "mixer.py"
    factory.write_text(MIXER_FILE)
    budget = tmp_path / "budgets.toml"
    # a limit that holds; the implicit max_self_checks = 0 does not
    budget.write_text(f'[mixer]\nmodel = "{factory}:build"\nrecognizer = "tables"\n'
                      'max_params = 1_000_000\n')
    assert main(["check", str(budget), "--format", "json"]) == 1
    checks = {c["key"]: c for c in json.loads(capsys.readouterr().out)["budgets"][0]["checks"]}
    assert (checks["max_params"]["verdict"], checks["max_self_checks"]["verdict"]) == ("pass",
                                                                                       "fail")
    assert checks["max_self_checks"]["actual"] == 1  # one rule failed: attention outside core
    budget.write_text(f'[mixer]\nmodel = "{factory}:build"\nrecognizer = "tables"\n'
                      'max_self_checks = 1\n')
    assert main(["check", str(budget)]) == 0
