"""Issue 35's classes 13 and 14 (deformable attention) on neutral-name fixtures
(tests/recognition_fixtures.py): a deformable attention is an attention core, a decoder called
step by step after an encoder is split as its layers are, a block per call where the decoder
is one module."""

from __future__ import annotations

import torch
from recognition_fixtures import (
    CONSTANT_TABLE,
    DEFORM,
    IMAGE,
    STEPS,
    Blk,
    ConstantTableBlk,
    DeformBlk,
    L,
    LoopDecoderNet,
    Net,
    StepDecoderNet,
    _times,
    decoder_layer,
    loop_decoder,
    net,
    tokens,
)
from torch import nn

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


def test_a_decoder_called_step_by_step_in_a_loop_is_split_as_its_layers() -> None:
    """Class 13: after an encoder, a decoder of L layers called step by step, its first step
    reading the embedding of a constant start token, each step's tokens chosen by the head.
    Main put the table's 80 params and the first layer's first LayerNorm (16) in
    ``attn_qkv`` (the norm of a row looked up by constant indices read as a weight computed
    from parameters), and the head's first T - 1 calls (90 params, 160 MACs) in the decoder's
    first block as ``mlp`` (a token selector: its indices looked up the table); the last call
    ``head`` (a self-check fired)."""
    profile = analyze(LoopDecoderNet(), image_size=IMAGE, recognizer="graph")
    assert {c: (v.params, v.macs) for c, v in profile.components.items()
            if (v.params, v.macs) != (0, 0)} == loop_decoder()
    assert len(profile.blocks) == L + STEPS * L  # the encoder's, then each layer's T calls
    assert {(op.component, op.block) for op in profile.ops if op.module == "b"} == {(C.HEAD, None)}
    assert profile.self_checks == ()


def test_a_decoder_that_is_one_module_called_step_by_step_is_a_block_per_call() -> None:
    """Class 13, the decoder one module: a single decoder layer (self-attention, cross-attention
    over the encoder's output, MLP, three norms) called T times in a loop, each step reading
    the embedding of the tokens the head chose. Main made its T calls one block (2): the head's
    first T - 1 calls inside it as ``mlp`` (90 params, 160 MACs), the first call's q/k/v and
    output projections ``head`` (256 MACs, an attention-pooling head: the add after them reads
    rows looked up from a table, which no record made), with a self-check failing. Each call is
    a block: block L + k - 1 holds the layer on k queries, its params in the first."""
    profile = analyze(StepDecoderNet(), image_size=IMAGE, recognizer="graph")
    assert {c: (v.params, v.macs) for c, v in profile.components.items()
            if (v.params, v.macs) != (0, 0)} == loop_decoder(1)
    calls = {b.index: {c: v.macs for c, v in b.components.items() if v.macs}
             for b in profile.blocks if b.index >= L}
    assert calls == {L + k - 1: {c: macs for c, (_, macs) in decoder_layer(k).items() if macs}
                     for k in range(1, STEPS + 1)}
    placed = {(p.component, p.block) for p in profile.params if p.name.startswith("w.")}
    assert placed == {(c, L) for c, (params, _) in decoder_layer().items() if params}
    assert {(op.component, op.block) for op in profile.ops if op.module == "b"} == {(C.HEAD, None)}
    assert profile.self_checks == ()


class SharedActivationBlk(Blk):
    """The standard block, its MLP's GELU a module ``a``, which the net's blocks share."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.GELU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attend(self.c(x))
        return x + self.h(self.a(self.g(self.f(x))))


class SharedActivationNet(Net):
    """The standard net, its blocks (:class:`SharedActivationBlk`) in a ``Sequential`` ``m``
    that the forward calls, the first block's GELU module shared by the second."""

    def __init__(self) -> None:
        super().__init__(SharedActivationBlk)
        self.m = nn.Sequential(*self.m)  # type: ignore[assignment]
        self.m[1].a = self.m[0].a

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.b(self.after(self.n(self.m(tokens(self.a(self.prepare(image)))))))


def test_a_module_shared_by_the_blocks_makes_no_block_of_its_calls() -> None:
    """One activation module registered in the first block and called by every block (as
    bottleneck-transformer-pytorch shares its activation): its later call runs in the second
    block's forward, under the list of blocks, whose one call is no call of the first block.
    block-per-call reads the calls of the block's own module: L blocks, as without the sharing
    (it made a third block of the second call)."""
    profile = analyze(SharedActivationNet(), image_size=IMAGE, recognizer="graph")
    assert {c: (v.params, v.macs) for c, v in profile.components.items()
            if (v.params, v.macs) != (0, 0)} == net()
    assert len(profile.blocks) == L


def test_a_sin_cos_table_made_in_a_block_from_constants_is_tokens() -> None:
    """Issue 35, ultralytics' AIFI: a sin-cos position table computed in the block's forward
    from constants (token indices times frequencies: an N x 1 by 1 x D/2 product, 16 MACs a
    block) and added to the attention's input. Main gave its product the component of the
    record before it, ``norm`` (32 MACs in a component of none); in RT-DETR's AIFI
    ``patch_embed`` inside a block (a self-check fired). The check "MACs in tokens" passes a
    product the trace shows reading no weight."""
    profile = analyze(Net(ConstantTableBlk), image_size=IMAGE, recognizer="graph")
    assert {c: (v.params, v.macs) for c, v in profile.components.items()
            if (v.params, v.macs) != (0, 0)} == net(_times(L, CONSTANT_TABLE))
    assert profile.self_checks == ()
