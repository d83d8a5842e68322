"""The README's synopses match the command line: every sub-command has one, it shows every option
of the sub-command's parser (with its choices, bracketed when optional) and no option the
parser lacks.

A synopsis is the text of an untagged code block that starts with ``vitprof COMMAND``, with its
indented continuation lines; tagged blocks (```sh) hold examples and are not read.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from vitprof.cli.main import COMMANDS, build_parser

README = Path(__file__).resolve().parents[1] / "README.md"


def synopses(markdown: str) -> dict[str, str]:
    """Each sub-command's synopsis lines in ``markdown``, joined with single spaces."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    in_block = tagged = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_block, tagged, current = not in_block, bool(line[3:].strip()), None
        elif not in_block or tagged:
            continue
        elif line.startswith("vitprof "):
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
                              "[--input-shape B,C,...]")
    assert "--no-class-token" in found["formula"]


@pytest.mark.parametrize("command", COMMANDS)
def test_readme_synopsis_matches_the_parser(command: str) -> None:
    text = synopses(README.read_text()).get(command)
    assert text is not None, f"the README has no synopsis for 'vitprof {command}'"
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
            assert found, f"{command}: {option} missing from the README synopsis"
            bracketed = bracket_depth(text, found.start()) > 0
            required = action.required or id(action) in in_required_group
            assert bracketed != required, f"{command}: {option} should be " + (
                "outside brackets" if required else "in brackets")
        if action.choices is not None:
            shown = f"{action.option_strings[0]} {'|'.join(map(str, action.choices))}"
            assert shown in text, f"{command}: the README should show '{shown}'"
    unknown = set(re.findall(r"--[\w-]+", text)) - set(parser._option_string_actions)
    assert not unknown, f"{command}: the README shows options the parser lacks: {unknown}"
