"""The page check, ``vitprof report --check``: regenerate the pages into a temporary folder and
compare.

* Markdown is compared byte for byte after one normalisation: the torch version (``torch
  2.14.1+cu130``) is replaced by ``torch <version>``, since a CPU and a CUDA build of the same
  torch count the same.
* A figure is compared by the data it plots: the SHA-256 digest that :func:`figures.save` stores
  in the PNG must be equal. The pixels must also agree within a small tolerance (mean absolute
  difference), so a hand-edited or broken PNG is caught while the anti-aliasing of another
  freetype or matplotlib version is not.
* Every file generated must exist, and no page or figure of an earlier generation may be left
  over (a markdown file that starts with :data:`MARKER`, a PNG with a data digest), except the
  files of pages written only when named (``timm_published.md``,
  ``open_clip_published.md``, ``torchvision_published.md``); other files in the folder
  (``benchmark.md`` of ``benchmarks/peers_speed.py``) are not the check's business.
"""

from __future__ import annotations

import difflib
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from PIL import Image

from vitprof.render import figures
from vitprof.study.generate import MARKER, NAMED_PAGE_FILES, OTHER_PAGES, pages, write

_TORCH = re.compile(r"\btorch \d[\w.+-]*")
PIXEL_TOLERANCE = 2.0  # mean absolute difference, 0-255 scale, over all channels


def normalize(text: str) -> str:
    """Markdown with the parts that legitimately vary between machines replaced."""
    return _TORCH.sub("torch <version>", text)


def _compare_text(name: str, fresh: Path, kept: Path) -> list[str]:
    new, old = normalize(fresh.read_text()), normalize(kept.read_text())
    if new == old:
        return []
    diff = difflib.unified_diff(old.splitlines(), new.splitlines(), f"{kept}", "regenerated",
                                n=0, lineterm="")
    shown = [line for line in diff if not line.startswith(("---", "+++"))][:6]
    return [f"{name} differs from a fresh generation:", *(f"    {line}" for line in shown)]


def _pixels(path: Path) -> np.ndarray:
    with Image.open(path) as image:
        return np.asarray(image.convert("RGBA"), dtype=np.float64)


def _compare_png(name: str, fresh: Path, kept: Path) -> list[str]:
    try:
        digest, old_pixels = figures.read_digest(kept), _pixels(kept)
    except OSError as error:
        return [f"{name} is not a readable PNG: {error}"]
    if digest != figures.read_digest(fresh):
        return [f"{name} plots other data than a fresh generation (data digest differs)"]
    new_pixels = _pixels(fresh)
    if old_pixels.shape != new_pixels.shape:
        return [f"{name} is {old_pixels.shape[1]}x{old_pixels.shape[0]} px, a fresh one "
                f"{new_pixels.shape[1]}x{new_pixels.shape[0]} px"]
    mad = float(np.abs(old_pixels - new_pixels).mean())
    if mad > PIXEL_TOLERANCE:
        return [f"{name} looks different from a fresh rendering (mean pixel difference "
                f"{mad:.2f} > {PIXEL_TOLERANCE})"]
    return []


def _generated(path: Path) -> bool:
    """Whether ``path`` is a page or a figure that ``vitprof report`` wrote."""
    if path.suffix == ".md":
        with path.open() as handle:
            return handle.readline() == MARKER
    if path.suffix == ".png":
        try:
            return figures.read_digest(path) is not None
        except OSError:
            return False
    return False


def compare(fresh: Path, kept: Path, stale: bool = True) -> list[str]:
    """Problems of the folder ``kept`` against the fresh generation in ``fresh``; with
    ``stale``, pages and figures of an earlier generation left in ``kept`` are problems too."""
    problems = []
    expected = sorted(p.name for p in fresh.iterdir())
    for name in expected:
        if not (kept / name).is_file():
            problems.append(f"{name} is missing")
        elif name.endswith(".png"):
            problems += _compare_png(name, fresh / name, kept / name)
        else:
            problems += _compare_text(name, fresh / name, kept / name)
    theirs = NAMED_PAGE_FILES | _linked_by_other_pages(kept)
    extra = sorted(p.name for p in kept.iterdir() if stale and p.name not in expected
                   and p.name not in theirs and _generated(p))
    problems += [f"{name} is not generated any more (stale)" for name in extra]
    return problems


def _linked_by_other_pages(kept: Path) -> set[str]:
    """The figures that the pages other tools write (:data:`OTHER_PAGES`: a benchmark's memory
    page draws its timeline with vitprof's figures too) link in ``kept``: theirs, never stale
    for a check of what ``vitprof report`` writes."""
    pages_of_others = (kept / name for name in OTHER_PAGES)
    return {target for page in pages_of_others if page.is_file()
            for target in re.findall(r"!\[[^\]]*\]\(([^)/]+)\)", page.read_text())}


def report_command(out: str | Path, models: Sequence[str], everything: bool) -> str:
    """The command that writes the pages a check of ``models`` (or everything) compares."""
    return f"vitprof report {'--all' if everything else ' '.join(models)} --out {out}"


def page_check(out: str | Path, models: Sequence[str] = (), everything: bool = True) -> list[str]:
    """Regenerate ``models`` (or everything) into a temporary folder and compare with ``out``;
    the problems found, none when ``out`` is up to date."""
    kept = Path(out)
    if not kept.is_dir():
        return [f"{kept} does not exist; generate it with "
                f"'{report_command(kept, models, everything)}'"]
    with tempfile.TemporaryDirectory(prefix="vitprof-report-") as tmp:
        write(pages(models, everything), tmp)
        return compare(Path(tmp), kept, stale=everything)
