"""The pages of docs/ hold to the command line as the README does (tests/test_readme.py).

* A synopsis (an untagged block starting with ``vitprof COMMAND``) shows every option of the
  sub-command's parser, with its choices, and no other.
* Every ``vitprof COMMAND ...`` line of any code block, examples included, names only options
  the sub-command has.
* A sample (an untagged block starting with ``$ vitprof ...``) is what the command prints, line
  for line, the torch version aside; a line ``...`` of its own stands for any lines the page
  leaves out. It runs in a folder holding the page's files: a tagged block whose first line is
  ``# NAME`` (``# budgets.toml``) is the file NAME.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from test_readme import (
    _version_free,
    assert_synopsis_matches_the_parser,
    samples,
    subparsers,
    synopses,
)

from vitprof.cli.main import COMMANDS, main

DOCS = Path(__file__).resolve().parents[1] / "docs"
PAGES = sorted(DOCS.glob("*.md"))

# Samples that take longer than a few seconds on the 2-core machine (measured, torch 2.14.1 CPU)
SLOW = {
    "crosscheck": "runs fvcore, torchinfo and FlopCounterMode on a CPU copy of vit_b_16: 11 s",
    "memory": "four fake-tensor training steps of vit_b_16 at batch 64 and more: 12 s",
}


def code_blocks(markdown: str) -> list[tuple[str, list[str]]]:
    """Every fenced block of ``markdown``: its tag ('' when untagged) and its lines."""
    found: list[tuple[str, list[str]]] = []
    block: list[str] | None = None
    for line in markdown.splitlines():
        if line.startswith("```"):
            if block is None:
                tag, block = line[3:].strip(), []
            else:
                found.append((tag, block))
                block = None
        elif block is not None:
            block.append(line)
    return found


def page_files(markdown: str) -> dict[str, str]:
    """The files a page writes out: each tagged block whose first line is ``# NAME``."""
    files = {}
    for tag, lines in code_blocks(markdown):
        name = re.fullmatch(r"# ([\w./-]+\.\w+)", lines[0]) if tag and lines else None
        if name and ".." not in name[1]:
            files[name[1]] = "\n".join(lines) + "\n"
    return files


def shown_options(markdown: str) -> list[tuple[str, str]]:
    """(command, option) for each option on a ``vitprof COMMAND`` line of any code block."""
    found = []
    for _, lines in code_blocks(markdown):
        for line in lines:
            for match in re.finditer(r"(?<![\w/.\[-])vitprof ([a-z]+)\b([^#\n]*)", line):
                text = re.sub(r"--\[no-\]([\w-]+)", r"--\1 --no-\1", match[2])
                found += [(match[1], option) for option in re.findall(r"(?<![\w-])--[\w-]+", text)]
    return found


def matches(output: str, shown: str) -> bool:
    """``output`` is ``shown``, each ``...`` line of ``shown`` standing for any lines."""
    pattern = "".join("(?:.*\n)*?" if line == "..." else re.escape(line) + "\n"
                      for line in shown.splitlines())
    return re.fullmatch(pattern, output) is not None


def doc_samples() -> list:
    params = []
    for page in PAGES:
        for command in samples(page.read_text()):
            reason = SLOW.get(shlex.split(command)[1])
            params.append(pytest.param(page.name, command, id=f"{page.name}: {command}",
                                       marks=[pytest.mark.slow] if reason else []))
    return params


def test_the_helpers_read_what_a_page_shows() -> None:
    page = ("```toml\n# budgets.toml\n[m]\n```\n\n```\n$ vitprof check budgets.toml\nA\n```\n\n"
            "```sh\nvitprof formula --width 8 --[no-]class-token  # --not-an-option\n```\n")
    assert page_files(page) == {"budgets.toml": "# budgets.toml\n[m]\n"}
    assert samples(page) == {"vitprof check budgets.toml": "A\n"}
    assert synopses("```\n$ vitprof crosscheck m\nvitprof (meta device): 1 MACs\n```\n") == {}
    assert shown_options(page) == [("formula", "--width"), ("formula", "--class-token"),
                                   ("formula", "--no-class-token")]
    assert matches("a\nb\nc\nd\n", "...\nc\nd") and matches("a\nb\n", "a\n...\nb")
    assert not matches("a\nb\nc\n", "...\nc\nb") and not matches("a\nc\n", "a\nb\n...")


def test_the_pages_synopses_and_samples_are_found() -> None:
    found = {page.name: (set(synopses(page.read_text())), samples(page.read_text()))
             for page in PAGES}
    assert {"check"} <= found["budgets.md"][0] and {"memory"} <= found["memory.md"][0]
    assert {"crosscheck"} <= found["crosscheck.md"][0]
    assert "vitprof check budgets.toml" in found["budgets.md"][1]
    assert "vitprof formula note002_cifar_vit" in found["formulas.md"][1]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_docs_synopsis_matches_the_parser(page: Path) -> None:
    for command, text in synopses(page.read_text()).items():
        assert command in COMMANDS, f"{page.name}: 'vitprof {command}' is no sub-command"
        assert_synopsis_matches_the_parser(command, text)


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_docs_show_only_options_the_commands_have(page: Path) -> None:
    parsers = subparsers()
    unknown = {f"vitprof {command} {option}" for command, option in shown_options(page.read_text())
               if command in parsers and option not in parsers[command]._option_string_actions}
    assert not unknown, f"{page.name} shows options the parser lacks: {sorted(unknown)}"


@pytest.mark.parametrize(("name", "command"), doc_samples())
def test_docs_sample_is_what_the_command_prints(name: str, command: str, tmp_path: Path,
                                                monkeypatch, capsys) -> None:
    markdown = (DOCS / name).read_text()
    for file, text in page_files(markdown).items():
        (tmp_path / file).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / file).write_text(text)
    monkeypatch.chdir(tmp_path)
    assert main(shlex.split(command)[1:]) in (0, 1)  # 1: a sample may show a failed check
    out, shown = _version_free(capsys.readouterr().out), _version_free(samples(markdown)[command])
    assert matches(out, shown), f"{name}: '{command}' prints\n{out}"


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_docs_pass_track_only_the_keywords_it_takes_undeprecated(page: Path) -> None:
    """Every ``track(..., name=...)`` a page shows names a keyword of :func:`vitprof.track`, and
    not ``dtype=``, deprecated for ``measure_dtype=`` (a warning): docs/mfu.md told FSDP2 users
    with a MixedPrecisionPolicy to pass ``track(..., dtype="bf16")``."""
    import inspect

    from vitprof import track

    taken = set(inspect.signature(track).parameters) - {"dtype"}
    shown = {keyword for call in re.findall(r"\btrack\(([^)]*)\)", page.read_text())
             for keyword in re.findall(r"\b(\w+)=", call)}
    assert shown <= taken, f"{page.name}: track(...) with {sorted(shown - taken)}"
