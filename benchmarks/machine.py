"""What the benchmarks print about the machine they ran on (shared by the benchmark scripts)."""

from __future__ import annotations

from pathlib import Path


def cpu_name() -> str:
    """The CPU's model name from /proc/cpuinfo, or "cpu" where there is none."""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "cpu"
