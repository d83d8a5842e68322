"""Issue 28's defects of ``vitprof check``, its baselines and budget files, the pytest plugin and
``vitprof report``: each one a command, one row of :data:`CASES`.

Every row runs in a fresh folder holding :data:`FILES` (the working directory): first the
commands of ``before`` (each must exit 0), then its command, ``vitprof ...`` through
``main([...])`` or ``pytest ...`` through an inner pytest session with the vitprof plugin. The
row gives the exit code and a fragment of the output: of the one line on stderr for exit codes
2 and 130, else of stdout and stderr together; never a traceback. ``unchanged`` files must be as
they were before the command, ``once`` must appear exactly once in its output.

The models are single convolutions (no ViT: each analysis takes a moment). Their params:
``make`` 3*8*8*2 + 2 = 386; ``wider`` 3*8*8*4 + 4 = 772; ``gray`` at in_chans = 1:
1*8*8*2 + 2 = 130.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
from torch import nn

from vitprof.analysis import analyze
from vitprof.cli.main import main

pytest_plugins = ["pytester"]

MODELS_PY = """
from torch import nn


def make():
    return nn.Conv2d(3, 2, kernel_size=8, stride=8)


def wider():
    return nn.Conv2d(3, 4, kernel_size=8, stride=8)


def gray(in_chans=3):
    return nn.Conv2d(in_chans, 2, kernel_size=8, stride=8)


def interrupt():
    raise KeyboardInterrupt  # Ctrl-C while the model is built
