"""The zoo sweep: every timm transformer / hybrid model and every transformers vision model type,
analysed by vitprof and held against independent oracles.

Usage::

    python benchmarks/zoo_sweep.py [--out reports] [--jobs 2] [--limit-s 300]
                                   [--source timm|hf] [--per-module N] [--models A,B] [--redo]
                                   [--neutral-names] [--own-classes]
                                   [--baseline CSV --baseline-label L]
    python benchmarks/zoo_sweep.py --summary [--out reports]   # zoo_sweep.md from the CSV

The breakdown sweep of issue 11 is ``--source timm --per-module 3``: the first three models of
each of timm's 51 attention modules (at least 100 models).

Each model runs in a child process of its own, forked from a server that imported torch, timm,
transformers and vitprof once, with a time limit, so one model that
hangs or exhausts memory costs one row, not the sweep. Rows are appended to
``<out>/zoo_sweep.csv`` as they finish; a rerun skips the models already there (``--redo`` runs
them again), so an interrupted sweep resumes where it stopped. Progress goes to stderr.

Per model the child records the input vitprof fed (and the one the model declares, when it
declares one), vitprof's params and MACs, and two oracles computed apart from vitprof on the same
input: the unique parameter elements of a fresh build, and ``torch.utils.flop_counter.
FlopCounterMode`` on the meta device (its FLOPs are 2 x MACs of matmuls, convolutions and
attention). It also records the params and MACs vitprof left in ``other``, the ops it ran
without a formula, the failed self-checks and every warning of the breakdown.
``<out>/zoo_sweep.md`` summarises the CSV per model module (the share of params and of MACs
outside ``other``, the models with unsupported ops) and is printed on stdout.

``--neutral-names`` (issue 24) analyses each model a second time, a fresh build renamed by
:func:`vitprof.testing.neutral_names` (every module path segment, parameter, buffer and class),
and compares the per-component params and MACs: ``identical``, ``warned`` (they differ, and a
warning of the renamed run says "placed without data-flow evidence"), ``CHANGED`` (they differ
silently) or ``failed`` (the renamed model could not be analysed). The page then gains a column
of these per model module and a section listing every row that is not identical; without the
flag (and without such rows in the CSV) the page is what it was.

Each row also records ``components`` (the breakdown, ``{component: [params, MACs]}``),
``placements`` (``{component: {rule: [params, MACs]}}``: what each recognition rule placed there,
the rule ``--explain`` names) and ``commit`` (the commit of the vitprof it ran, ``+changes`` when
its package differed from it); the page names the commits. ``--baseline CSV --baseline-label L``
compares the rows with another sweep's (one run at an earlier commit) and lists every model whose
breakdown moved, grouped by what places the moved records now: ``rule -> component``, each with
its reason from ``benchmarks/zoo_sweep_reasons.toml`` (its table for that label: reasons hold
against one baseline, and a new baseline starts with none). A move without a reason says
NO REASON on the page, and the page counts the models moved without one, so a change that moves
placements unannounced shows.

Conventions: MACs are multiply-accumulates; FLOPs = 2 x MACs. A model whose optional package is
missing is ``skipped``, one vitprof declines by design (a vision-language model) ``refused``, not
``failed``. A model that cannot run on meta (vitprof then needs weights to run it on the CPU) is
built on the CPU, zero-filled, for vitprof and the oracles alike; the ``device`` column says so.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path
from typing import Any

from vitprof.models.libraries import zoo_sweeps
from vitprof.study.pages.zoo_sweep import read_reasons, summary
from vitprof.study.zoo_sweep_rows import (
    FIELDS,
    breakdown,
    failure_status,
    neutral_fields,
    placements,
    read_rows,
)
from vitprof.testing import oracle_macs, unique_params

# each library's part of the sweep (which models, how to build one), by the source its rows carry
SWEEPS = zoo_sweeps()


def models(sources: list[str], per_module: int | None) -> list[tuple[str, str, str]]:
    """``(source, module, model)`` of every model of the ``sources`` asked for, in their order
    (each library's :class:`~vitprof.models.libraries.base.ZooSweep`)."""
    return [item for source in sources for item in SWEEPS[source].listed(per_module)]


def child(source: str, name: str, neutral: bool = False, own: bool = False) -> dict[str, Any]:
    """One model's row: vitprof's figures and the oracles'. The MAC oracle runs a fresh build on
    the very arguments vitprof fed (its workload's, made again on meta), so a model fed more than
    an image (a mask, a size table) is held to the same forward. ``neutral``: the breakdown of a
    fresh build renamed by ``neutral_names`` compared too (:func:`renamed_fields`); ``own``: one
    renamed by ``own_classes`` (every module a class of its own) too. ``components`` is the
    breakdown itself, ``{component: [params, MACs]}`` as JSON, for comparing two sweeps."""
    import vitprof
    from vitprof.core.records import op_calls
    from vitprof.workload import make_workload

    device = "meta"
    model, declared = SWEEPS[source].build_on(name)
    try:
        profile = vitprof.analyze(model, name=f"{source}:{name}")
    except vitprof.UserError as error:
        if "has no weights to run on" not in str(error):
            raise
        # it cannot run on meta (Perceiver reads a mask's values): vitprof would run a model
        # with weights on the CPU, so both sides get one, zero-filled (counts read shapes only)
        device = "cpu"
        model, declared = SWEEPS[source].build_on(name, device)
        profile = vitprof.analyze(model, name=f"{source}:{name}")
    shape = tuple(profile.input_shape)
    fresh, _ = SWEEPS[source].build_on(name, device)
    call = make_workload(fresh).inputs.example(device)
    compared: dict[str, str] = {}
    for column, wanted in (("neutral_names", neutral), ("own_classes", own)):
        if wanted:
            compared |= renamed_fields(source, name, device, profile, column)
    return compared | {
        "input": "x".join(map(str, shape)),
        "declared_input": "x".join(map(str, declared)) if declared else "",
        "params": profile.totals.params,
        "oracle_params": unique_params(fresh),
        "macs": profile.totals.macs,
        "oracle_macs": oracle_macs(fresh, shape, call),
        "other_macs": profile.components[vitprof.Component.OTHER].macs,
        "warnings": " | ".join(profile.warnings),
        "other_params": profile.components[vitprof.Component.OTHER].params,
        "unsupported": op_calls(profile.unsupported_ops),
        "self_checks": len(profile.self_checks),
        "attention": profile.attention_implementation,
        "device": device,
        "recognizer": profile.recognizer,
        "components": json.dumps(breakdown(profile), separators=(",", ":")),
        "placements": json.dumps(placements(profile), separators=(",", ":")),
    }


@cache
def vitprof_commit() -> str:
    """The commit of the vitprof this sweep imports (``git rev-parse --short HEAD`` in its
    package's tree), ``+changes`` when the package differs from that commit; "" outside a git
    checkout. Every row carries it, and the page names it, for each side of a comparison."""
    import subprocess

    import vitprof

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(Path(vitprof.__file__).parent), *args],
                              capture_output=True, text=True, check=False).stdout.strip()

    head = git("rev-parse", "--short", "HEAD")
    return head + "+changes" if head and git("status", "--porcelain", "--", ".") else head


