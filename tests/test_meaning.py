"""Issue 35's defect classes 5, 8, 13 and 14 (query selection) on their neutral-name fixtures
(tests/recognition_fixtures.py), and the self-checks of meaning (vitprof/count/self_checks.py)
firing on the fixture of the class each guards, with that class's fix switched off."""

from __future__ import annotations

from recognition_fixtures import (
    IMAGE,
    SHARED_NORMS,
    TABLES,
    ListsNet,
    TablesNet,
    net,
)

from vitprof import analyze
from vitprof.core.records import Component as C


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
