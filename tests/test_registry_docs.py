"""The docs that list a registry's members list every one of them, read from the registry: the
crosscheck peers (one file each under ``vitprof/checks/crosscheck/peers/``) in
docs/crosscheck.md and the README, the model libraries (``vitprof.models.libraries.FILES``) in the
README and docs/budgets.md. A peer or library file added without its docs fails here."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import vitprof.models.libraries as registry
from vitprof.checks.crosscheck.peers import load, names

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
CROSSCHECK = (ROOT / "docs" / "crosscheck.md").read_text()
BUDGETS = (ROOT / "docs" / "budgets.md").read_text()


def peers_option(markdown: str) -> tuple[str, ...]:
    """The peers a ``vitprof crosscheck`` synopsis lists in its ``[--peers a,b,...]``."""
    synopsis = markdown[markdown.index("vitprof crosscheck MODEL"):]
    option = synopsis[synopsis.index("[--peers ") + len("[--peers "):]
    return tuple(name.strip() for name in option[:option.index("]")].split(","))


def peer_table(markdown: str) -> dict[str, str]:
    """``{peer: its extra cell}`` of the table ``| peer | unit | extra | runs |``, in order."""
    section = markdown[markdown.index("| peer | unit | extra | runs |"):].split("\n\n")[0]
    rows = [line.split(" | ") for line in section.splitlines()[2:]]
    return {row[0].removeprefix("| ").strip("`"): row[2].strip() for row in rows}


def paragraph(markdown: str, start: str) -> str:
    """The paragraph of ``markdown`` that begins with ``start``."""
    return markdown[markdown.index(start):].split("\n\n")[0]


def test_the_synopses_list_every_peer_in_the_order_of_the_rows() -> None:
    assert peers_option(CROSSCHECK) == names()
    assert peers_option(README) == names()


def test_the_peer_table_has_a_row_per_peer_with_its_extra() -> None:
    # the extra a user installs the peer with; the test extra is the suite's own
    wanted = {peer.name: ", ".join(f"`{extra}`" for extra in peer.extras if extra != "test")
              or (f"`pip install {peer.package}`" if peer.package else "") for peer in load()}
    table = peer_table(CROSSCHECK)
    assert list(table) == list(names())
    assert table == wanted


def test_the_optional_peers_section_names_every_package_of_the_extra() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    section = paragraph(CROSSCHECK, "These rows, like every row whose extra")
    for requirement in extras["peers"]:
        assert f"`{requirement}`" in section


def test_the_readme_says_what_crosscheck_runs_for_every_peer() -> None:
    # each peer's package, as test_crosscheck names it (ptflops-aten: ptflops), is named
    said = paragraph(README, "Runs vitprof, the closed form").lower().replace("\n", " ")
    for peer in names():
        assert peer.partition("-")[0] in said, peer


def test_the_readme_names_the_models_of_every_library() -> None:
    for library in registry.LIBRARIES:
        for name in library.names:
            assert f"`{name}`" in README, (library.name, name)


def test_the_budget_files_model_key_takes_every_librarys_prefix() -> None:
    row = next(line for line in BUDGETS.splitlines() if line.startswith("| `model` |"))
    for library in registry.LIBRARIES:
        if library.prefix and library.names:  # torchvision's names are the built-in ones
            assert re.search(f"`{re.escape(library.prefix)}", row), library.name


def test_the_readme_names_every_input_the_command_line_takes() -> None:
    # --input NAME=VALUE reads the request's fields: each one with a text form is shown
    from vitprof.workload import InputRequest

    for name in InputRequest.text_forms():
        assert f"`--input {name}=" in README, name
