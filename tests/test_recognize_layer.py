"""Recognition is a layer (issue 34): the count places nothing, the component tables are facts
read from the model libraries when a model is recognized (nothing registers at import), and
every feature places a run through one entry point, :func:`vitprof.recognize.breakdown`."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from vitprof.core.records import Component, Phase
from vitprof.count.counter import OpCounter
from vitprof.count.session import count, image_inputs
from vitprof.recognize import breakdown
from vitprof.recognize.placement import place
from vitprof.recognize.tables import NO_TABLE, ComponentMap
from vitprof.workload import InputRequest

ROOT = Path(__file__).resolve().parents[1]


def _fresh(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, check=False)


def test_importing_vitprof_registers_no_table() -> None:
    # main imported the model libraries from vitprof/__init__.py, for their tables to register
    # with vitprof.count.families before the first recognize()
    done = _fresh("import sys, vitprof; "
                  "print(sorted(m for m in sys.modules if m.startswith('vitprof.models')))")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_recognize_layer_reads_timms_table_in_a_fresh_interpreter() -> None:
    pytest.importorskip("timm")
    done = _fresh(
        "import sys\n"
        "from vitprof.recognize.tables import recognize\n"
        "import timm\n"
        "model = timm.create_model('vit_tiny_patch16_224', pretrained=False)\n"
        "mapping = recognize(model)\n"
        "print(mapping.family, len(mapping.blocks), mapping.params['blocks.0.attn.qkv.weight'])\n"
    )
    assert done.returncode == 0, done.stderr
    # vit_tiny_patch16_224 has depth 12: 12 blocks, blocks\.\d+ in timm's table
    assert done.stdout.split() == ["timm", "12", "attn_qkv"]


def test_the_count_takes_no_component_map() -> None:
    assert list(inspect.signature(count).parameters)[:3] == ["model", "inputs", "train"]
    assert "mapping" not in inspect.signature(OpCounter).parameters
    count_package = ROOT / "vitprof" / "count"
    named = [path.relative_to(ROOT).as_posix() for path in count_package.rglob("*.py")
             if "ComponentMap" in path.read_text()]
    assert named == []


class _TwoLayers(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(4, 6)
        self.second = nn.Linear(6, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(torch.relu(self.first(x)))


def test_a_count_is_placed_afterwards_by_a_map() -> None:
    model = _TwoLayers()
    run = count(model, image_inputs(torch.zeros(3, 4, device="meta")))
    # the count places nothing: every record other, in no block
    assert {(op.component, op.block) for op in run.ops} == {(Component.OTHER, None)}
    assert [w.stack for w in run.whereabouts] == [("", "first"), ("",), ("", "second")]
    mapping = ComponentMap("test", {"first": Component.MLP}, {
        "first.weight": Component.MLP, "first.bias": Component.MLP,
        "second.weight": Component.HEAD, "second.bias": Component.HEAD}, {"first": 0})
    placed = place(run.ops, run.whereabouts, mapping)
    # first's addmm reads first.weight: mlp, in block 0 (first is the block); the relu runs in
    # the root, in no block and after the first block: head by position; second's addmm reads
    # second.weight: head
    assert [(op.op, op.component, op.block) for op in placed] == [
        ("aten.addmm", Component.MLP, 0), ("aten.relu", Component.HEAD, None),
        ("aten.addmm", Component.HEAD, None)]
    # 3 x 4 x 6 = 72 and 3 x 6 x 2 = 36 MACs, as counted
    assert [op.macs for op in placed] == [72, 0, 36]


def test_breakdown_places_a_run_the_feature_already_has() -> None:
    model = _TwoLayers()
    run = count(model, image_inputs(torch.zeros(3, 4, device="meta")), train=True)
    found = breakdown(run, model)
    # no table detects the model: the graph decides, and finds no attention block
    assert found.family == "graph" and found.blocks == {}
    assert len(found.ops) == len(run.ops) and {op.phase for op in found.ops} == set(Phase)
    assert sum(p.numel for p in found.params) == 4 * 6 + 6 + 6 * 2 + 2  # 44
    assert any("no transformer blocks recognized" in w for w in found.warnings)
    assert breakdown(run, model, "tables").family == "graph"  # no table: the graph's
    assert NO_TABLE == "none"


def _tiny_torchvision_vit() -> nn.Module:
    torchvision = pytest.importorskip("torchvision")
    return torchvision.models.VisionTransformer(image_size=32, patch_size=16, num_layers=2,
                                                num_heads=2, hidden_dim=16, mlp_dim=32)


def test_memory_checkpoint_counts_once_and_breaks_the_step_down_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from vitprof.measure.memory import estimate as training_memory
    from vitprof.measure.memory import step as memory_step

    counts: list[bool] = []
    breakdowns: list[str] = []

    def counted(*args: object, **kwargs: object) -> object:
        counts.append(bool(kwargs.get("train")))
        return count(*args, **kwargs)  # type: ignore[arg-type]

    def broken_down(*args: object, **kwargs: object) -> object:
        breakdowns.append(str(args[2] if len(args) > 2 else kwargs.get("recognizer")))
        return breakdown(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(memory_step, "count", counted)
    monkeypatch.setattr(training_memory, "count", counted)
    monkeypatch.setattr(training_memory, "breakdown", broken_down)
    estimate = training_memory.memory(_tiny_torchvision_vit(), InputRequest(image_size=32),
                                      checkpoint="blocks", target="cpu")
    # torchvision's table names the 2 blocks: the step is the one count, in train mode
    assert counts == [True] and breakdowns == ["auto"]
    assert len(estimate.by_block) == 2


def test_memory_checkpoint_counts_once_where_no_table_names_the_blocks(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from vitprof.measure.memory import estimate as training_memory
    from vitprof.measure.memory import step as memory_step
    from vitprof.testing import own_classes

    counts: list[bool] = []

    def counted(*args: object, **kwargs: object) -> object:
        counts.append(bool(kwargs.get("train")))
        return count(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(memory_step, "count", counted)
    monkeypatch.setattr(training_memory, "count", counted)
    model = own_classes(_tiny_torchvision_vit())  # a class of its own per module: no table
    assert not training_memory.recognize(model).blocks
    estimate = training_memory.memory(model, InputRequest(image_size=32), checkpoint="blocks",
                                       target="cpu")
    # the step checkpoints the module tree's 2 blocks, and its own breakdown finds them: the
    # step is the one count (no forward on meta to find the blocks first)
    assert counts == [True]
    assert len(estimate.by_block) == 2
