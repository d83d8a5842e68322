"""Start-up: the whole process a user waits for, vitprof against what it stands on.

Every run is one fresh process, timed from spawn to exit (interpreter start, imports, building,
counting, printing, exit). Peak RSS is the child's own ``ru_maxrss`` (``os.wait4`` returns the
resource usage of that one child). Within a group the commands run in turns, A B C D, then
B C D A, ... (``--reps`` turns): load that comes and goes on a shared machine falls on every
command alike. Each cell is the median of its runs, with min and max.

Groups:

* counting one model: ``vitprof analyze MODEL --format json`` against a bare
  ``python -c "import torch, torchvision"``, a 10-line script that builds the model on the meta
  device and runs ``torch.utils.flop_counter.FlopCounterMode`` (what a user would write instead),
  and fvcore ``FlopCountAnalysis`` (it traces a real forward: the model is built on the CPU with
  random weights), for vit_b_16, vit_h_14 at 518 and the 22B ViT;
* ``vitprof --help`` against ``python -c "import torch"``;
* ``vitprof check budgets.toml`` (the repository's budget file) in one process.

Targets, stated and checked in the output: ``vitprof --help`` under a third of ``import torch``;
``vitprof analyze vit_b_16`` no slower than the FlopCounterMode script; ``vitprof check
budgets.toml`` under 10 s.

``--tree DIR`` (repeatable) adds the ``vitprof analyze`` of another checkout to each counting
group (run in ``DIR``, so that ``python -m vitprof`` is that tree's), in the same rotation as the
other commands; ``--model`` keeps some counting groups only and ``--counting-only`` skips the
help and check groups. To compare with an older commit in one command:

    git worktree add /tmp/old 5bee352
    python benchmarks/startup.py --tree /tmp/old --model vit_b_16 --counting-only --reps 15

    python benchmarks/startup.py [--reps 5] [--update reports/benchmark.md]
"""

from __future__ import annotations

import argparse
import compileall
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from machine import cpu_name
from sections import write_section

ROOT = Path(__file__).resolve().parent.parent
HEADING = "# Start-up: the whole process"
PYTHON = sys.executable
VITPROF = [PYTHON, "-m", "vitprof"]
FLOP_COUNTER_SCRIPT = r"""
import sys, torch, torchvision.models as tvm
from torch.utils.flop_counter import FlopCounterMode
from torchvision.models.vision_transformer import VisionTransformer
name, size = sys.argv[1], int(sys.argv[2])
with torch.device("meta"):
    model = (VisionTransformer(size, 14, 48, 48, 6144, 24576) if name == "vit_22b"
             else getattr(tvm, name)(image_size=size)).eval()
    with FlopCounterMode(display=False) as counter:
        model(torch.zeros(1, 3, size, size))
print(counter.get_total_flops() // 2)
"""
FVCORE_SCRIPT = r"""
import sys, torch, torchvision.models as tvm
from fvcore.nn import FlopCountAnalysis
name, size = sys.argv[1], int(sys.argv[2])
model = getattr(tvm, name)(image_size=size).eval()
analysis = FlopCountAnalysis(model, torch.zeros(1, 3, size, size))
analysis.unsupported_ops_warnings(False)
analysis.uncalled_modules_warnings(False)
print(analysis.total())
"""
MODELS = [("vit_b_16", 224), ("vit_h_14", 518), ("vit_22b", 224)]
# fvcore needs real float32 weights: 21.8B params x 4 bytes = 87 GB for the 22B ViT
FVCORE_SKIPPED = {"vit_22b": "not run: fvcore traces a real forward, which needs 87 GB of "
                             "float32 weights (21.8B params x 4 bytes)"}
HELP_TARGET = 1 / 3  # vitprof --help under a third of `import torch`
CHECK_TARGET_S = 10.0


@dataclass
class Command:
    """One command of a group, and what its runs measured."""

    label: str
    argv: list[str]
    cwd: Path = ROOT
    seconds: list[float] = field(default_factory=list)
    peak_rss: list[int] = field(default_factory=list)  # bytes
    error: str = ""

    def median(self) -> float:
        return statistics.median(self.seconds)


