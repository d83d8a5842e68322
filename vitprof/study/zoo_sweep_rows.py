"""The zoo sweep's rows (``benchmarks/zoo_sweep.py``): the fields of its CSV, reading them back,
the status of a model that failed, and what a row records of a Profile: its breakdown, what each
recognition rule placed, and whether a renamed build of the model moved anything.

Conventions: counts are integers, MACs multiply-accumulates. A row is ``{field: text}`` over
:data:`FIELDS`, as the CSV holds it; ``breakdown`` and ``placements`` are what its
``components`` and ``placements`` fields hold as JSON. :mod:`vitprof.study.pages.zoo_sweep`
renders the rows as ``zoo_sweep.md``.
"""

from __future__ import annotations

import csv
import gzip
from collections.abc import Callable
from pathlib import Path

from vitprof.count.result import Profile
from vitprof.recognize.graph.roles import NO_EVIDENCE

FIELDS = (
    "source", "module", "model", "status", "seconds", "input", "declared_input", "params",
    "oracle_params", "macs", "oracle_macs", "other_macs", "warnings", "error", "other_params",
    "unsupported", "self_checks", "attention", "device", "neutral", "neutral_changes",
    "recognizer", "components", "own_classes", "own_classes_changes", "placements", "commit",
)  # the last thirteen came later: a CSV written before them reads them as empty
NEUTRAL = ("identical", "warned", "CHANGED", "failed")  # the values of the neutral column


def read_rows(path: Path) -> list[dict[str, str]]:
    """The rows of a sweep's CSV ([] when there is none), gzipped where its name ends in
    ``.gz`` (a baseline kept beside the page); a field the CSV lacks (it was written before the
    field) reads as empty."""
    if not path.exists():
        return []
    opened = gzip.open if path.suffix == ".gz" else open
    with opened(path, "rt", newline="") as handle:
        return [{field: row.get(field) or "" for field in FIELDS} for row in csv.DictReader(handle)]


def failure_status(text: str) -> str:
    """The status of a child's error: ``skipped`` for a missing optional package (transformers
    says "requires the natten library"), ``refused`` for a model vitprof declines in one line
    by design (a vision-language model wants a prompt it does not build), else ``failed``."""
    if "No module named" in text or "requires the" in text:
        return "skipped"
    if text.startswith("UserError") and "is a vision-language model" in text:
        return "refused"
    return "failed"


def breakdown(profile: Profile) -> dict[str, tuple[int, int]]:
    """``{component: (params, MACs)}`` of a Profile, zeros left out."""
    return {str(c): (n.params, n.macs) for c, n in profile.components.items()
            if n.params or n.macs}


def placements(profile: Profile) -> dict[str, dict[str, list[int]]]:
    """``{component: {rule: [params, MACs]}}`` of a Profile: what each rule (``placed_by``, as
    ``--explain`` names it) placed in each component, zeros left out. A moved placement's
    reason is read from it: the rules that place the moved records now
    (:func:`vitprof.study.pages.zoo_sweep.moves`)."""
    cells: dict[str, dict[str, list[int]]] = {}
    for param in profile.params:
        cells.setdefault(str(param.component), {}).setdefault(param.placed_by, [0, 0])[0] += (
            param.numel)
    for op in profile.ops:
        cells.setdefault(str(op.component), {}).setdefault(op.placed_by, [0, 0])[1] += op.macs
    return {component: {rule: cell for rule, cell in rules.items() if any(cell)}
            for component, rules in cells.items()}


def neutral_changes(real: Profile, renamed: Profile) -> str:
    """What moved between two Profiles of one model: each component whose params or MACs
    differ, with the signed difference, and the share of the MACs that moved (the sum of the
    increases over the total MACs), e.g. ``mlp +4,096 params +65,536 MACs; attn_qkv -4,096
    params -65,536 MACs; 20.5% of MACs moved``; "" when nothing did. A different input shape is
    named first."""
    before, after = breakdown(real), breakdown(renamed)
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


def neutral_fields(real: Profile, analyze_renamed: Callable[[], Profile],
                   column: str = "neutral") -> dict[str, str]:
    """The ``neutral`` and ``neutral_changes`` fields (``own_classes`` and
    ``own_classes_changes`` for ``column="own_classes"``): ``analyze_renamed()`` analyses a
    fresh build renamed by ``vitprof.testing.neutral_names`` (or ``own_classes``) as ``real``
    was; its breakdown compared with ``real``'s gives one of :data:`NEUTRAL`: ``identical``,
    ``warned`` (moved, and a warning says :data:`NO_EVIDENCE`), ``CHANGED`` (moved silently) or
    ``failed`` (the renamed model could not be analysed, its error in the changes)."""
    try:
        renamed = analyze_renamed()
    except Exception as error:  # the renamed model's failure is this column's, not the row's
        return {column: "failed", f"{column}_changes": f"{type(error).__name__}: {error}"}
    changes = neutral_changes(real, renamed)
    warned = any(NO_EVIDENCE in warning for warning in renamed.warnings)
    verdict = "identical" if not changes else "warned" if warned else "CHANGED"
    return {column: verdict, f"{column}_changes": changes}
