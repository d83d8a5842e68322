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
import tomllib
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path
from typing import Any

from vitprof.models.libraries import LIBRARIES
from vitprof.testing import oracle_macs, unique_params

# each library's part of the sweep (which models, how to build one), by the source its rows carry
SWEEPS = {library.zoo_sweep.source: library.zoo_sweep
          for library in LIBRARIES if library.zoo_sweep is not None}
FIELDS = (
    "source", "module", "model", "status", "seconds", "input", "declared_input", "params",
    "oracle_params", "macs", "oracle_macs", "other_macs", "warnings", "error", "other_params",
    "unsupported", "self_checks", "attention", "device", "neutral", "neutral_changes",
    "recognizer", "components", "own_classes", "own_classes_changes", "placements", "commit",
)  # the last thirteen came later: a CSV written before them reads them as empty
NO_EVIDENCE = "placed without data-flow evidence"  # the warning that excuses a neutral change
NEUTRAL = ("identical", "warned", "CHANGED", "failed")  # the values of the neutral column


def models(sources: list[str], per_module: int | None) -> list[tuple[str, str, str]]:
    """``(source, module, model)`` of every model of the ``sources`` asked for, in their order
    (each library's :class:`~vitprof.models.libraries.base.ZooSweep`)."""
    return [(source, module, name) for source in sources
            for module, name in SWEEPS[source].models(per_module)]


# ---- the child: one model, one JSON line on stdout ---------------------------------------------

def _build(source: str, name: str, device: str = "meta") -> tuple[Any, tuple[int, ...] | None]:
    """A fresh model on ``device`` (meta: no weights), built by its library's sweep, and the
    input size it declares (C, H, W) when it declares one. A tensor made apart from the default
    device (ImageGPT's LayerNorm calls ``torch.Tensor()``) is moved there too."""
    import torch

    with torch.device(device):
        model, declared = SWEEPS[source].build(name)
    return model.to(device), declared


def child(source: str, name: str, neutral: bool = False, own: bool = False) -> dict[str, Any]:
    """One model's row: vitprof's figures and the oracles'. The MAC oracle runs a fresh build on
    the very arguments vitprof fed (its workload's, made again on meta), so a model fed more than
    an image (a mask, a size table) is held to the same forward. ``neutral``: the breakdown of a
    fresh build renamed by ``neutral_names`` compared too (:func:`neutral_fields`); ``own``: one
    renamed by ``own_classes`` (every module a class of its own) too. ``components`` is the
    breakdown itself, ``{component: [params, MACs]}`` as JSON, for comparing two sweeps."""
    import vitprof
    from vitprof.core.records import op_calls
    from vitprof.workload import make_workload

    device = "meta"
    model, declared = _build(source, name)
    try:
        profile = vitprof.analyze(model, name=f"{source}:{name}")
    except vitprof.UserError as error:
        if "has no weights to run on" not in str(error):
            raise
        # it cannot run on meta (Perceiver reads a mask's values): vitprof would run a model
        # with weights on the CPU, so both sides get one, zero-filled (counts read shapes only)
        device = "cpu"
        model, declared = _build(source, name, device)
        profile = vitprof.analyze(model, name=f"{source}:{name}")
    shape = tuple(profile.input_shape)
    fresh, _ = _build(source, name, device)
    call = make_workload(fresh).inputs.example(device)
    compared = neutral_fields(source, name, device, profile) if neutral else {}
    if own:
        compared |= neutral_fields(source, name, device, profile, "own_classes")
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
        "components": json.dumps(_breakdown(profile), separators=(",", ":")),
        "placements": json.dumps(placements(profile), separators=(",", ":")),
    }


def _breakdown(profile: Any) -> dict[str, tuple[int, int]]:
    """``{component: (params, MACs)}`` of a Profile, zeros left out."""
    return {str(c): (n.params, n.macs) for c, n in profile.components.items()
            if n.params or n.macs}


