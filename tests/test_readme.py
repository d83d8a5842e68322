"""The README's synopses match the command line: every sub-command has one, it shows every option
of the sub-command's parser (with its choices, bracketed when optional) and no option the
parser lacks. Its sample outputs are what the command prints.

A synopsis is the text of an untagged code block that starts with ``vitprof COMMAND``, with its
indented continuation lines (never in a sample's output); a sample is an untagged code block
that starts with ``$ vitprof ...``: the command, then its output. Tagged blocks (```sh) hold
examples and are not read.
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from vitprof.cli.main import COMMANDS, build_parser, main

README = Path(__file__).resolve().parents[1] / "README.md"


def synopses(markdown: str) -> dict[str, str]:
    """Each sub-command's synopsis lines in ``markdown``, joined with single spaces."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    in_block = tagged = opening = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_block, tagged, current = not in_block, bool(line[3:].strip()), None
            opening = in_block
            continue
        tagged |= opening and line.startswith("$ ")  # a sample: its output is no synopsis
        opening = False
        if not in_block or tagged:
            continue
        if line.startswith("vitprof "):
            command = line.split()[1]
            current = found.setdefault(command, [])
            current.append(line.removeprefix(f"vitprof {command}"))
        elif current is not None and line.startswith(" "):
            current.append(line)
        else:
            current = None
    # ``--[no-]flag`` shows both ``--flag`` and ``--no-flag``
    return {
        command: re.sub(r"--\[no-\]([\w-]+)", r"--\1 | --no-\1", " ".join(" ".join(lines).split()))
        for command, lines in found.items()
    }


def subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def bracket_depth(text: str, position: int) -> int:
    return text.count("[", 0, position) - text.count("]", 0, position)


def token(text: str, word: str, flags: int = 0) -> re.Match[str] | None:
    return re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", text, flags)


def test_synopses_are_found() -> None:
    found = synopses(README.read_text())
    assert found["check"] == ("BUDGETS.toml [--format table|json|junit] [--output FILE] "
                              "[--entry NAME ...] [--update-baselines] [--image-size N|HxW] "
                              "[--frames T] [--in-chans C] [--dtype float32|bfloat16|float16] "
                              "[--input-shape B,C,...] [--input NAME=VALUE]")
    assert "--no-class-token" in found["formula"]


@pytest.mark.parametrize("command", COMMANDS)
def test_readme_synopsis_matches_the_parser(command: str) -> None:
    text = synopses(README.read_text()).get(command)
    assert text is not None, f"the README has no synopsis for 'vitprof {command}'"
    assert_synopsis_matches_the_parser(command, text)


def assert_synopsis_matches_the_parser(command: str, text: str) -> None:
    """``text`` shows every option of the sub-command's parser as the parser takes it, no other."""
    parser = subparsers()[command]
    in_required_group = {id(a) for g in parser._mutually_exclusive_groups if g.required
                         for a in g._group_actions}
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if not action.option_strings:  # a positional: its metavar, bracketed when optional
            name = action.metavar or action.dest
            found = token(text, name, re.IGNORECASE)
            assert found, f"{command}: positional {name} missing"
            optional = action.nargs in ("?", "*")
            assert (bracket_depth(text, found.start()) > 0) == optional, f"{command}: {name}"
            continue
        for option in action.option_strings:
            found = token(text, option)
            assert found, f"{command}: {option} missing from the synopsis"
            bracketed = bracket_depth(text, found.start()) > 0
            required = action.required or id(action) in in_required_group
            assert bracketed != required, f"{command}: {option} should be " + (
                "outside brackets" if required else "in brackets")
        if action.choices is not None:
            shown = f"{action.option_strings[0]} {'|'.join(map(str, action.choices))}"
            assert shown in text, f"{command}: the synopsis should show '{shown}'"
    unknown = set(re.findall(r"--[\w-]+", text)) - set(parser._option_string_actions)
    assert not unknown, f"{command}: the synopsis shows options the parser lacks: {unknown}"


def samples(markdown: str) -> dict[str, str]:
    """Each sample in ``markdown``: its command (after ``$ ``) and the output shown under it."""
    found: dict[str, str] = {}
    block: list[str] = []
    in_block = tagged = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            if in_block and not tagged and block and block[0].startswith("$ vitprof "):
                found[block[0].removeprefix("$ ")] = "\n".join(block[1:]) + "\n"
            in_block, tagged, block = not in_block, bool(line[3:].strip()), []
        elif in_block and not tagged:
            block.append(line)
    return found


def _version_free(text: str) -> str:
    """``text`` with the torch version, the one thing a sample may differ in, as ``VERSION``."""
    return re.sub(r"\btorch \d[^\s;]*", "torch VERSION", text)


def test_samples_are_found() -> None:
    found = samples(README.read_text())
    assert "vitprof analyze vit_b_16" in found
    assert any(command.startswith("vitprof crosscheck vit_b_16") for command in found)


def _sample_params(markdown: str) -> list[pytest.ParameterSet]:
    """The samples' commands; a cross-check's is slow (its peers run vit_b_16 on the CPU: about
    a minute and a half on two cores)."""
    return [pytest.param(command, marks=(pytest.mark.slow,) if " crosscheck " in command else ())
            for command in samples(markdown)]


@pytest.mark.parametrize("command", _sample_params(README.read_text()))
def test_readme_sample_is_what_the_command_prints(command: str, capsys) -> None:
    """The sample, line for line, is a real run's output (the torch version aside)."""
    assert main(shlex.split(command)[1:]) == 0
    shown = samples(README.read_text())[command]
    assert _version_free(capsys.readouterr().out) == _version_free(shown)


def fast_subset_options(markdown: str) -> list[str]:
    """The pytest options of the README's fast subset: the ``sh`` block after "The fast
    subset", after ``-m pytest``."""
    after = markdown[markdown.index("The fast subset"):]
    block = after[after.index("```sh\n") + len("```sh\n"):]
    words = shlex.split(block[:block.index("```")])
    return words[words.index("pytest") + 1:]


def collected(options: list[str]) -> set[str]:
    """The ids pytest collects from tests/test_memory.py (one slow row, 15 exhaustive ones, a
    twin in every run) with ``options``, as a user runs it from the repository's root."""
    result = subprocess.run(
        [sys.executable, "-m", "pytest", *options, "--collect-only", "-q", "-p",
         "no:cacheprovider", "tests/test_memory.py"],
        cwd=README.parent, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return {line for line in result.stdout.splitlines() if "::" in line}


@pytest.mark.slow
def test_the_fast_subset_leaves_out_the_slow_and_the_exhaustive_tests() -> None:
    """The README's fast command runs neither (main's `-m "not slow"` replaced addopts'
    `-m 'not exhaustive'` and ran the 15 exhaustive DeiT rows); the README's test command
    (.ci/run's) runs the slow ones and not the exhaustive ones; `-m exhaustive` runs them."""
    def deit(ids: set[str]) -> set[str]:
        return {i for i in ids if "test_deit_matches_a_real_cpu_step" in i}

    fast = collected(fast_subset_options(README.read_text()))
    assert fast and not deit(fast)
    assert any("test_twin_matches_a_real_cpu_step" in i for i in fast)
    full = collected([])
    # 2 models x 2 batches x 2 precisions x 2 checkpointings = 16 rows, one of them slow
    assert len(deit(full)) == 1 and fast < full
    assert len(deit(collected(["-m", "exhaustive"]))) == 16 - 1
