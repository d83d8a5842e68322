"""Issue 35's classes 13 and 14 (deformable attention) on neutral-name fixtures
(tests/recognition_fixtures.py): a deformable attention is an attention core, a decoder called
step by step after an encoder is split as its layers are."""

from __future__ import annotations

from recognition_fixtures import DEFORM, IMAGE, DeformBlk, L, Net, _times, net

from vitprof import analyze
from vitprof.core.records import Component as C


def test_a_deformable_attention_is_an_attention_core() -> None:
    """Class 14: values sampled by ``grid_sample`` at points moved by learned offsets,
    weighted by a softmax over the points and summed. Main found no core: no blocks, the
    whole model ``other`` (1,518 params, 5,072 MACs), with a warning; inside a block with
    another core (ultralytics' RT-DETR decoder) the deformable cross-attention was ``mlp``."""
    profile = analyze(Net(DeformBlk), image_size=IMAGE, recognizer="graph")
    assert {c: (v.params, v.macs) for c, v in profile.components.items()
            if (v.params, v.macs) != (0, 0)} == net(_times(L, DEFORM))
    sampled = [op for op in profile.ops if op.op == "aten.grid_sampler_2d"]
    assert [(op.component, op.block) for op in sampled] == [(C.ATTN_CORE, 0), (C.ATTN_CORE, 1)]
    assert profile.self_checks == ()