def renamed_fields(source: str, name: str, device: str, real: Any,
                   renamer: str) -> dict[str, str]:
    """:func:`~vitprof.study.zoo_sweep_rows.neutral_fields` of a fresh build on ``device``
    renamed by ``vitprof.testing.<renamer>`` (``neutral_names`` or ``own_classes``), analysed
    as ``real`` was."""
    import vitprof
    import vitprof.testing

    def analyze_renamed() -> Any:
        model, _ = SWEEPS[source].build_on(name, device)
        return vitprof.analyze(getattr(vitprof.testing, renamer)(model), name=f"{source}:{name}")
    return neutral_fields(real, analyze_renamed,
                          "neutral" if renamer == "neutral_names" else renamer)


def _child_into(connection: Any, source: str, name: str, neutral: bool, own: bool) -> None:
    """The forked child: sends ``("row", fields)`` or ``("error", the error's whole text)``."""
    message: tuple[str, Any]
    try:
        message = ("row", child(source, name, neutral, own))
    except BaseException as error:  # any failure is this model's row
        message = ("error", f"{type(error).__name__}: {error}")
    connection.send(message)
    connection.close()


# what every child needs, imported once by the fork server and inherited by each forked child
# (a fresh interpreter per model spent about 4 s of a model's 8 importing them)
PRELOAD = ("torch", "timm", "transformers", "vitprof", "torch.utils.flop_counter")


@cache
def _forks() -> Any:
    """The fork server's context, made once."""
    import multiprocessing

    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(PRELOAD))
    return context


def run_one(source: str, module: str, name: str, limit_s: int,
            neutral: bool = False, own: bool = False) -> dict[str, Any]:
    """One model in a forked child of its own, killed after ``limit_s`` seconds; an error's
    status is :func:`~vitprof.study.zoo_sweep_rows.failure_status`'s; ``neutral`` and ``own``
    as :func:`child`'s."""
    row: dict[str, Any] = dict.fromkeys(FIELDS, "")
    row.update(source=source, module=module, model=name)
    start = time.monotonic()
    receiver, sender = _forks().Pipe(duplex=False)
    process = _forks().Process(target=_child_into, args=(sender, source, name, neutral, own))
    process.start()
    sender.close()
    try:
        if not receiver.poll(limit_s):
            row.update(status="timeout", error=f"over {limit_s} s")
        else:
            kind, value = receiver.recv()
            if kind == "row":
                row.update(value, status="ok")
            else:
                row.update(status=failure_status(value), error=" ".join(value.split())[:300])
    except EOFError:  # the child died without a word: killed for memory, or a crash
        process.join()
        row.update(status="failed", error=f"the child died, exit code {process.exitcode}")
    finally:
        process.kill()
        process.join()
        receiver.close()
    row.update(seconds=f"{time.monotonic() - start:.1f}", commit=vitprof_commit())
    return row


