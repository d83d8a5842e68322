"""One vocabulary: every closed set of words is an enum of :mod:`vitprof.core.vocab` (the
study's own aside), the parsers offer those enums, and the code compares with the enums, not
with their strings."""

from __future__ import annotations

import argparse
import ast
from enum import Enum
from pathlib import Path

import pytest

import vitprof
from vitprof import analyze
from vitprof.cli.main import build_parser
from vitprof.core import vocab
from vitprof.core.errors import UserError
from vitprof.core.vocab import (
    REAL_DEVICES,
    AmpDtype,
    AttentionPath,
    Device,
    DiffScope,
    Dtype,
    Freeze,
    Loss,
    MemoryTarget,
    Mode,
    Optimizer,
    Recognizer,
    SweepAxis,
    View,
    Word,
    ZeroGrad,
)

PACKAGE = Path(vitprof.__file__).parent
OWN_VOCABULARY = ("study",)  # the study's claims and verdicts keep theirs


def _sources() -> list[Path]:
    return [p for p in sorted(PACKAGE.rglob("*.py"))
            if not set(p.relative_to(PACKAGE).parts) & set(OWN_VOCABULARY)]


def _enum_classes(path: Path) -> list[str]:
    bases = {"StrEnum", "Enum", "IntEnum", "Word"}
    return [node.name for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.ClassDef)
            and any(isinstance(b, ast.Name) and b.id in bases for b in node.bases)]


def test_every_enum_of_the_library_lives_in_the_vocabulary() -> None:
    elsewhere = {f"{p.relative_to(PACKAGE)}: {name}" for p in _sources()
                 if p.name != "vocab.py" for name in _enum_classes(p)}
    assert not elsewhere
    assert len(_enum_classes(PACKAGE / "core" / "vocab.py")) >= 21  # the 21 of six files, at least


def test_a_word_is_its_string() -> None:
    assert Mode.TRAIN == "train" and f"{Device.CUDA}" == "cuda" and repr(Loss.SUM) == "'sum'"
    assert {"cpu": 1}[Device.CPU] == 1  # a word hashes as its string
    assert ", ".join(AttentionPath) == "auto, math, efficient, flash"


# (command, destination, the enum its choices are)
PARSED = [
    ("analyze", "by", View), ("analyze", "mode", Mode), ("analyze", "device", Device),
    ("analyze", "recognizer", Recognizer), ("analyze", "dtype", Dtype), ("diff", "mode", Mode),
    ("profile", "device", Device), ("memory", "optimizer", Optimizer),
    ("memory", "amp", AmpDtype), ("memory", "target", MemoryTarget),
    ("memory", "attention", AttentionPath), ("memory", "mode", Mode), ("memory", "loss", Loss),
    ("memory", "zero_grad", ZeroGrad), ("memory", "freeze", Freeze),
]


@pytest.mark.parametrize(("command", "dest", "words"), PARSED,
                         ids=[f"{c}-{d}" for c, d, _ in PARSED])
def test_the_parser_offers_the_vocabulary(command: str, dest: str, words: type[Word]) -> None:
    sub = next(a for a in build_parser(command)._actions
               if isinstance(a, argparse._SubParsersAction)).choices[command]
    action = next(a for a in sub._actions if a.dest == dest)
    assert action.choices is not None
    assert [type(c) for c in action.choices] == [words] * len(action.choices)
    offered = set(REAL_DEVICES) if (command, dest) == ("profile", "device") else set(words)
    assert set(action.choices) == offered


def test_an_unknown_word_is_one_line_naming_the_choices() -> None:
    with pytest.raises(UserError, match="unknown mode 'training'; choose from inference, train"):
        analyze("vit_b_16", mode="training")


# The words no comparison may spell out as a string, and the strings that are other words:
# the budget's setting ``image_size`` (a key, not the sweep axis) and the checkpoint setting's
# ``none`` (none, blocks or "every N": not a closed set).
COMPARED = (Mode, Device, Recognizer, AttentionPath, Optimizer, Loss, ZeroGrad, Freeze, View,
            SweepAxis, DiffScope, MemoryTarget, AmpDtype, Dtype)
OTHER_WORDS = {"image_size", "none"}


def test_no_comparison_spells_a_word_of_the_vocabulary() -> None:
    words = {str(w) for kind in COMPARED for w in kind} - OTHER_WORDS
    found = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Compare):
                continue
            operands = [node.left, *node.comparators]
            operands += [e for o in operands if isinstance(o, ast.Tuple | ast.List | ast.Set)
                         for e in o.elts]
            if any(isinstance(o, ast.Constant) and o.value in words for o in operands):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {ast.unparse(node)}")
    assert not found


def test_the_vocabulary_imports_nothing_but_the_enum_module() -> None:
    tree = ast.parse((PACKAGE / "core" / "vocab.py").read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported <= {"__future__", "enum"}
    assert all(issubclass(getattr(vocab, n), Enum) for n in dir(vocab)
               if isinstance(getattr(vocab, n), type) and getattr(vocab, n).__module__
               == vocab.__name__)
