"""The study (:mod:`vitprof.study`) uses only vitprof's public API: the names ``vitprof`` exports
and the public modules of ``docs/api.md``, each name listed there; and the few internal names the
page lists apart (``- internal ...``), each still used, none of them public.

Every ``from vitprof... import`` of every file of the study is read (module level, inside
functions and under ``if TYPE_CHECKING:`` alike), and every attribute it reads from a public
module it imported whole (``figures.save``)."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

import vitprof

REPO = Path(__file__).resolve().parents[1]
STUDY = REPO / "vitprof" / "study"
API_PAGE = REPO / "docs" / "api.md"
# one line per public module: - `vitprof.models.zoo`: `build`, `ZOO`, ...
_ENTRY = re.compile(r"^- `(vitprof[\w.]*)`: (.*)$")
# one entry per module the study reaches inside: - internal `vitprof.x`: `A`, `b` (why)
_INTERNAL = re.compile(r"^- internal `(vitprof[\w.]*)`: ((?:`\w+`(?:, )?)+)")


def listed(text: str, entry: re.Pattern[str]) -> dict[str, set[str]]:
    """Each module of the API page ``text`` that ``entry`` reads, with the names listed for it."""
    found: dict[str, set[str]] = {}
    for line in text.splitlines():
        match = entry.match(line)
        if match:
            found[match[1]] = set(re.findall(r"`(\w+)`", match[2]))
    return found


def public_api(text: str) -> dict[str, set[str]]:
    """Each public module of the API page ``text``, with the names listed for it."""
    return listed(text, _ENTRY)


PUBLIC = public_api(API_PAGE.read_text())
INTERNAL = listed(API_PAGE.read_text(), _INTERNAL)


def facade_homes() -> dict[str, set[str]]:
    """The module defining each name ``vitprof`` exports, with those names: inside the package
    the study imports ``analyze`` from its home, the facade being above every layer."""
    homes: dict[str, set[str]] = {}
    for name in vitprof.__all__:
        homes.setdefault(getattr(vitprof, name).__module__, set()).add(name)
    return homes


def allowed() -> dict[str, set[str]]:
    names = {module: set(names) for module, names in PUBLIC.items()}
    for module, reached in [*INTERNAL.items(), *facade_homes().items()]:
        names.setdefault(module, set()).update(reached)
    return names


def _bound_module(node: ast.ImportFrom, alias: ast.alias) -> str | None:
    """The public module an import binds (``from vitprof.render import figures``), if any."""
    module = f"{node.module}.{alias.name}"
    return module if module in PUBLIC else None


def uses(path: Path) -> list[tuple[str, str]]:
    """(module, name) of every vitprof name ``path`` imports or reads from a module it imported
    whole; the study's own modules left out."""
    tree = ast.parse(path.read_text())
    found: list[tuple[str, str]] = []
    modules: dict[str, str] = {}  # local name -> public module imported whole
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, "") for a in node.names if a.name.startswith("vitprof")]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("vitprof"):
            assert node.module is not None and node.level == 0
            if node.module.startswith("vitprof.study"):
                continue
            for alias in node.names:
                bound = _bound_module(node, alias)
                if bound:
                    modules[alias.asname or alias.name] = bound
                else:
                    found.append((node.module, alias.name))
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in modules):
            found.append((modules[node.value.id], node.attr))
    return found


def outside_the_api(path: Path) -> list[str]:
    names = allowed()
    return [f"{module}.{name}" if name else f"import {module}"
            for module, name in uses(path) if name not in names.get(module, set())]


STUDY_FILES = sorted(STUDY.rglob("*.py"))


def test_the_study_and_the_api_page_are_read() -> None:
    # an empty study or a page the pattern no longer reads would pass the check below
    assert len(STUDY_FILES) >= 10
    assert "build" in PUBLIC["vitprof.models.zoo"]
    assert facade_homes()["vitprof.analysis"] == {"analyze"}


@pytest.mark.parametrize("path", STUDY_FILES, ids=lambda p: str(p.relative_to(STUDY)))
def test_the_study_uses_only_public_names(path: Path) -> None:
    assert not outside_the_api(path), f"{path.name} reaches past the public API"


def test_every_internal_name_the_page_lists_is_used_and_not_public() -> None:
    # an internal name the study stopped using, or one made public, leaves the list
    used = {use for path in STUDY_FILES for use in uses(path)}
    unused = sorted(f"{module}.{name}" for module, names in INTERNAL.items() for name in names
                    if (module, name) not in used)
    public = sorted(f"{module}.{name}" for module, names in INTERNAL.items()
                    for name in names & PUBLIC.get(module, set()))
    assert INTERNAL and not unused and not public, (unused, public)


def test_a_name_made_public_only_for_the_study_is_not_listed_public() -> None:
    # issue 34: PeerRow, Cause, Published, peer_row and published_causes went back to private
    public = {name for names in PUBLIC.values() for name in names}
    assert not public & {"PeerRow", "Cause", "Published", "peer_row", "published_causes"}
    assert not {"PeerRow", "Cause"} & set(importlib.import_module("vitprof.checks.crosscheck")
                                          .__all__)


def test_an_internal_import_is_caught(tmp_path: Path) -> None:
    source = tmp_path / "page.py"
    source.write_text("from vitprof.analysis import analyze\n"
                      "from vitprof.count.session import count\n"
                      "from vitprof.render import figures\n"
                      "def f():\n"
                      "    from vitprof.models.zoo import _build\n"
                      "    figures.save(None, 'x.png')\n"
                      "    return figures._draw_sweep\n")
    assert outside_the_api(source) == ["vitprof.count.session.count", "vitprof.models.zoo._build",
                                       "vitprof.render.figures._draw_sweep"]


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_every_public_name_exists(module: str) -> None:
    # the page cannot list a name that a rename left behind
    imported = importlib.import_module(module)
    missing = sorted(name for name in PUBLIC[module] if not hasattr(imported, name))
    assert not missing, f"docs/api.md lists names {module} does not have: {missing}"
