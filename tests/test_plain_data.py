"""Results as plain data: closed vocabularies as str enums, displays registered by the renderer,
module totals and the folded module table, on tiny models counted on meta."""

from __future__ import annotations

import json
from importlib.resources import files

import pytest
import torch
from torch import nn

from vitprof import UserError, analyze
from vitprof.checks.crosscheck.table import CrossCheck
from vitprof.checks.diff import Snapshot, compare
from vitprof.core.display import Shown, show
from vitprof.core.vocab import EventKind, Mode, Recognizer
from vitprof.count.session import Event, count, image_inputs
from vitprof.render.crosscheck import crosscheck_document
from vitprof.render.diff import diff_document
from vitprof.render.document import Document
from vitprof.render.formats import render
from vitprof.render.sweep import sweep_document
from vitprof.render.tables import profile_document, profile_repr
from vitprof.sweep import sweep_from


class Inner(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 8)
        self.act = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.fc(x))


class Wrapper(nn.Module):
    """A single-child chain: ``wrap`` holds ``inner`` alone."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = Inner()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x)


class Outer(nn.Module):
    """``head(wrap.inner(x))``: ``wrap`` and ``wrap.inner`` fold into one row."""

    def __init__(self) -> None:
        super().__init__()
        self.wrap = Wrapper()
        self.head = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.wrap(x))


SHAPE = (1, 3, 4)  # batch 1 of 3 tokens of 4 features


# ------------------------------------------------------------------ vocabularies


def test_mode_is_an_enum_that_reads_as_its_string() -> None:
    profile = analyze(Outer(), input_shape=SHAPE, mode="train")
    assert profile.mode is Mode.TRAIN and profile.mode == "train"
    data = profile.to_dict()
    assert json.loads(json.dumps(data))["mode"] == "train" and "training" in data
    assert analyze(Outer(), input_shape=SHAPE).mode is Mode.INFERENCE


def test_recognizer_names_are_an_enum_the_api_takes_as_strings() -> None:
    assert [str(r) for r in Recognizer] == ["auto", "graph", "tables"]
    by_string = analyze(Outer(), input_shape=SHAPE, recognizer="graph")
    by_member = analyze(Outer(), input_shape=SHAPE, recognizer=Recognizer.GRAPH)
    assert by_string.recognizer == by_member.recognizer == "graph"


def test_module_events_say_their_kind_as_an_enum() -> None:
    model = Outer()
    events: list[Event] = []
    count(model, image_inputs(torch.zeros(3, 4, device="meta")),
          on_event=events.append)
    assert {type(e.kind) for e in events} == {EventKind}
    # each of the 6 modules (root, wrap, wrap.inner, wrap.inner.fc, wrap.inner.act, head)
    # is entered once and left once
    assert [e.kind for e in events].count(EventKind.ENTER) == 6
    assert [e.kind for e in events].count("leave") == 6


def test_family_is_a_deprecated_alias_of_recognizer() -> None:
    profile = analyze(Outer(), input_shape=SHAPE, recognizer="tables")
    assert profile.recognizer == "graph"  # no table detects Outer: the graph places it
    with pytest.warns(DeprecationWarning, match="Profile.recognizer"):
        assert profile.family == profile.recognizer
    assert profile.to_dict()["family"] == "graph"  # the JSON key stays (schema_version 2)


def test_the_json_names_the_recognizer_beside_the_deprecated_family() -> None:
    data = analyze(Outer(), input_shape=SHAPE).to_dict()
    assert data["recognizer"] == data["family"] == "graph"
    schema = json.loads((files("vitprof") / "schemas" / "profile.json").read_text())
    assert "recognizer" in schema["required"]
    assert schema["properties"]["family"]["deprecated"] is True


# ------------------------------------------------------------------ displays


def _renders(result: object, document: Document, short: str) -> None:
    """``result`` shows ``short`` as its repr and ``document`` as a notebook's markdown and
    HTML: what the result's own methods returned before the renderer registered them."""
    assert repr(result) == short
    assert result._repr_markdown_() == render(document, "markdown")  # type: ignore[attr-defined]
    assert result._repr_html_() == render(document, "html")  # type: ignore[attr-defined]


