"""Issue 38: output files, report pages and baselines are never lost or half-written, and exit
codes hold whatever happens to stdout and stderr.

* A file is written whole or not at all (:mod:`vitprof.core.atomic_write`): on a full disk (a
  tmpfs of two pages where root may mount one, else a write patched to fail half-way) the old
  file is intact and no temporary file is left.
* ``vitprof report`` writes its folder as one unit: an interrupt mid-report leaves every page
  and figure as it was.
* ``vitprof check --update-baselines`` rewrites no baseline on a run that exits 2 because its
  report could not be written, and never overwrites a file that is not a profile.
* With stderr full or closed, the exit codes stay 0, 2 and 130; help or ``--version`` that
  cannot reach stdout is one line and exit 2.
"""

from __future__ import annotations

import contextlib
import errno
import importlib.metadata
import io
import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import matplotlib.figure
import pytest
from conftest import not_root

from vitprof.cli.main import main
from vitprof.core import atomic_write
from vitprof.core.atomic_write import staged_files, write_atomically
from vitprof.core.schema import SCHEMA_VERSION
from vitprof.render.figures import FigureData
from vitprof.study import generate
from vitprof.study.pages.markdown import Page

VITPROF = Path(sys.executable).with_name("vitprof")
# note 002's CIFAR-ViT, importable from any directory: its JSON profile is about 12 KB
CIFAR_VIT = "vitprof.models.notes.note002:build_cifar_vit"
PAGE = 4096  # a tmpfs counts whole pages


def _one_error_line(err: str) -> str:
    """The one line of ``err``, which must be a ``vitprof: error:`` line and no traceback."""
    assert "Traceback" not in err, err
    (line,) = err.strip().splitlines()
    assert line.startswith("vitprof: error: "), err
    return line


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A folder on a tmpfs of two pages (8 KiB), unmounted afterwards; skipped where this user
    may not mount one."""
    folder = tmp_path / "disk"
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={2 * PAGE}", "tmpfs",
                              str(folder)], capture_output=True, check=False)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


# ------------------------------------------------------------------------------- whole files


@pytest.mark.parametrize(("name", "argv"), [
    pytest.param("profile.json", ["analyze", CIFAR_VIT, "--format", "json", "--output"],
                 id="analyze-output"),
    pytest.param("timeline.png", ["memory", CIFAR_VIT, "--target", "cpu", "--figure"],
                 id="memory-figure"),
    # main: 'cannot write the figure ...: [Errno 28] No space left on device'
    pytest.param("sweep.png", ["sweep", CIFAR_VIT, "--image-size", "32", "--figure"],
                 id="sweep-figure"),
])
def test_an_output_on_a_full_disk_leaves_the_old_file(name: str, argv: list[str],
                                                      small_disk: Path, capsys) -> None:
    """The old file takes one page, the new one (a JSON profile of about 12 KB, a PNG of tens
    of KB) needs more than the two: main truncated the old file, wrote the first 8 KiB and
    stopped (exit 2 over a broken profile; a traceback for the figure)."""
    target = small_disk / name
    old = "the file as it was\n" * 100  # 1,900 bytes: one page
    target.write_text(old)
    status = main([*argv, str(target)])
    line = _one_error_line(capsys.readouterr().err)
    assert status == 2 and line.endswith(f"{target}: No space left on device")
    assert target.read_text() == old
    assert [p.name for p in small_disk.iterdir()] == [name]


def _write_half_then_fail(handle: BinaryIO, content: atomic_write.Content) -> None:
    """``atomic_write._write`` that writes half of a text, then fails as a full disk does."""
    if isinstance(content, str):
        handle.write(content[: len(content) // 2].encode())
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_write_that_fails_half_way_leaves_the_old_file(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         capsys) -> None:
    """Where no tmpfs can be mounted: the same through a write patched to fail half-way."""
    target = tmp_path / "profile.md"
    target.write_text("the profile as it was\n")
    monkeypatch.setattr(atomic_write, "_write", _write_half_then_fail)
    status = main(["analyze", CIFAR_VIT, "--format", "markdown", "--output", str(target)])
    line = _one_error_line(capsys.readouterr().err)
    assert status == 2 and line.endswith("No space left on device")
    assert target.read_text() == "the profile as it was\n"
    assert [p.name for p in tmp_path.iterdir()] == ["profile.md"]


def test_a_write_replaces_the_file_whole_keeping_its_mode_and_links(tmp_path: Path) -> None:
    """A replaced file keeps its permissions; a symbolic link is written through, as
    ``Path.write_text`` does, and stays a link."""
    real = tmp_path / "real.txt"
    real.write_text("old")
    real.chmod(0o640)
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    write_atomically(link, "new")
    assert link.is_symlink() and real.read_text() == "new"
    assert real.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.txt", "real.txt"]


def test_a_target_that_is_no_file_is_written_in_place(tmp_path: Path) -> None:
    """``--output /dev/null``, ``/dev/stdout``, a FIFO: written as ``Path.write_text`` did, never
    replaced by a file (as root, a rename would have put a file in place of ``/dev/null``)."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        write_atomically(fifo, "through the pipe")
        assert os.read(reader, 100) == b"through the pipe"
    finally:
        os.close(reader)
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["pipe"]