"""
# a profile (--update-baselines overwrites nothing else), in a version no vitprof reads
OLD_BASELINE = '{"schema_version": "0", "note": "the baseline as it was before the command"}\n'


def _entry(name: str, model: str, baseline: str, *, image_size: str = "8") -> str:
    return (f'[{name}]\nmodel = "{model}"\nimage_size = {image_size}\n'
            f'baseline = "{baseline}"\nmax_increase = "0%"\n')


FILES = {
    "models.py": MODELS_PY,
    "sub/models.py": MODELS_PY,
    "cannot_import.py": "import not_a_package\n\n\ndef make():\n    pass\n",
    "p/first.json": OLD_BASELINE,
    # item 2: the first entry's baseline must stay as it was when a later entry fails
    "import_fails.toml": _entry("first", "models.py:make", "p/first.json")
    + _entry("second", "cannot_import.py:make", "p/second.json"),
    "interrupted.toml": _entry("first", "models.py:make", "p/first.json")
    + _entry("second", "models.py:interrupt", "p/second.json"),
    "fine.toml": _entry("first", "models.py:make", "p/new.json"),
    # item 3
    "itself.toml": _entry("m", "models.py:make", "itself.toml"),
    "shared.toml": _entry("a", "models.py:make", "p/shared.json")
    + _entry("b", "models.py:wider", "./p/../p/shared.json"),
    "base.toml": _entry("m", "models.py:make", "p/m.json"),
    "other_model.toml": _entry("m", "models.py:wider", "p/m.json"),
    "sub/base.toml": _entry("m", "models.py:make", "m.json"),
    # item 8
    "huge_increase.toml": _entry("m", "models.py:make", "p/m.json").replace('"0%"', '"1e400%"'),
    "inf_increase.toml": _entry("m", "models.py:make", "p/m.json").replace('"0%"', "inf"),
    # item 11: the budget file of the pytest plugin, image sizes and channels
    "plugin.toml": '[fits]\nmodel = "models.py:make"\nimage_size = 8\nmax_params = 386\n',
    "square_only.toml": '[vit_b_16]\nimage_size = "224x320"\nmax_params = 1\n',
    "wide.toml": '[m]\nmodel = "models.py:make"\nimage_size = "8x16"\nmax_params = 386\n',
    "bad_size.toml": '[m]\nmodel = "models.py:make"\nimage_size = "8x"\nmax_params = 386\n',
    "gray.toml": '[m]\nmodel = "models.py:gray"\nimage_size = 8\nin_chans = 1\n'
                 "max_params = 130\n",
    "in_chan.toml": '[m]\nmodel = "models.py:gray"\nin_chan = 1\nmax_params = 130\n',
    "zero_chans.toml": '[m]\nmodel = "models.py:gray"\nin_chans = 0\nmax_params = 130\n',
    "odd_models.py": MODELS_PY,
}


@dataclass(frozen=True)
class Case:
    command: str  # "vitprof ARGS" or "pytest ARGS"; {tmp} is the folder
    code: int
    message: str
    before: tuple[str, ...] = ()  # vitprof commands run first, each exits 0
    unchanged: tuple[str, ...] = ()  # files the command leaves as they were
    once: str = ""  # what the output holds exactly once


UPDATE_FIRST = "vitprof check base.toml --update-baselines"
# params, MACs and vector FLOPs of the totals and of the one component, at 0% over the
# baseline (no blocks: none of their rows), and the implicit max_unsupported_ops and
# max_self_checks: 3 + 3 + 2 checks
BASELINE_PASS = "PASS: all 8 checks of 1 budget hold"
CASES = [
    # 2. a failing --update-baselines writes nothing
    pytest.param(Case("vitprof check import_fails.toml --update-baselines", 2,
                      "entry 'second', key 'model': cannot import cannot_import.py: "
                      "ModuleNotFoundError: No module named 'not_a_package'",
                      unchanged=("p/first.json",)), id="update-then-an-import-fails"),
    pytest.param(Case("vitprof check interrupted.toml --update-baselines", 130,
                      "vitprof: interrupted", unchanged=("p/first.json",)),
                 id="update-then-ctrl-c"),
    pytest.param(Case("vitprof check fine.toml --update-baselines", 0,
                      "vitprof: wrote baseline p/new.json for entry 'first'",
                      once="wrote baseline"), id="update-says-what-it-wrote"),
    # 3. baselines that are the budget file, another entry's, or another model's
    pytest.param(Case("vitprof check itself.toml --update-baselines", 2,
                      "itself.toml:4: entry 'm', key 'baseline': itself.toml is this budget "
                      "file", unchanged=("itself.toml",)), id="baseline-is-the-budget-file"),
    pytest.param(Case("vitprof check itself.toml", 2, "itself.toml is this budget file"),
                 id="baseline-is-the-budget-file-check"),
    pytest.param(Case("vitprof check shared.toml --update-baselines", 2,
                      "shared.toml:9: entry 'b', key 'baseline': p/../p/shared.json is also the "
                      "baseline of entry 'a'"), id="two-entries-share-a-baseline"),
    pytest.param(Case("vitprof check other_model.toml", 2,
                      "baseline p/m.json: saved from model models.py:make, not "
                      "models.py:wider", before=(UPDATE_FIRST,)),
                 id="baseline-of-another-model"),
    pytest.param(Case("vitprof check {tmp}/sub/base.toml", 0, BASELINE_PASS,
                      before=("vitprof check sub/base.toml --update-baselines",)),
                 id="baseline-of-the-same-model-from-another-folder"),
    pytest.param(Case("vitprof check base.toml", 0, BASELINE_PASS,
                      before=(UPDATE_FIRST,)), id="baseline-of-the-same-model"),
    # 8. a percentage beyond any float (with a baseline to compare with: the percentage was
    # accepted, and the report's float() of it failed)
    pytest.param(Case("vitprof check huge_increase.toml", 2,
                      "huge_increase.toml:5: entry 'm', key 'max_increase': expected a "
                      "percentage such as 5 or 1.5%, got '1e400%', beyond the largest float",
                      before=(UPDATE_FIRST,)), id="max-increase-1e400"),
    pytest.param(Case("vitprof check inf_increase.toml", 2,
                      "key 'max_increase': expected a percentage such as 5 or 1.5%, got 'inf'"),
                 id="max-increase-inf"),
    pytest.param(Case("vitprof diff models.py:make models.py:make --fail-above 1e400", 2,
                      "argument --fail-above: expected a percentage such as 5 or 1.5%, got "
                      "'1e400', beyond the largest float"), id="fail-above-1e400"),
    # 11. the pytest plugin collects its items and reads a file once
    pytest.param(Case("pytest --vitprof-budgets plugin.toml", 0, "collected 1 item"),
                 id="plugin-counts-its-items"),
    pytest.param(Case("pytest -v --vitprof-budgets plugin.toml --vitprof-budgets ./plugin.toml",
                      0, "collected 1 item", once="plugin.toml::fits PASSED"),
                 id="plugin-reads-a-file-once"),
    # 11. report: one page per model named, the hint of a single-model check
    pytest.param(Case("vitprof report odd_models.py:make odd_models.py:make --out rep", 0,
                      "rep/odd_models.py_make.md", once="rep/odd_models.py_make.md"),
                 id="report-a-model-named-twice"),
    pytest.param(Case("vitprof report odd_models.py:make --check --out missing", 1,
                      "missing does not exist; generate it with 'vitprof report "
                      "odd_models.py:make --out missing'"), id="report-check-hint"),
    # 11. image_size as the command line writes it; in_chans
    pytest.param(Case("vitprof check square_only.toml", 2,
                      "square_only.toml:2: entry 'vit_b_16', key 'image_size': vit_b_16 takes a "
                      "square image size only (its builder takes one int); got 224x320"),
                 id="image-size-HxW-square-model"),
    pytest.param(Case("vitprof check wide.toml", 0, "input 1x3x8x16"), id="image-size-HxW"),
    pytest.param(Case("vitprof check bad_size.toml", 2,
                      "bad_size.toml:3: entry 'm', key 'image_size': expected a positive integer, "
                      "\"HxW\" or [height, width], got '8x' (a string)"),
                 id="image-size-HxW-malformed"),
    # max_params = 130 holds at in_chans = 1 only (386 at 3), with the two implicit checks
    pytest.param(Case("vitprof check gray.toml", 0, "PASS: all 3 checks"), id="in-chans"),
    pytest.param(Case("vitprof check in_chan.toml", 2,
                      "in_chan.toml:3: entry 'm', key 'in_chan': unknown key 'in_chan'; did you "
                      "mean 'in_chans'?"), id="in-chans-misspelt"),
    pytest.param(Case("vitprof check zero_chans.toml", 2,
                      "zero_chans.toml:3: entry 'm', key 'in_chans': expected a positive integer, "
                      "got 0"), id="in-chans-zero"),
]


def _vitprof(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's usage errors
        code = int(exit_.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _pytest(argv: list[str], pytester: pytest.Pytester) -> tuple[int, str, str]:
    """An inner session in this process with the plugin (hypothesis's left out, see
    tests/test_pytest_plugin.py)."""
    result = pytester.runpytest_inprocess("-p", "no:hypothesispytest", "-p",
                                          "vitprof.pytest_plugin", *argv)
    return int(result.ret), "\n".join(result.outlines), "\n".join(result.errlines)


@pytest.fixture(scope="module")
def analysis_imported() -> None:
    """What an analysis imports, imported before ``pytester`` takes its snapshot of
    ``sys.modules``: at teardown it removes the modules imported since, and some of torch's
    register operators when imported, which fails the second time."""
    analyze(nn.Conv2d(3, 2, kernel_size=8, stride=8), image_size=8)


def _folder(program: str, tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    """The working directory of a row: ``pytester``'s for an inner pytest session."""
    if program == "vitprof":
        return tmp_path
    request.getfixturevalue("analysis_imported")
    return request.getfixturevalue("pytester").path