def run_once(command: Command) -> None:
    """Run ``command`` once in a fresh process: its wall time and its own peak RSS."""
    with tempfile.TemporaryFile() as stderr:
        start = time.perf_counter()
        process = subprocess.Popen(command.argv, stdout=subprocess.DEVNULL, stderr=stderr,
                                   cwd=command.cwd)
        _, status, usage = os.wait4(process.pid, 0)
        elapsed = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            stderr.seek(0)
            lines = stderr.read().decode(errors="replace").strip().splitlines()
            command.error = f"exit {process.returncode}: {lines[-1][:160] if lines else ''}"
            return
    command.seconds.append(elapsed)
    command.peak_rss.append(usage.ru_maxrss * 1024)  # Linux reports KiB


def run_group(commands: list[Command], reps: int) -> None:
    """``reps`` turns over ``commands``, each turn starting one command later than the last."""
    for turn in range(reps):
        for index in range(len(commands)):
            command = commands[(turn + index) % len(commands)]
            if not command.error:
                run_once(command)
        print(f"  turn {turn + 1}/{reps}: " + ", ".join(
            f"{c.label} {c.seconds[-1]:.2f} s" for c in commands if c.seconds), file=sys.stderr)


def counting_group(name: str, size: int, trees: list[Path]) -> list[Command]:
    """The commands counting ``name`` at ``size``: this checkout's ``vitprof analyze``, what it
    stands on, and the analyze of each of ``trees`` last."""
    size_args = [] if size == 224 else ["--image-size", str(size)]
    analyze = [*VITPROF, "analyze", name, *size_args, "--format", "json"]
    commands = [
        Command("vitprof analyze --format json", analyze),
        Command('python -c "import torch, torchvision"',
                [PYTHON, "-c", "import torch, torchvision"]),
        Command("FlopCounterMode on meta (10-line script)",
                [PYTHON, "-c", FLOP_COUNTER_SCRIPT, name, str(size)]),
        Command("fvcore FlopCountAnalysis (CPU)", [PYTHON, "-c", FVCORE_SCRIPT, name, str(size)]),
    ]
    if name in FVCORE_SKIPPED:
        commands[-1].error = FVCORE_SKIPPED[name]
    return commands + [Command(f"vitprof analyze --format json ({tree})", analyze, tree)
                       for tree in trees]


def table(commands: list[Command], reference: Command) -> list[str]:
    """A markdown table of ``commands``: median, range, peak RSS, and the median's ratio to
    ``reference``'s."""
    lines = [f"| command | median s | min - max s | peak RSS MiB | median / {reference.label} |",
             "| :--- | ---: | ---: | ---: | ---: |"]
    for c in commands:
        if not c.seconds:
            lines.append(f"| {c.label} | | | | {c.error} |")
            continue
        ratio = c.median() / reference.median() if reference.seconds else float("nan")
        lines.append(f"| {c.label} | {c.median():.2f} | {min(c.seconds):.2f} - "
                     f"{max(c.seconds):.2f} | {statistics.median(c.peak_rss) / 2**20:,.0f} | "
                     f"{ratio:.2f} |")
    return lines


def verdict(holds: bool) -> str:
    return "PASS" if holds else "FAIL"


def target_lines(counting: dict[str, list[Command]], help_: list[Command],
                 check: Command | None) -> list[str]:
    """Each target with the medians it compares and PASS or FAIL (the groups that ran)."""
    lines = []
    vitprof_help, import_torch = help_ or [Command("", []), Command("", [])]
    if vitprof_help.seconds and import_torch.seconds:
        limit = HELP_TARGET * import_torch.median()
        lines.append(f"- {verdict(vitprof_help.median() < limit)}: `vitprof --help` "
                     f"{vitprof_help.median():.2f} s under a third of `import torch` "
                     f"({import_torch.median():.2f} s / 3 = {limit:.2f} s)")
    if "vit_b_16" in counting:
        analyze, _, flop_counter, _, *others = counting["vit_b_16"]
        for command in [analyze, *others]:
            if command.seconds and flop_counter.seconds:
                lines.append(
                    f"- {verdict(command.median() <= flop_counter.median())}: `{command.label}` "
                    f"(vit_b_16) {command.median():.2f} s no slower than the FlopCounterMode "
                    f"script ({flop_counter.median():.2f} s): "
                    f"{command.median() / flop_counter.median():.2f}x")
    if check is None:
        return lines
    if check.seconds:
        lines.append(f"- {verdict(check.median() < CHECK_TARGET_S)}: `vitprof check "
                     f"budgets.toml` {check.median():.2f} s under {CHECK_TARGET_S:.0f} s")
    else:
        lines.append(f"- FAIL: `vitprof check budgets.toml` did not run ({check.error})")
    return lines


