"""Issue 35's defect classes 5 (two shapes), 8, 13 and 14 (query selection), a class token
joined before post-norm blocks and a model that is one layer whose skip is its input, on their
neutral-name fixtures (tests/recognition_fixtures.py), and the self-checks of meaning
(vitprof/recognize/self_checks.py) firing on the fixture of the class each guards, with that
class's fix switched off."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from recognition_fixtures import (
    FIXTURES,
    HID,
    IMAGE,
    INPUT_SKIP,
    POST_NORM_CLASS,
    QUERY_SELECTION,
    REPEATED_TABLES,
    SHARED_NORMS,
    SIDE,
    TABLES,
    VECTOR_NORM,
    Blk,
    D,
    InputSkipLayer,
    L,
    LambdaBlk,
    ListsNet,
    N,
    Net,
    PostNormClassNet,
    QuerySelectionNet,
    RepeatedTablesNet,
    TablesNet,
    VectorNormBlk,
    _sum,
    _times,
    analyze_under,
    block,
    decoder_layer,
    net,
)
from torch import nn
from torch.nn.utils import parametrize

from vitprof import analyze
from vitprof.core.records import Component as C
from vitprof.core.records import OpRecord, ParamRecord
from vitprof.recognize.rules.base import RuleSet
from vitprof.recognize.self_checks import same_computation_split_differently, self_checks

MEANING = ("weight in another component", "weight operand in tokens", "norm affine elsewhere",
           "same computation split differently", "feed-forwards outside blocks")


def _breakdown(model: object) -> dict[C, tuple[int, int]]:
    profile = analyze(model, image_size=IMAGE, recognizer="graph")
    return {c: (v.params, v.macs) for c, v in profile.components.items()
            if (v.params, v.macs) != (0, 0)}


def test_layers_run_from_parallel_lists_are_blocks_with_their_feed_forwards() -> None:
    """Class 8: one module runs every layer from a list of attentions and a parallel list of
    feed-forwards, norms shared. Main put the feed-forwards outside the blocks: the first
    ``conv`` (280 params, 1,024 MACs), the last ``head``, ``mlp`` 0."""
    assert _breakdown(ListsNet()) == net(SHARED_NORMS)


def test_a_position_table_made_from_parameters_alone_is_tokens() -> None:
    """Class 5: a D x 3 x 3 table resized to the map plus a 1-D table, added to the tokens.
    Main placed the 1-D table (D = 8 params) and the add joining the sum to the tokens in
    ``patch_embed`` (its params 392 + 8 = 400)."""
    profile = analyze(TablesNet(), image_size=IMAGE, recognizer="graph")
    assert {c: (v.params, v.macs) for c, v in profile.components.items()
            if (v.params, v.macs) != (0, 0)} == net(TABLES)
    joins = [op for op in profile.ops if op.module == "" and op.op == "aten.add"]
    assert [op.component for op in joins] == [C.TOKENS]



def test_position_tables_repeated_by_free_ops_are_tokens() -> None:
    """Class 5, tables through free ops: a row table repeated over the rows plus a column
    table repeated over each row's positions, a class table concatenated before them, the sum
    added to the tokens after a class token. Main placed both adds in ``patch_embed`` (the
    records reading the tables through ``repeat`` counted as reading input data) and the
    self-check of one module in two components fired."""
    profile = analyze(RepeatedTablesNet(), image_size=IMAGE, recognizer="graph")
    assert {c: (v.params, v.macs) for c, v in profile.components.items()
            if (v.params, v.macs) != (0, 0)} == REPEATED_TABLES
    assert [(op.op, op.component) for op in profile.ops if op.module == "o"] == [
        ("aten.add", C.TOKENS), ("aten.add", C.TOKENS)]
    assert profile.self_checks == ()


def test_a_model_that_is_one_layer_fed_its_skip_is_its_closed_form() -> None:
    """A model that is one post-norm encoder layer alone (ultralytics' AIFI): its residual adds
    take the model's input itself as their skip, and a sin-cos table made from constants is
    added to it for q and k. Main found no residual join: the feed-forward (280 params, 1,024
    MACs) was ``head`` and the table's two products (16 MACs) ``conv``."""
    profile = analyze(InputSkipLayer(), input_shape=(1, D, SIDE, SIDE), recognizer="graph")
    assert {c: (v.params, v.macs) for c, v in profile.components.items()
            if (v.params, v.macs) != (0, 0)} == INPUT_SKIP
    assert {op.block for op in profile.ops if op.module in ("g", "h")} == {0}
    assert profile.self_checks == ()


def test_a_class_token_concatenated_before_post_norm_blocks_is_tokens() -> None:
    """A class token plus row 0 of the position table, concatenated before the patches, read
    first by a post-norm block's q/k/v linear (torchmultimodal's post-norm ViT). Main placed
    the token and the table (D + (N + 1) * D = 48 params) in ``attn_qkv``: the linear reads
    what records computed from parameters alone, as it reads a weight."""
    profile = analyze(PostNormClassNet(), image_size=IMAGE, recognizer="graph")
    assert {c: (v.params, v.macs) for c, v in profile.components.items()
            if (v.params, v.macs) != (0, 0)} == POST_NORM_CLASS
    assert {(p.name, p.component, p.placed_by) for p in profile.params
            if p.name in ("t", "p")} == {("t", C.TOKENS, "concatenated-parameter"),
                                         ("p", C.TOKENS, "concatenated-parameter")}


def test_a_query_selection_between_encoder_and_decoder_is_head_in_no_block() -> None:
    """Class 14: an MLP scoring the encoder's tokens, top-K, the decoder attending over all
    of them. Main put the scorer (81 params, 288 MACs) in the decoder's first block as
    ``mlp`` (token-selector) and the queries' projection in ``patch_embed`` inside that block
    (a self-check fired)."""
    profile = analyze(QuerySelectionNet(), image_size=IMAGE, recognizer="graph")
    assert {c: (v.params, v.macs) for c, v in profile.components.items()
            if (v.params, v.macs) != (0, 0)} == _sum(net(QUERY_SELECTION),
                                                     _times(L, decoder_layer()))
    assert {op.block for op in profile.ops if op.module.startswith("s.")} == {None}
    assert profile.self_checks == ()


class Unit(nn.Module):
    """A parametrization: the weight's rows scaled to unit length."""

    def forward(self, w: torch.Tensor) -> torch.Tensor:
        return F.normalize(w, dim=-1)


class UnitQkvBlk(Blk):
    """The standard block, its q/k/v weight ``d`` parametrized (class 1); ``bare``: ``d``
    without a bias, so that its records read no parameter but the parametrized weight."""

    def __init__(self, bare: bool = False) -> None:
        super().__init__()
        if bare:
            self.d = nn.Linear(D, 3 * D, bias=False)
        parametrize.register_parametrization(self.d, "weight", Unit())


class NormalizeRms(nn.Module):
    """An RMSNorm written with ``F.normalize`` times a gain (class 2): no norm op."""

    def __init__(self) -> None:
        super().__init__()
        self.g = nn.Parameter(torch.ones(D))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(x, dim=-1) * self.g * D ** 0.5


class NormalizeRmsBlk(Blk):
    def __init__(self) -> None:
        super().__init__()
        self.c, self.f = NormalizeRms(), NormalizeRms()


class TokensInNet(Net):
    """The standard net of :class:`~recognition_fixtures.VectorNormBlk` blocks (an RMS norm
    written with ``F.normalize`` before the attention, a gained LayerNorm before the MLP), fed
    tokens (1 x N x D) without a patch projection: the first block's first norm divides the
    model's input, which no record computed, by its vector norm."""

    def __init__(self) -> None:
        super().__init__(VectorNormBlk)
        del self.a

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for k in self.m:
            x = k(x)
        return self.b(self.after(self.n(x)))


def test_a_vector_norm_of_the_models_input_is_a_norm() -> None:
    """Class 2 on a model fed tokens (performer-pytorch's Performer with ScaleNorm): main took
    the first norm for no norm, as it read no record, and put its gain (D = 8 params) in
    ``attn_qkv``."""
    profile = analyze(TokensInNet(), input_shape=(1, N, D), recognizer="graph")
    assert {c: (v.params, v.macs) for c, v in profile.components.items()
            if (v.params, v.macs) != (0, 0)} == _sum(
        {C.NORM: (2 * D, 0), C.HEAD: (D * 10 + 10, D * 10)},  # the final LayerNorm, the head
        _times(L, {**block(), **VECTOR_NORM}))  # per block two norms of a D-element gain
    assert not profile.self_checks


class ScaledLogitsNet(Net):
    """The standard net whose own forward normalises the tokens after the blocks with
    ``F.normalize`` (no gain) and scales the head's logits by a parameter ``s`` (10, one per
    class): the root module normalises by a vector norm, runs no MACs itself, and holds
    ``s``, which multiplies the head's output, not the normalised tokens."""

    def __init__(self) -> None:
        super().__init__()
        self.s = nn.Parameter(torch.ones(10))

    def after(self, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(x, dim=-1).mean(1)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return super().forward(image) * self.s


def test_a_scale_of_the_logits_is_no_gain_of_a_norm() -> None:
    """Issue 35's nViT: its forward l2-normalises the tokens and multiplies the classifier's
    logits by ``logit_scale``, a head's parameter. Main's check took every parameter of a
    module normalising by a vector norm for its gain and failed on the 10 params in head."""
    profile = analyze(ScaledLogitsNet(), image_size=IMAGE, recognizer="graph")
    assert {c: (v.params, v.macs) for c, v in profile.components.items()
            if (v.params, v.macs) != (0, 0)} == net({C.HEAD: (10, 0)})  # s: 10 params, no MACs
    assert not profile.self_checks


def _two_blocks(second: C) -> tuple[OpRecord, ...]:
    """Two blocks running the same ops on the same shapes (a q/k/v linear of 768 MACs, a core
    product of 32, an MLP linear of 256), the second's MLP linear placed in ``second``."""
    return tuple(OpRecord(op, "", component, block, macs, 0)
                 for block in (0, 1)
                 for op, component, macs in (("aten.addmm", C.ATTN_QKV, 768),
                                             ("aten.bmm", C.ATTN_CORE, 32),
                                             ("aten.addmm", C.MLP if block == 0 else second, 256)))


def test_two_blocks_of_one_computation_split_differently_fail_a_check() -> None:
    """Check 4 on records: the same ops, MACs and vector FLOPs record by record, the MLP
    linear of one block placed as ``attn_proj`` (a lambda layer's next MLP layer)."""
    assert self_checks(_two_blocks(C.MLP)) == []
    fired = self_checks(_two_blocks(C.ATTN_PROJ))
    assert fired == ["self-check failed (same computation split differently): 1,056 MACs in "
                     "blocks that run the same ops or layers as another block, split otherwise, "
                     "in (root)"]
    # 768 + 32 + 256 = 1_056: the MACs of the block split otherwise


def _layered_block(block: int, tokens: int, mlp: C, fused: bool) -> list[OpRecord]:
    """A block on ``tokens`` tokens: a q/k/v linear ``q`` (D -> 3D), a core's two products, an
    output linear ``o`` (D -> D), with ``fused`` a product of two activations (a token fused
    from 2 dropped: 1 x 2 by 2 x D), then an MLP linear ``u`` (D -> HID) placed in ``mlp``."""
    return [OpRecord(op, "", component, block, macs, 0) for op, component, macs in (
        ("aten.addmm", C.ATTN_QKV, tokens * D * 3 * D),
        ("aten.bmm", C.ATTN_CORE, tokens * tokens * D),
        ("aten.bmm", C.ATTN_CORE, tokens * tokens * D),
        ("aten.addmm", C.ATTN_PROJ, tokens * D * D),
        *((("aten.bmm", C.ATTN_CORE, 2 * D),) if fused else ()),
        ("aten.addmm", mlp, tokens * D * HID))]


def test_blocks_of_the_same_layers_split_differently_fail_a_check() -> None:
    """Check 4 on the layers: three blocks whose weighted records read parameters of the same
    shapes, in the same order, but run other ops between them (a fused token's product) on
    other numbers of tokens; the first block's MLP linear in ``attn_proj``, as most blocks' is
    not."""
    shapes = {"q": (3 * D, D), "o": (D, D), "u": (HID, D)}
    params = [ParamRecord(f"{k}.{name}", D, C.MLP, k, shape)
              for k in range(3) for name, shape in shapes.items()]
    reads = [frozenset({f"{k}.{name}"}) if name else frozenset()
             for k in range(3) for name in ("q", "", "", "o", *([""] if k == 0 else []), "u")]

    def ops(first: C) -> tuple[OpRecord, ...]:
        return (*_layered_block(0, 4, first, fused=True), *_layered_block(1, 3, C.MLP, False),
                *_layered_block(2, 3, C.MLP, False))

    assert same_computation_split_differently(ops(C.MLP), params, reads) == []
    assert same_computation_split_differently(ops(C.ATTN_PROJ)) == []  # no reads: ops only
    fired = same_computation_split_differently(ops(C.ATTN_PROJ), params, reads)
    # block 0: 4 * 8 * 24 + 2 * 4 * 4 * 8 + 4 * 8 * 8 + 2 * 8 + 4 * 8 * 16 = 1_808
    assert fired == ["self-check failed (same computation split differently): 1,808 MACs in "
                     "blocks that run the same ops or layers as another block, split otherwise, "
                     "in (root)"]


# each check of meaning, a fixture of the class it guards, and the rules whose fix of that class
# is switched off (classes 1, 2, 8 and 11: a lambda layer's blocks fixed by class 10's rule)
GUARDED: dict[str, tuple[Callable[[], nn.Module], tuple[str, ...]]] = {
    "weight in another component": (lambda: Net(lambda: UnitQkvBlk(bare=True)),
                                    ("parametrized-weight",)),
    "weight operand in tokens": (lambda: Net(UnitQkvBlk), ("parametrized-weight",)),
    "norm affine elsewhere": (lambda: Net(NormalizeRmsBlk), ("norm-by-vector-norm",)),
    "feed-forwards outside blocks": (ListsNet, ("residual-segment-block",)),
    "same computation split differently": (lambda: Net(LambdaBlk), ("core-within-residual",)),
}


@pytest.mark.parametrize("check", list(GUARDED))
def test_each_check_of_meaning_fires_on_the_class_it_guards(check: str) -> None:
    build, switched_off = GUARDED[check]
    profile = analyze_under(RuleSet(off=switched_off), build(), image_size=IMAGE)
    fired = [line for line in profile.self_checks if f"({check})" in line]
    assert len(fired) == 1
    assert fired[0] in profile.warnings


@pytest.mark.parametrize("switched_off", ["reused-map-product", "output-by-value"])
def test_same_layers_split_differently_fires_on_a_fused_token_block(switched_off: str) -> None:
    """The block fusing the tokens it drops, either rule of its fix switched off: its MLP's
    first linear is ``attn_proj`` (the fused token's product taken for a core, or the top-k's
    indices for the attention's output), the next block's ``mlp``. The two run other ops on
    other numbers of tokens, but the same layers."""
    profile = analyze_under(RuleSet(off={switched_off}), FIXTURES["fused_token_block"].build(),
                            image_size=IMAGE)
    fired = [line for line in profile.self_checks if "(same computation split differently)" in line]
    assert len(fired) == 1
    assert fired[0] in profile.warnings


@pytest.mark.parametrize("name", list(FIXTURES))
def test_no_check_of_meaning_fires_on_a_fixture_placed_right(name: str) -> None:
    fixture = FIXTURES[name]
    with torch.no_grad() if fixture.no_grad else contextlib.nullcontext():
        profile = analyze(fixture.build(), **fixture.inputs, recognizer="graph",
                          overrides=list(fixture.overrides))
    assert [line for line in profile.self_checks if any(f"({c})" in line for c in MEANING)] == []