def test_an_interrupt_among_staged_files_changes_none(tmp_path: Path) -> None:
    """Ctrl-C after two of three files were staged: no target changed, no temporary file."""
    for name in ("a", "b", "c"):
        (tmp_path / name).write_text(f"old {name}")
    with pytest.raises(KeyboardInterrupt), staged_files() as staged:
        staged.add(tmp_path / "a", "new a")
        staged.add(tmp_path / "b", "new b")
        raise KeyboardInterrupt
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == {
        "a": "old a", "b": "old b", "c": "old c"}


# ------------------------------------------------------------------------------- report


def _pages(version: str) -> list[Page]:
    """One page linking two figures, each plotting ``version`` in its title."""
    blocks = {"blocks": [0, 1], "series": {"mlp": [3, 4]}}
    return [Page("m.md", f"# {version}\n\n![a](m_a.png)\n![b](m_b.png)\n",
                 (("m_a.png", FigureData("blocks", f"a {version}", blocks)),
                  ("m_b.png", FigureData("blocks", f"b {version}", blocks))))]


def test_an_interrupted_report_leaves_every_page_as_it_was(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """Ctrl-C while the second figure is drawn: main had written the new page, the first new
    figure and left the second figure old (a page whose figure does not show what it says)."""
    out = tmp_path / "rep"
    monkeypatch.setattr(generate, "pages", lambda *args: _pages("old"))
    assert main(["report", "m", "--out", str(out)]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert sorted(before) == ["m.md", "m_a.png", "m_b.png"]
    drawn = []
    savefig = matplotlib.figure.Figure.savefig

    def interrupted_on_the_second(self: matplotlib.figure.Figure, *args, **kwargs) -> None:
        drawn.append(1)
        if len(drawn) == 2:
            raise KeyboardInterrupt
        savefig(self, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", interrupted_on_the_second)
    monkeypatch.setattr(generate, "pages", lambda *args: _pages("new"))
    capsys.readouterr()
    assert main(["report", "m", "--out", str(out)]) == 130
    assert capsys.readouterr().err == "vitprof: interrupted\n"
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


# ------------------------------------------------------------------------------- baselines

MODELS_PY = """
from torch import nn


def make():
    return nn.Conv2d(3, 2, kernel_size=8, stride=8)
"""


def _entry(name: str, baseline: str) -> str:
    return (f'[{name}]\nmodel = "models.py:make"\nimage_size = 8\nbaseline = "{baseline}"\n'
            'max_increase = "0%"\n')


class _FullStdout(io.StringIO):
    """A stdout on a full device: every write fails."""

    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_baselines_stay_when_the_report_cannot_be_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd) -> None:
    """``check two.toml --update-baselines > /dev/full``: exit 2 and both baselines as they
    were (main rewrote both, then failed to write stdout), and no temporary file."""
    monkeypatch.chdir(tmp_path)
    Path("models.py").write_text(MODELS_PY)
    Path("two.toml").write_text(_entry("first", "p/first.json") + _entry("second",
                                                                         "p/second.json"))
    Path("p").mkdir()
    old = json.dumps({"schema_version": SCHEMA_VERSION, "note": "as it was"})
    for name in ("first", "second"):
        Path(f"p/{name}.json").write_text(old)
    # capfd: what cannot be written is dropped by pointing the stdout's file descriptor at the
    # null device, here pytest's capture of file descriptor 1
    monkeypatch.setattr(sys, "stdout", _FullStdout())
    status = main(["check", "two.toml", "--update-baselines"])
    line = _one_error_line(capfd.readouterr().err)
    assert status == 2 and line.endswith("No space left on device")
    assert {p.name: p.read_text() for p in Path("p").iterdir()} == {
        "first.json": old, "second.json": old}


def test_update_baselines_refuses_to_overwrite_what_is_not_a_profile(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """A baseline path naming the model's own ``.py``: one line, exit 2, the file untouched
    (main overwrote the model's source with a JSON profile)."""
    monkeypatch.chdir(tmp_path)
    Path("models.py").write_text(MODELS_PY)
    Path("mistake.toml").write_text(_entry("m", "models.py"))
    status = main(["check", "mistake.toml", "--update-baselines"])
    line = _one_error_line(capsys.readouterr().err)
    assert status == 2
    assert line == ("vitprof: error: mistake.toml: entry 'm', key 'baseline': models.py is "
                    "not a vitprof profile (a JSON object with a 'schema_version'); "
                    "--update-baselines overwrites only a profile, never another file")
    assert Path("models.py").read_text() == MODELS_PY


@pytest.mark.parametrize(("baseline", "message"), [
    pytest.param("ro/m.json", "the folder ro is not writable", id="read-only-folder"),
    pytest.param("ro/new/m.json", "the folder ro is not writable", id="folder-to-create"),
    pytest.param("afile/m.json", "afile is not a folder", id="under-a-file"),
])
def test_a_baseline_that_cannot_be_written_is_refused_before_anything_is_analysed(
        baseline: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys) -> None:
    """main analysed every entry, then failed to stage the baseline: 'cannot write baseline
    ro/m.json: Permission denied' after the work (minutes for a budget of large models)."""
    monkeypatch.chdir(tmp_path)
    Path("models.py").write_text(MODELS_PY.replace("def make():", "def make():\n    raise "
                                                   "RuntimeError('the model was built')"))
    Path("ro").mkdir()
    Path("afile").write_text("a file, not a folder\n")
    not_root(monkeypatch, {Path("ro")})
    Path("one.toml").write_text(_entry("m", baseline))
    status = main(["check", "one.toml", "--update-baselines"])
    line = _one_error_line(capsys.readouterr().err)
    assert status == 2 and line.startswith("vitprof: error: one.toml: entry 'm', key "
                                           "'baseline': cannot write ")
    assert message in line and "built" not in line
    assert f"cannot write {Path(baseline).parent if 'new' in baseline else baseline}:" in line


# ------------------------------------------------------------------------------- exit codes

SLEEPER_PY = """
import time
from pathlib import Path


def make():
    Path(__file__).with_name("started").touch()
    time.sleep(60)
"""


@contextlib.contextmanager
def _stderr(how: str) -> Iterator[dict[str, Any]]:
    """Popen's arguments for a stderr that is ``/dev/full`` or closed; SIGINT as by default
    (Python keeps it ignored if its parent, a background job, ignores it)."""
    def child() -> None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        if how == "closed":
            os.close(2)
    with open("/dev/full" if how == "/dev/full" else os.devnull, "wb") as stderr:
        yield {"stdout": subprocess.DEVNULL, "stderr": stderr, "preexec_fn": child}


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full on this system")
@pytest.mark.parametrize("how", [pytest.param("/dev/full", marks=pytest.mark.slow), "closed"])
@pytest.mark.parametrize(("argv", "code"), [
    pytest.param(["analyze", CIFAR_VIT, "--format", "json"], 0, id="success"),
    pytest.param(["analyze", "vit_b_17"], 2, id="unknown-model"),
])
def test_exit_codes_hold_whatever_stderr_is(argv: list[str], code: int, how: str,
                                            tmp_path: Path) -> None:
    """main exited 1 on an unknown model (its error line failed, or stderr was None), and
    on a success whose slow-build notice asked a closed stderr whether it is a terminal."""
    with _stderr(how) as streams:
        result = subprocess.run([str(VITPROF), *argv], cwd=tmp_path, timeout=300, check=False,
                                **streams)
    assert result.returncode == code


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full on this system")
@pytest.mark.parametrize("how", [pytest.param("/dev/full", marks=pytest.mark.slow), "closed"])
def test_an_interrupt_exits_130_whatever_stderr_is(how: str, tmp_path: Path) -> None:
    (tmp_path / "sleeper.py").write_text(SLEEPER_PY)
    with _stderr(how) as streams:
        process = subprocess.Popen([str(VITPROF), "analyze", "sleeper.py:make"], cwd=tmp_path,
                                   **streams)
        deadline = time.monotonic() + 120
        while not (tmp_path / "started").exists():
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=120) == 130


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full on this system")
@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["analyze", "--help"]])
def test_help_that_cannot_be_written_fails(argv: list[str], tmp_path: Path) -> None:
    """``vitprof --help > /dev/full`` exited 0 in silence; ``ls > /dev/full`` fails too."""
    with open("/dev/full", "wb") as full:
        result = subprocess.run([str(VITPROF), *argv], cwd=tmp_path, stdout=full,
                                stderr=subprocess.PIPE, text=True, timeout=300, check=False)
    line = _one_error_line(result.stderr)
    assert result.returncode == 2
    assert line == "vitprof: error: cannot write the result to stdout: No space left on device"


def test_version_is_the_installed_packages(capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"vitprof {importlib.metadata.version('vitprof')}\n"