def placements(profile: Any) -> dict[str, dict[str, list[int]]]:
    """``{component: {rule: [params, MACs]}}`` of a Profile: what each rule (``placed_by``, as
    ``--explain`` names it) placed in each component, zeros left out. A moved placement's
    reason is read from it: the rules that place the moved records now (:func:`moves`)."""
    cells: dict[str, dict[str, list[int]]] = {}
    for param in profile.params:
        cells.setdefault(str(param.component), {}).setdefault(param.placed_by, [0, 0])[0] += (
            param.numel)
    for op in profile.ops:
        cells.setdefault(str(op.component), {}).setdefault(op.placed_by, [0, 0])[1] += op.macs
    return {component: {rule: cell for rule, cell in rules.items() if any(cell)}
            for component, rules in cells.items()}


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


def neutral_changes(real: Any, renamed: Any) -> str:
    """What moved between two Profiles of one model: each component whose params or MACs
    differ, with the signed difference, and the share of the MACs that moved (the sum of the
    increases over the total MACs), e.g. ``mlp +4,096 params +65,536 MACs; attn_qkv -4,096
    params -65,536 MACs; 20.5% of MACs moved``; "" when nothing did. A different input shape is
    named first."""
    before, after = _breakdown(real), _breakdown(renamed)
    parts = [] if real.input_shape == renamed.input_shape else [
        "input " + "x".join(map(str, renamed.input_shape))]
    moved = 0
    for component in dict.fromkeys([*before, *after]):
        params, macs = (after.get(component, (0, 0))[i] - before.get(component, (0, 0))[i]
                        for i in (0, 1))
        if params or macs:
            parts.append(f"{component} {params:+,} params {macs:+,} MACs")
            moved += max(macs, 0)
    if moved and real.totals.macs:
        parts.append(f"{100 * moved / real.totals.macs:.1f}% of MACs moved")
    return "; ".join(parts)


def neutral_fields(source: str, name: str, device: str, real: Any,
                   renamer: str = "neutral_names") -> dict[str, str]:
    """The ``neutral`` and ``neutral_changes`` fields (``own_classes`` and
    ``own_classes_changes`` for ``renamer="own_classes"``): a fresh build on ``device``, renamed
    by ``vitprof.testing.<renamer>``, analysed as ``real`` was and compared with it
    (``NEUTRAL``'s values)."""
    import vitprof
    import vitprof.testing

    column = "neutral" if renamer == "neutral_names" else renamer
    model, _ = _build(source, name, device)
    try:
        renamed = vitprof.analyze(getattr(vitprof.testing, renamer)(model),
                                  name=f"{source}:{name}")
    except Exception as error:  # the renamed model's failure is this column's, not the row's
        return {column: "failed", f"{column}_changes": f"{type(error).__name__}: {error}"}
    changes = neutral_changes(real, renamed)
    warned = any(NO_EVIDENCE in warning for warning in renamed.warnings)
    verdict = "identical" if not changes else "warned" if warned else "CHANGED"
    return {column: verdict, f"{column}_changes": changes}


def _child_into(connection: Any, source: str, name: str, neutral: bool, own: bool) -> None:
    """The forked child: sends ``("row", fields)`` or ``("error", the error's whole text)``."""
    message: tuple[str, Any]
    try:
        message = ("row", child(source, name, neutral, own))
    except BaseException as error:  # any failure is this model's row
        message = ("error", f"{type(error).__name__}: {error}")
    connection.send(message)
    connection.close()


# ---- the parent: children in parallel, rows appended as they finish ---------------------------

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


def _failure(text: str) -> str:
    """The status of a child's error: ``skipped`` for a missing optional package (transformers
    says "requires the natten library"), ``refused`` for a model vitprof declines in one line
    by design (a vision-language model wants a prompt it does not build), else ``failed``."""
    if "No module named" in text or "requires the" in text:
        return "skipped"
    if text.startswith("UserError") and "is a vision-language model" in text:
        return "refused"
    return "failed"