@pytest.mark.parametrize("case", CASES)
def test_defect(case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]) -> None:
    program, *argv = case.command.split()
    folder = _folder(program, tmp_path, request)
    monkeypatch.chdir(folder)
    for name, text in FILES.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(textwrap.dedent(text))
    for command in case.before:
        assert _vitprof(command.split()[1:], capsys)[0] == 0, command
    kept = {name: (folder / name).read_text() for name in case.unchanged}
    argv = [arg.format(tmp=folder) for arg in argv]
    code, out, err = (_vitprof(argv, capsys) if program == "vitprof"
                      else _pytest(argv, request.getfixturevalue("pytester")))
    assert code == case.code, out + err
    assert "Traceback" not in out + err
    if code in (2, 130):
        (line,) = err.strip().splitlines()
        assert case.message in line
    else:
        assert case.message in out + err
    if case.once:
        assert (out + err).count(case.once) == 1, out + err
    assert {name: (folder / name).read_text() for name in case.unchanged} == kept


def test_a_check_of_a_missing_folder_is_one_true_line(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 38: ``report --check --out missing`` said the folder does not exist, then that it
    is out of date; the one line says it is missing and what writes it (exit 1, a failed
    check)."""
    missing = tmp_path / "missing"
    code, out, err = _vitprof(["report", "--check", "--out", str(missing)], capsys)
    assert code == 1 and out == ""
    assert err == (f"vitprof: {missing} does not exist; generate it with 'vitprof report --all "
                   f"--out {missing}'\n")
