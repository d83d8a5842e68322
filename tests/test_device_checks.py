"""benchmarks/device_checks.py: the one call that runs every CUDA check on a lent GPU.

Its CUDA work cannot run here; what can: the refusal without CUDA, the choice of checks, and that
one failed check neither stops the others nor passes as green.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "device_checks.py"


def run_script(*args: str) -> subprocess.CompletedProcess[str]:
    """The script in a process of its own, with no GPU visible (CUDA_VISIBLE_DEVICES empty)."""
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          env={**os.environ, "CUDA_VISIBLE_DEVICES": ""}, timeout=300)


def test_it_refuses_in_one_line_without_cuda(tmp_path: Path) -> None:
    done = run_script(str(tmp_path / "out"))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "no CUDA device" in done.stderr
    assert not (tmp_path / "out").exists()


def test_an_unknown_check_is_a_usage_error(tmp_path: Path) -> None:
    done = run_script(str(tmp_path / "out"), "--only", "profile,speed")
    assert done.returncode == 2
    assert "unknown check(s): speed" in done.stderr and "no CUDA device" not in done.stderr


def test_a_failed_check_is_reported_and_the_next_still_runs(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # the one test that loads the script as a module: it replaces two of its runners, which
    # no command line can (the others run it as a command)
    spec = importlib.util.spec_from_file_location("device_checks", SCRIPT)
    assert spec is not None and spec.loader is not None
    checks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(checks)
    ran: list[str] = []

    def broken(_out: Path, _peak: float | None) -> None:
        ran.append("memory")
        raise RuntimeError("CUDA out of memory")

    monkeypatch.setitem(checks.RUNNERS, "memory", broken)
    monkeypatch.setitem(checks.RUNNERS, "mfu", lambda _out, peak: ran.append(f"mfu {peak}"))
    lines = checks.run_checks(tmp_path, ["memory", "mfu"], 989.4)
    assert ran == ["memory", "mfu 989.4"]
    assert lines[0].startswith("| memory |")
    assert "FAILED: RuntimeError: CUDA out of memory" in lines[0]
    assert lines[1].startswith("| mfu |") and lines[1].endswith("| ok |")
    assert "CUDA out of memory" in (tmp_path / "memory_error.txt").read_text()