def test_a_profile_shows_what_the_renderer_makes_of_it() -> None:
    profile = analyze(Outer(), input_shape=SHAPE)
    _renders(profile, profile_document(profile), profile_repr(profile))
    assert repr(profile).startswith("Profile(Outer, ")


def test_checks_results_show_their_tables() -> None:
    small, large = analyze(Outer(), input_shape=SHAPE), analyze(Outer(), input_shape=(2, 3, 4))
    diff = compare(Snapshot.from_profile(small), Snapshot.from_profile(large))
    _renders(diff, diff_document(diff), render(diff_document(diff), "table"))
    swept = sweep_from("Outer", "depth", None, [(1, small)])
    _renders(swept, sweep_document(swept), render(sweep_document(swept), "table"))
    check = CrossCheck("Outer", SHAPE, "float32", torch.__version__, "meta", "none seen",
                       small.totals, [])
    _renders(check, crosscheck_document(check), render(crosscheck_document(check), "table"))


def test_an_unregistered_result_says_so() -> None:
    class Unknown(Shown):
        pass

    with pytest.raises(LookupError, match="no display registered for Unknown"):
        show(Unknown(), "html")


# ------------------------------------------------------------------ module totals and table
# Outer on 3 tokens of 4 features: wrap.inner.fc = Linear(4, 8), 4 * 8 + 8 = 40 params,
# 3 * 4 * 8 = 96 MACs; head = Linear(8, 2), 8 * 2 + 2 = 18 params, 3 * 8 * 2 = 48 MACs;
# wrap.inner.act (ReLU) holds no parameter and no MAC


def test_total_of_a_module_holds_everything_under_it() -> None:
    profile = analyze(Outer(), input_shape=SHAPE)
    inner = profile.total("wrap.inner")
    assert (inner.params, inner.macs) == (40, 96)
    assert profile.total("wrap") == inner  # wrap runs inner alone
    assert (profile.total("head").params, profile.total("head").macs) == (18, 48)
    assert profile.total("wrap.inner.act").macs == 0
    assert inner.vector_flops == (profile.total("wrap.inner.fc").vector_flops
                                  + profile.total("wrap.inner.act").vector_flops)
    assert profile.total() == profile.totals == inner + profile.total("head")  # 58 params
    with pytest.raises(UserError, match=r"under the module 'wrap\.inne'"):
        profile.total("wrap.inne")  # a prefix of a path is no module


def test_by_module_depth_folds_single_child_chains() -> None:
    profile = analyze(Outer(), input_shape=SHAPE)
    top = profile.by_module(depth=1)
    # wrap's one child, inner, has wrap's counts: one row, under inner's path
    assert list(top["module"]) == ["(root)", "wrap.inner", "head"]
    assert list(top["depth"]) == [0, 1, 1]
    assert list(top["params"]) == [40 + 18, 40, 18] and list(top["macs"]) == [96 + 48, 96, 48]
    rows = profile.module_tree_rows(2)
    assert [(r["module"], r["depth"], r["macs"]) for r in rows] == [
        ("(root)", 0, 144), ("wrap.inner", 1, 96), ("wrap.inner.fc", 2, 96),
        ("wrap.inner.act", 2, 0), ("head", 1, 48)]
    assert [r["module"] for r in profile.module_tree_rows(0)] == ["(root)"]
    assert list(profile.by_module().columns[:2]) == ["module", "component"]  # as before


def test_a_model_that_is_one_chain_folds_into_one_row() -> None:
    profile = analyze(Wrapper(), input_shape=SHAPE)
    # root -> inner has two children (fc, act): the root folds into inner, one level
    assert [r["module"] for r in profile.module_tree_rows(0)] == ["inner"]
    with pytest.raises(UserError, match="at least 0"):
        profile.module_tree_rows(-1)
