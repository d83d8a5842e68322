"""Deploy-form counts: timm's re-parameterisation and BatchNorm folded
(``vitprof.models.deploy``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch import nn

from vitprof import analyze
from vitprof.cli.main import main
from vitprof.models.deploy import deploy_form, fold_batch_norms


def conv_bn() -> nn.Module:
    """3 -> 8 channels, 3x3 conv without bias, BatchNorm2d(8), then a 2-class head."""
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 2),
    )


def test_conv_bn_fold_arithmetic() -> None:
    model = conv_bn()
    built = analyze(model, image_size=8)
    deployed = analyze(model, image_size=8, deploy=True)
    # conv 8*3*3*3 = 216, BN affine 2*8 = 16, head 8*2 + 2 = 18: 250 params as built
    assert built.totals.params == 216 + 16 + 18
    # deployed: the BN's 16 affine params go, the conv gains an 8-element bias: 216 + 8 + 18
    assert deployed.totals.params == 216 + 8 + 18
    # MACs unchanged: conv 8 * 8 * 8 * 27 = 13_824, head 8 * 2 = 16
    assert built.totals.macs == deployed.totals.macs == 8 * 8 * 8 * 27 + 16
    # BN's vector FLOPs go; the conv's bias add (one per output element, 8 * 8 * 8 = 512) comes
    ops = {r.op for r in deployed.ops}
    assert not any("batch_norm" in op for op in ops)
    bn_flops = sum(r.vector_flops for r in built.ops if "batch_norm" in r.op)
    assert bn_flops > 0
    assert deployed.totals.vector_flops == built.totals.vector_flops - bn_flops + 8 * 8 * 8


def test_running_stats_buffers_drop_and_the_model_is_untouched() -> None:
    model = conv_bn()
    folded = deploy_form(model)
    assert isinstance(model[1], nn.BatchNorm2d)  # the caller's model keeps its BatchNorm
    assert isinstance(folded[1], nn.Identity) and folded[0].bias is not None
    # running_mean 8 + running_var 8 + num_batches_tracked 1 = 17 buffer elements go
    count = lambda m: sum(b.numel() for b in m.buffers())  # noqa: E731
    assert count(model) - count(folded) == 8 + 8 + 1


def test_fold_computes_the_same_function() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6)).eval()
    model[1].running_mean.normal_()
    model[1].running_var.uniform_(0.5, 2.0)
    model[1].weight.data.normal_()
    model[1].bias.data.normal_()
    folded = deploy_form(model)
    x = torch.randn(5, 4)
    assert fold_batch_norms(folded) == 0  # nothing left to fold
    torch.testing.assert_close(folded(x), model(x))


def test_bn_that_does_not_match_the_channels_is_left() -> None:
    model = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(3))
    assert fold_batch_norms(model) == 0


def test_meta_model_folds_on_meta() -> None:
    with torch.device("meta"):
        model = conv_bn()
    folded = deploy_form(model)
    assert folded[0].bias.is_meta and isinstance(folded[1], nn.Identity)


@pytest.mark.parametrize(
    ("name", "published_m"),
    [
        # timm's table (commit 90cae8c5), param_count in M, which counts the deploy form
        pytest.param("fastvit_t8", 4.00, id="fastvit_t8"),
        pytest.param("levit_128", 9.19, id="levit_128"),
    ],
)
def test_deploy_params_equal_timms_published_count(name: str, published_m: float) -> None:
    pytest.importorskip("timm")
    built = analyze(f"timm:{name}")
    deployed = analyze(f"timm:{name}", deploy=True)
    assert round(deployed.totals.params / 1e6, 2) == published_m
    assert round(built.totals.params / 1e6, 2) != published_m  # as built it differs
    assert deployed.totals.params < built.totals.params


def test_cli_deploy_flag(capsys) -> None:
    pytest.importorskip("timm")
    assert main(["analyze", "timm:levit_128", "--deploy", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # LeViT-128 deploy form rounds to the 9.19M params timm publishes
    assert round(out["totals"]["params"] / 1e6, 2) == 9.19
    assert out["model"] == "timm:levit_128 (deploy form)"


DATA_DEPENDENT_BN = """
import torch
from torch import nn


class DataDependent(nn.Module):
    \"\"\"Conv + BN, then keeps int(x.sum()) + 1 tokens: cannot run on meta.\"\"\"

    def __init__(self):
        super().__init__()
        self.patch = nn.Sequential(nn.Conv2d(3, 8, 4, stride=4, bias=False), nn.BatchNorm2d(8))
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        keep = int(x.sum()) + 1
        tokens = self.patch(x).flatten(2).transpose(1, 2)[:, :keep]
        return self.head(tokens.mean(1))


def make():
    return DataDependent()
"""


@pytest.fixture
def factory_file_with_bn(tmp_path: Path) -> Path:
    path = tmp_path / "bn_models.py"
    path.write_text(DATA_DEPENDENT_BN)
    return path


def test_deploy_form_survives_the_cpu_fallback(factory_file_with_bn: Path) -> None:
    """A model that cannot run on meta is counted on the CPU: in deploy form all the same."""
    deployed = analyze(f"{factory_file_with_bn}:make", deploy=True)
    assert deployed.fallback is not None
    assert deployed.model.endswith(":make (deploy form)")
    # conv 8*3*4*4 = 384 + bias 8 (the folded BN's 2*8 affine gone), head 8*2 + 2 = 18
    assert deployed.totals.params == 384 + 8 + 18
