"""``vitprof analyze --explain``: per module its component, block and the rule that placed it.

torchvision ``vit_b_16`` (224 px: N = 197 tokens, D = 768, MLP 3072, 12 blocks) under the default
recognizer, ``auto``, which is the graph (the torchvision table detects the model and is only
compared): every module row names one rule of the registry, one per (module, component), and
never a table's name, in table, markdown and JSON; the rows add up to the totals.
"""

from __future__ import annotations

import json

import pytest

from vitprof import analyze
from vitprof.cli.main import main
from vitprof.count.result import Profile
from vitprof.models.libraries import LIBRARIES
from vitprof.recognize.rules.registry import RULES
from vitprof.render.formats import render
from vitprof.render.tables import profile_document

# rows of one block of vit_b_16 and the rule that placed each, (module under the block, component)
BLOCK_RULES = {
    ("ln_1", "norm"): "norm-op",
    ("self_attention", "attn_qkv"): "qkv-feeds-core",
    ("self_attention", "attn_core"): "fused-attention-op",
    ("self_attention", "attn_proj"): "proj-after-core",
    ("self_attention.out_proj", "attn_proj"): "proj-after-core",  # its parameters
    ("ln_2", "norm"): "norm-op",
    ("mlp.0", "mlp"): "weighted-in-block",
    ("mlp.3", "mlp"): "weighted-in-block",
    ("mlp.1", "mlp"): "producer",  # the GELU follows its linear
    ("", "attn_proj"): "producer",  # the residual adds follow their branch
    ("", "mlp"): "producer",
}
OUTSIDE_RULES = {
    ("conv_proj", "patch_embed"): "weighted-before-blocks",
    ("(root)", "tokens"): "token-parameter",  # the class token, concatenated
    ("encoder", "tokens"): "token-parameter",  # the position embedding, added
    ("encoder.ln", "norm"): "norm-op",
    ("heads.head", "head"): "after-last-block-head",
}


TABLES = {table.name for library in LIBRARIES for table in library.tables}


@pytest.fixture(scope="module")
def vit_b_16() -> Profile:
    return analyze("vit_b_16")  # auto: the graph decides


def _key(row: dict) -> tuple[str, str]:
    prefix = f"encoder.layers.encoder_layer_{row['block']}"
    module = row["module"]
    if row["block"] != "outside":
        module = module.removeprefix(prefix).removeprefix(".")
    return module, row["component"]


def test_every_module_row_of_vit_b_16_names_one_rule(vit_b_16: Profile) -> None:
    assert vit_b_16.recognizer == "graph (torchvision table agrees)"
    rows = vit_b_16.explain_rows()
    assert all(row["placed_by"] in RULES for row in rows)
    keys = [(row["module"], row["component"]) for row in rows]
    assert len(keys) == len(set(keys))  # one rule per module and component
    found = {_key(row): row["placed_by"] for row in rows}
    assert found == {**BLOCK_RULES, **OUTSIDE_RULES}
    assert {row["block"] for row in rows} == {"outside", *range(12)}
    for count in ("params", "macs", "vector_flops"):
        assert sum(row[count] for row in rows) == getattr(vit_b_16.totals, count)
    # one block's q/k/v: 197 tokens x 768 x 3 * 768 = 348_585_984 MACs, as the rule placed them
    qkv = [row for row in rows if row["placed_by"] == "qkv-feeds-core"]
    assert {row["macs"] for row in qkv} == {197 * 768 * 3 * 768}


@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_explain_table_and_markdown_show_the_rule_column(vit_b_16: Profile, fmt: str) -> None:
    text = render(profile_document(vit_b_16, "component", explain=True), fmt)
    assert "rule" in text and "evidence" in text
    lines = [line for line in text.splitlines() if "encoder_layer_3.mlp.0" in line]
    assert len(lines) == 1 and "weighted-in-block" in lines[0] and " 3 " in lines[0]


def _module_rules(text: str, fmt: str) -> list[str]:
    """The rule column of every module row of ``analyze --by module --explain`` output: in a
    table or markdown, the rows after the header's rule line, up to a blank line, but the
    total."""
    if fmt == "json":
        return [row["placed_by"] for row in json.loads(text)["by_module"]]
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip("| ").startswith("module "))
    end = lines.index("", start) if "" in lines[start:] else len(lines)
    split = "|" if fmt == "markdown" else "  "
    rows = [[cell.strip() for cell in line.strip("|").split(split) if cell.strip()]
            for line in lines[start:end]]
    return [row[rows[0].index("rule")] for row in rows[2:] if row[0] != "total"]


@pytest.mark.parametrize("fmt", ["table", "markdown", "json"])
def test_explain_through_the_cli_names_a_graph_rule_on_every_module(capsys, fmt: str) -> None:
    assert main(["analyze", "vit_b_16", "--by", "module", "--explain", "--format", fmt]) == 0
    rules = _module_rules(capsys.readouterr().out, fmt)
    # vit_b_16's module rows: 12 blocks x 11 (BLOCK_RULES) + 5 outside (OUTSIDE_RULES) = 137
    assert len(rules) == 12 * len(BLOCK_RULES) + len(OUTSIDE_RULES) == 137
    assert set(rules) <= set(RULES) and not set(rules) & TABLES
    assert set(rules) == set(BLOCK_RULES.values()) | set(OUTSIDE_RULES.values())


def test_explain_json_through_the_cli(capsys) -> None:
    assert main(["analyze", "vit_b_16", "--explain", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["family"] == "graph (torchvision table agrees)"
    rows = data["by_module"]
    assert rows and all(row["placed_by"] in RULES and "evidence" in row for row in rows)
    assert sum(row["macs"] for row in rows) == data["totals"]["macs"]


def test_explain_by_op_splits_op_rows_by_rule(vit_b_16: Profile) -> None:
    document = profile_document(vit_b_16, "op", explain=True)
    rows = document.data["by_op"]
    linear = {row["placed_by"]: row["calls"] for row in rows if row["op"] == "aten.addmm"}
    # per block: q/k/v (one in_proj), output projection, two MLP linears; the head's addmm
    assert linear == {"qkv-feeds-core": 12, "proj-after-core": 12, "weighted-in-block": 24,
                      "after-last-block-head": 1}


@pytest.mark.parametrize("recognizer", ["tables", "graph", "auto"])
def test_a_table_names_itself_and_map_names_override(recognizer: str) -> None:
    profile = analyze("vit_b_16", overrides=[("heads", "other")], recognizer=recognizer)
    rules = {(row["module"], row["component"]): row["placed_by"]
             for row in profile.explain_rows()}
    assert rules["heads.head", "other"] == "override"
    table = "torchvision" if recognizer == "tables" else "weighted-before-blocks"
    assert rules["conv_proj", "patch_embed"] == table


def test_explain_by_block_is_refused_in_one_line(capsys) -> None:
    """--explain has views by module and by op; main dropped --by block silently (module rows)."""
    assert main(["analyze", "vit_b_16", "--by", "block", "--explain"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("vitprof: error: --explain lists modules")
    assert "Traceback" not in err