def run_one(source: str, module: str, name: str, limit_s: int,
            neutral: bool = False, own: bool = False) -> dict[str, Any]:
    """One model in a forked child of its own, killed after ``limit_s`` seconds; an error's
    status is :func:`_failure`'s; ``neutral`` and ``own`` as :func:`child`'s."""
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
                row.update(status=_failure(value), error=" ".join(value.split())[:300])
    except EOFError:  # the child died without a word: killed for memory, or a crash
        process.join()
        row.update(status="failed", error=f"the child died, exit code {process.exitcode}")
    finally:
        process.kill()
        process.join()
        receiver.close()
    row.update(seconds=f"{time.monotonic() - start:.1f}", commit=vitprof_commit())
    return row


def read_rows(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    with path.open(newline="") as handle:
        return [{field: row.get(field) or "" for field in FIELDS} for row in csv.DictReader(handle)]


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


def _exact(row: dict[str, str]) -> bool:
    return row["params"] == row["oracle_params"] and row["macs"] == row["oracle_macs"]


def _share(total: int, inside_other: int) -> str:
    """The share of ``total`` outside ``other``, rounded down: 100% only when all of it is."""
    if not total:
        return "-"
    tenths = 1000 * (total - inside_other) // total
    return "100%" if inside_other == 0 else f"{tenths // 10}.{tenths % 10}%"


def _column_sum(rows: list[dict[str, str]], field: str) -> int:
    return sum(int(r[field] or 0) for r in rows)


def summary(rows: list[dict[str, str]],
            baseline: tuple[list[dict[str, str]], str] | None = None,
            reasons: dict[str, str] | None = None) -> str:
    """The markdown page: per module, then the models with unsupported ops, then every row that
    falls short and why, then the renaming passes run, and the placements that moved against
    ``baseline`` (another sweep's rows and its label) when one is given, with their reasons
    (``reasons``, else the reasons file's: :func:`read_reasons`)."""
    by_module: dict[tuple[str, str], list[dict[str, str]]] = defaultdict(list)
    for row in rows:
        by_module[row["source"], row["module"]].append(row)
    passes = [column for column in RENAMINGS if any(row[column] for row in rows)]
    lines = [
        "# Zoo sweep",
        "",
        "Every model analysed by vitprof on the meta device, in a child process of its own, and",
        "held against two oracles on the same input: the unique parameter elements of a fresh",
        "build, and `FlopCounterMode` on meta (FLOPs / 2). MACs are multiply-accumulates; FLOPs",
        "= 2 x MACs. Generated by `python benchmarks/zoo_sweep.py`; rows in `zoo_sweep.csv`.",
        *([f"Run at vitprof {_commits(rows)}."] if any(r["commit"] for r in rows) else []),
        "",
        "| source | module | models | ok | failed | exact totals | params outside `other` "
        "| MACs outside `other` | with unsupported ops | with failed self-checks "
        "| with warnings | input not the declared one |"
        + "".join(f" {RENAMINGS[c][0].lower()}: identical / warned / CHANGED |" for c in passes),
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|" + "--:|" * len(passes),
    ]
    for (source, module), group in sorted(by_module.items()):
        ok = [r for r in group if r["status"] == "ok"]
        params = _share(_column_sum(ok, "params"), _column_sum(ok, "other_params"))
        macs = _share(_column_sum(ok, "macs"), _column_sum(ok, "other_macs"))
        lines.append(
            f"| {source} | {module} | {len(group)} | {len(ok)} "
            f"| {sum(r['status'] in ('failed', 'timeout') for r in group)} "
            f"| {sum(map(_exact, ok))} | {params} | {macs} "
            f"| {sum(bool(r['unsupported']) for r in ok)} "
            f"| {sum(int(r['self_checks'] or 0) > 0 for r in ok)} "
            f"| {sum(bool(r['warnings']) for r in ok)} | {sum(_wrong_input(r) for r in ok)} |"
            + "".join(f" {_neutral_cell(ok, column)} |" for column in passes)
        )
    unsupported = [r for r in rows if r["status"] == "ok" and r["unsupported"]]
    lines += ["", "## Models with unsupported ops", ""]
    lines += [f"- {r['source']}:{r['model']}: {r['unsupported']}" for r in unsupported] or [
        "None."]
    plain = [r for r in rows if r["status"] == "ok" and _no_attention(r) and r["other_macs"] != "0"]
    lines += ["", "## Models that run no attention", "",
              "No attention core ran, no self-check found attention elsewhere, and no residual "
              "block convolves with a spatial kernel: these are no ViTs, and no convolutional "
              "networks with residual blocks either. They are token mixers without attention "
              "(pooling or MLP variants, which timm's attention modules hold) and plain "
              "convolutional networks without residual blocks, so their parts that no table "
              "names are in `other`, as the README says.", ""]
    lines += [f"- {r['source']}:{r['model']}: "
              f"{_share(int(r['macs'] or 0), int(r['other_macs'] or 0))} of MACs outside `other`"
              for r in plain] or ["None."]
    short = [r for r in rows if _why(r)]
    lines += ["", "## Rows that fall short", ""]
    lines += [f"- {r['source']}:{r['model']}: {_why(r)}" for r in short] or ["None."]
    for column in passes:
        lines += _neutral_section([r for r in rows if r["status"] == "ok"], column)
    if baseline is not None:
        lines += _baseline_section(rows, *baseline, reasons)
    if any(row["recognizer"] for row in rows):
        lines += _tables_section([r for r in rows if r["status"] == "ok"])
    return "\n".join(lines) + "\n"


def _tables_section(ok: list[dict[str, str]]) -> list[str]:
    """The lines of the library-tables section: the graph decides every breakdown; where a
    library's table also detected the model (by class), whether its placement agreed."""
    tabled = [r for r in ok if "table" in r["recognizer"]]
    differ = [r for r in tabled if "differs" in r["recognizer"]]
    lines = ["", "## Library tables", "",
             "The graph recognizer decides every breakdown. Where a library's table also detects "
             "the model by its classes, vitprof compares the two per block and component "
             "(params and MACs) and says so in the recognizer: "
             f"{len(tabled)} models detected by a table, {len(tabled) - len(differ)} agree, "
             f"{len(differ)} differ.", ""]
    return lines + ([f"- {r['source']}:{r['model']}: {r['recognizer']}" for r in differ]
                    or ["None differ."])


def _neutral_cell(ok: list[dict[str, str]], column: str = "neutral") -> str:
    """``identical / warned / CHANGED`` counts of a module's rows in ``column`` (a failed
    renamed run counts as CHANGED: its breakdown is not the same); ``-`` when none was
    compared."""
    verdicts = [r[column] for r in ok if r[column]]
    if not verdicts:
        return "-"
    changed = verdicts.count("CHANGED") + verdicts.count("failed")
    return f"{verdicts.count('identical')} / {verdicts.count('warned')} / {changed}"


# the renaming passes: the CSV column, the page's section title, and what the pass renamed
RENAMINGS = {
    "neutral": ("Neutral names", "`vitprof.testing.neutral_names` renamed every module path "
                "segment, parameter, buffer and class (`--neutral-names`)"),
    "own_classes": ("A class per module", "`vitprof.testing.own_classes` renamed every name as "
                    "`neutral_names` does and gave every module a class of its own "
                    "(`--own-classes`): what two copies of one block class look like"),
}


def _neutral_section(ok: list[dict[str, str]], column: str = "neutral") -> list[str]:
    """The lines of a renaming pass's section: the counts over every compared row, then each
    row whose breakdown moved, with what moved."""
    title, renamed = RENAMINGS[column]
    compared = [r for r in ok if r[column]]
    counts = {verdict: sum(r[column] == verdict for r in compared) for verdict in NEUTRAL}
    lines = ["", f"## {title}", "",
             f"Each model analysed again after {renamed}. identical: the same "
             "params and MACs in every component; warned: not the same, and the renamed run "
             f'warns "{NO_EVIDENCE}"; CHANGED: not the same, silently; failed: the renamed model '
             "could not be analysed.", "",
             f"{len(compared)} models compared: " + ", ".join(
                 f"{count} {verdict}" for verdict, count in counts.items()) + ".", ""]
    moved = [r for r in compared if r[column] != "identical"]
    lines += [f"- {r['source']}:{r['model']}: {r[column]}: {r[column + '_changes']}"
              for r in moved] or ["None moved."]
    return lines


# why a placement moved against an earlier sweep: a sentence per move (the file's comment says)
REASONS = Path(__file__).with_name("zoo_sweep_reasons.toml")


def read_reasons(label: str, path: Path = REASONS) -> dict[str, str]:
    """``{move: sentence}`` against the baseline ``label``: the reasons file's table
    ``[against."<label>"]`` ({} when it has none: every move against another baseline is
    unexplained until someone explains it). A move is ``"rule -> component"`` (:func:`moves`)."""
    with path.open("rb") as handle:
        return dict(tomllib.load(handle).get("against", {}).get(label, {}))


def _cells(placed: str) -> dict[tuple[str, str], tuple[int, int]]:
    """A ``placements`` field as ``{(component, rule): (params, MACs)}`` ({} when empty)."""
    return {(component, rule): (cell[0], cell[1])
            for component, rules in (json.loads(placed) if placed else {}).items()
            for rule, cell in rules.items()}


def moves(before: str, after: str, components: set[str]) -> tuple[str, ...]:
    """What placed the moved records now, as ``"rule -> component"``: of the ``components``
    whose params or MACs moved, each rule whose placements there grew against ``before`` (both
    ``placements`` fields, :func:`placements`); where none grew (a component only lost), each
    whose placements there changed. Read from the computation: the rule is the one
    ``--explain`` names for those records."""
    old, new = _cells(before), _cells(after)
    changed = sorted(key for key in old.keys() | new.keys()
                     if key[0] in components and old.get(key) != new.get(key))
    grew = [key for key in changed
            if any(now > then for now, then in zip(new.get(key, (0, 0)), old.get(key, (0, 0)),
                                                   strict=True))]
    return tuple(f"{rule} -> {component}" for component, rule in grew or changed)


def placement_changes(rows: list[dict[str, str]], baseline: list[dict[str, str]]
                      ) -> list[tuple[str, str, tuple[str, ...]]]:
    """``(model, what moved, moves)`` per model whose breakdown differs from its row in
    ``baseline`` (another sweep's CSV, e.g. one run at an earlier commit): each component whose
    params or MACs moved, with the signed difference, and :func:`moves`. Models absent
    from either side, or without ``components``, are left out; the caller says how many were
    compared."""
    before = {(r["source"], r["model"]): r for r in baseline
              if r["status"] == "ok" and r["components"]}
    changes = []
    for row in rows:
        key = (row["source"], row["model"])
        if row["status"] != "ok" or not row["components"] or key not in before:
            continue
        after, old = json.loads(row["components"]), json.loads(before[key]["components"])
        moved = {}
        for component in dict.fromkeys([*old, *after]):
            params, macs = (after.get(component, (0, 0))[i] - old.get(component, (0, 0))[i]
                            for i in (0, 1))
            if params or macs:
                moved[component] = f"{component} {params:+,} params {macs:+,} MACs"
        if moved:
            why = moves(before[key]["placements"], row["placements"], set(moved))
            changes.append((f"{row['source']}:{row['model']}", "; ".join(moved.values()), why))
    return changes


def _commits(rows: list[dict[str, str]]) -> str:
    """The vitprof commits the rows ran at (``unrecorded`` for rows written before the field)."""
    return ", ".join(sorted({r["commit"] or "unrecorded" for r in rows})) or "unrecorded"


def _baseline_section(rows: list[dict[str, str]], baseline: list[dict[str, str]],
                      label: str, reasons: dict[str, str] | None = None) -> list[str]:
    """The section listing every placement that moved against the sweep ``label``, grouped by
    what placed the moved records now (:func:`moves`), each move with its reason (``reasons``,
    else the reasons file's); a move the file gives no reason for says NO REASON, and the
    count of the models moved without one is in the section's first line."""
    reasons = read_reasons(label) if reasons is None else reasons
    compared = {(r["source"], r["model"]) for r in baseline if r["components"]} & {
        (r["source"], r["model"]) for r in rows if r["components"]}
    moved = placement_changes(rows, baseline)
    groups: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for model, what, why in moved:
        groups[why].append(f"- {model}: {what}")
    unexplained = sum(len(models) for why, models in groups.items()
                      if not why or not reasons.keys() >= set(why))
    lines = ["", f"## Placements against {label}", "",
             f"{len(compared)} models compared with the same sweep run at {label} "
             f"(`--baseline`; vitprof {_commits(baseline)} there, {_commits(rows)} here); "
             f"{len(moved)} moved, {unexplained} of them without a reason.", ""]
    if not moved:
        return [*lines, "None moved."]
    lines += ["The models are grouped by what places their moved records now: the rule "
              "`--explain` names for them (`placed_by`) and the component it places them in, "
              f"each with its reason against {label} from `benchmarks/{REASONS.name}` (NO "
              "REASON where it gives none).", ""]
    for why, models in sorted(groups.items()):
        lines += [f"### {', '.join(f'`{move}`' for move in why) or 'No placements recorded'}",
                  ""]
        lines += [f"- `{move}`: {reasons.get(move, 'NO REASON in the reasons file')}"
                  for move in why] or ["- NO REASON: the rows record no placements"]
        lines += ["", *models, ""]
    return lines[:-1]


def _wrong_input(row: dict[str, str]) -> bool:
    declared = row["declared_input"]
    return bool(declared) and not row["input"].endswith(declared)


def _no_attention(row: dict[str, str]) -> bool:
    """The model ran no attention (and no self-check found any that ran): no ViT, so ``other``
    is the place of its parts that no table names."""
    return row["attention"] == "none seen" and not int(row["self_checks"] or 0)


def _why(row: dict[str, str]) -> str:
    """Why a row falls short ("" when it does not): not run, totals off the oracles, the wrong
    input, anything left in ``other``, a failed self-check."""
    if row["status"] != "ok":
        return f"{row['status']}: {row['error']}"
    reasons = []
    if row["params"] != row["oracle_params"]:
        reasons.append(f"params {row['params']} vs oracle {row['oracle_params']}")
    if row["macs"] != row["oracle_macs"]:
        reasons.append(f"MACs {row['macs']} vs oracle {row['oracle_macs']}")
    if _wrong_input(row):
        reasons.append(f"counted at {row['input']}, the model declares {row['declared_input']}")
    if (int(row["other_params"] or 0) or int(row["other_macs"] or 0)) and not _no_attention(row):
        reasons.append(f"other holds {row['other_params'] or '?'} params, {row['other_macs']} MACs")
    if int(row["self_checks"] or 0):
        reasons.append(f"{row['self_checks']} failed self-check(s)")
    return "; ".join(reasons)


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
    :func:`summary`'s), printed too."""
    page = summary(read_rows(out / "zoo_sweep.csv"), baseline)
    (out / "zoo_sweep.md").write_text(page)
    print(page, end="")


if __name__ == "__main__":
    main()
