"""benchmarks/device_checks.py: the one call that runs every CUDA check on a lent GPU.

Its CUDA work cannot run here; what can: the refusal without CUDA, the choice of checks, and that
one failed check neither stops the others nor passes as green (``--rehearse``: stand-ins for the
checks). Every test runs the script as a command.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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


def test_a_failed_check_is_reported_and_the_next_still_runs(tmp_path: Path) -> None:
    # --rehearse: stand-ins for the checks, memory's failing, so no GPU is needed
    done = run_script(str(tmp_path), "--only", "memory,mfu", "--peak-tflops", "989.4",
                      "--rehearse", "memory")
    assert done.returncode == 1  # one check failed: not green
    assert "rehearsed memory (peak 989.4)\nrehearsed mfu (peak 989.4)\n" in done.stdout
    lines = (tmp_path / "device_checks.md").read_text().splitlines()[4:]
    assert lines[0].startswith("| memory |")
    assert "FAILED: RuntimeError: rehearsed failure of memory" in lines[0]
    assert lines[1].startswith("| mfu |") and lines[1].endswith("| ok |")
    assert "rehearsed failure of memory" in (tmp_path / "memory_error.txt").read_text()
