"""The zoo sweep's bookkeeping (benchmarks/zoo_sweep.py): resuming and the summary page.

The sweep itself runs hundreds of models in child processes; here its rows are made by hand.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "zoo_sweep.py"
_spec = importlib.util.spec_from_file_location("zoo_sweep", SCRIPT)
zoo_sweep = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(zoo_sweep)  # type: ignore[union-attr]


def row(model: str, **fields: str) -> dict[str, str]:
    base = dict.fromkeys(zoo_sweep.FIELDS, "")
    base.update(source="timm", module="m", model=model, status="ok", input="1x3x224x224",
                params="10", oracle_params="10", macs="100", oracle_macs="100", other_macs="0")
    base.update(fields)
    return base


def test_summary_counts_each_kind_of_shortfall() -> None:
    rows = [
        row("exact"),
        row("other_heavy", other_macs="75"),  # 25 of this row's 100 MACs outside other
        row("macs_off", macs="90"),
        row("wrong_input", input="1x3x1024x1024", declared_input="3x1024x768"),
        row("broken", status="failed", error="ValueError: x"),
    ]
    page = zoo_sweep.summary(rows)
    # 5 models, 4 ok, 1 failed; exact: 3 of the 4 ok rows (macs_off is not);
    # outside other: (100 + 25 + 90 + 100) / (100 + 100 + 90 + 100) = 315 / 390 = 80.8%
    assert "| timm | m | 5 | 4 | 1 | 3 | 80.8% | 0 | 1 |" in page
    assert "- timm:macs_off: MACs 90 vs oracle 100" in page
    assert "- timm:wrong_input: counted at 1x3x1024x1024, the model declares 3x1024x768" in page
    assert "- timm:broken: failed: ValueError: x" in page
    assert "timm:exact" not in page and "timm:other_heavy" not in page


def test_a_rerun_skips_the_rows_already_written(tmp_path: Path, monkeypatch) -> None:
    ran: list[str] = []
    monkeypatch.setattr(zoo_sweep, "run_one",
                        lambda source, module, name, limit_s: ran.append(name) or row(name))
    out = tmp_path / "zoo_sweep.csv"
    zoo_sweep.sweep([("timm", "m", "a")], out, jobs=1, limit_s=1)
    assert [r["model"] for r in zoo_sweep.read_rows(out)] == ["a"]
    zoo_sweep.sweep([("timm", "m", "b")], out, jobs=1, limit_s=1)  # appends, one header
    assert [r["model"] for r in zoo_sweep.read_rows(out)] == ["a", "b"] and ran == ["a", "b"]