def machine_lines(reps: int) -> list[str]:
    cpu = cpu_name()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    import torch  # only for its version, after the timed runs

    return [
        f"- machine: {cpu}, {os.cpu_count()} cores; load average at the end {load}",
        f"- software: Python {platform.python_version()}, torch {torch.__version__}",
        f"- date: {time.strftime('%Y-%m-%d %H:%M %Z')}",
        f"- runs: {reps} turns per group, alternating; see the load average above (`--reps 15` "
        "gives tighter ranges)",
    ]


def section(counting: dict[str, list[Command]], help_: list[Command], check: Command | None,
            reps: int) -> str:
    lines = [
        HEADING, "",
        "Generated by `python benchmarks/startup.py`; every run is one fresh process, timed "
        "from spawn to exit (interpreter start, imports, build, count, output). Commands of a "
        "group run in rotating turns; each cell is the median of the runs. Peak RSS: the "
        "child's own `ru_maxrss`. vitprof's bytecode is compiled first, as an installed "
        "package's is.", "",
        *machine_lines(reps), "",
        "## Targets", "", *target_lines(counting, help_, check), "",
    ]
    for name, size in MODELS:
        if name in counting:
            lines += [f"## Counting {name} at {size}", "", *table(counting[name],
                                                                  counting[name][0]), ""]
    if help_:
        lines += ["## Help against importing torch", "", *table(help_, help_[0]), ""]
    if check is not None:
        lines += ["## `vitprof check budgets.toml` (16 entries, one process)", "",
                  *table([check], check), ""]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5, help="turns per group (default 5)")
    parser.add_argument("--update", metavar="MARKDOWN",
                        help="replace (or append) this section in MARKDOWN")
    parser.add_argument("--tree", action="append", type=Path, default=[], metavar="DIR",
                        help="another checkout whose vitprof analyze joins each counting group "
                             "(repeatable)")
    parser.add_argument("--model", action="append", choices=[name for name, _ in MODELS],
                        help="only these counting groups (repeatable; default: all)")
    parser.add_argument("--counting-only", action="store_true",
                        help="skip the help and check groups")
    args = parser.parse_args()
    trees = [tree.resolve() for tree in args.tree]
    # as an installed package is: torch's bytecode is cached in site-packages, and vitprof's must
    # be too (PYTHONDONTWRITEBYTECODE=1 would otherwise compile its modules in every run)
    for tree in [ROOT, *trees]:
        compileall.compile_dir(tree / "vitprof", quiet=1)
    counting = {}
    for name, size in MODELS:
        if args.model and name not in args.model:
            continue
        print(f"counting {name} at {size}", file=sys.stderr)
        counting[name] = counting_group(name, size, trees)
        run_group(counting[name], args.reps)
    help_: list[Command] = []
    check = None
    if not args.counting_only:
        print("help", file=sys.stderr)
        help_ = [Command("vitprof --help", [*VITPROF, "--help"]),
                 Command('python -c "import torch"', [PYTHON, "-c", "import torch"])]
        run_group(help_, args.reps)
        print("check", file=sys.stderr)
        check = Command("vitprof check budgets.toml", [*VITPROF, "check", "budgets.toml"])
        run_group([check], args.reps)
    text = section(counting, help_, check, args.reps)
    print(text)
    if args.update:
        write_section(Path(args.update), HEADING, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