def sweep(todo: list[tuple[str, str, str]], csv_path: Path, jobs: int, limit_s: int,
          neutral: bool = False, own: bool = False) -> None:
    new_file = not csv_path.exists()
    with csv_path.open("a", newline="") as handle, ThreadPoolExecutor(jobs) as pool:
        writer = csv.DictWriter(handle, FIELDS)
        if new_file:
            writer.writeheader()
        futures = [pool.submit(run_one, *item, limit_s, neutral=neutral, own=own) for item in todo]
        start = time.monotonic()
        for index, future in enumerate(futures, 1):
            row = future.result()
            writer.writerow(row)
            handle.flush()
            left = (time.monotonic() - start) / index * (len(todo) - index)
            print(f"[{index}/{len(todo)}] {row['source']}:{row['model']} {row['status']} "
                  f"{row['seconds']} s, about {left / 60:.0f} min left", file=sys.stderr)
    rows = {(r["source"], r["model"]): r for r in read_rows(csv_path)}  # a redo's row wins
    with csv_path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, FIELDS)
        writer.writeheader()
        writer.writerows(rows.values())


# why a placement moved against an earlier sweep: a sentence per move (the file's comment says)
REASONS = Path(__file__).with_name("zoo_sweep_reasons.toml")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("reports"))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--limit-s", type=int, default=300)
    parser.add_argument("--source", choices=tuple(SWEEPS), action="append")
    parser.add_argument("--per-module", type=int, help="the first N models of each module only")
    parser.add_argument("--models", help="comma-separated model names (of the sources chosen)")
    parser.add_argument("--redo", action="store_true", help="run models already in the CSV again")
    parser.add_argument("--neutral-names", action="store_true",
                        help="also analyse each model renamed by vitprof.testing.neutral_names "
                             "and compare the breakdowns (issue 24)")
    parser.add_argument("--own-classes", action="store_true",
                        help="also analyse each model renamed by vitprof.testing.own_classes "
                             "(every module a class of its own) and compare the breakdowns")
    parser.add_argument("--baseline", type=Path, metavar="CSV",
                        help="list every placement that moved against this sweep's CSV")
    parser.add_argument("--baseline-label", default="the baseline",
                        help="how the page names the baseline (e.g. its commit)")
    parser.add_argument("--summary", action="store_true",
                        help="run nothing: write zoo_sweep.md again from the rows in the CSV")
    parser.add_argument("--child", nargs=2, metavar=("SOURCE", "NAME"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:  # one model in this process, its traceback shown: for reproducing a row
        source, name = args.child
        print(json.dumps(child(source, name, neutral=args.neutral_names, own=args.own_classes)))
        return
    baseline = (read_rows(args.baseline), args.baseline_label) if args.baseline else None
    if args.summary:
        write_summary(args.out, baseline)
        return
    todo = models(args.source or list(SWEEPS), args.per_module)
    if args.models:
        wanted = set(args.models.split(","))
        todo = [item for item in todo if item[2] in wanted]
    args.out.mkdir(parents=True, exist_ok=True)
    csv_path = args.out / "zoo_sweep.csv"
    # a row without a renaming pass is not done for a sweep that wants one
    done = {(r["source"], r["model"]) for r in read_rows(csv_path)
            if (r["neutral"] or not args.neutral_names)
            and (r["own_classes"] or not args.own_classes)}
    if not args.redo:
        todo = [item for item in todo if (item[0], item[2]) not in done]
    print(f"{len(todo)} models to run, {len(done)} already in {csv_path}", file=sys.stderr)
    sweep(todo, csv_path, args.jobs, args.limit_s, args.neutral_names, args.own_classes)
    write_summary(args.out, baseline)


def write_summary(out: Path, baseline: tuple[list[dict[str, str]], str] | None = None) -> None:
    """``<out>/zoo_sweep.md`` from the rows of ``<out>/zoo_sweep.csv`` (and ``baseline``, as
    :func:`~vitprof.study.pages.zoo_sweep.summary`'s, with its reasons from :data:`REASONS`),
    printed too."""
    reasons = read_reasons(baseline[1], REASONS) if baseline else None
    page = summary(read_rows(out / "zoo_sweep.csv"), baseline, reasons)
    (out / "zoo_sweep.md").write_text(page)
    print(page, end="")


if __name__ == "__main__":
    main()
