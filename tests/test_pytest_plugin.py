"""The pytest plugin, run inside pytest with ``pytester``: budget items and the fixture.

The inner sessions run in this process (``runpytest_inprocess``): torch and vitprof are imported
once, not once per session. The plugin's entry point is loaded there as in a fresh process;
:func:`test_loading_the_plugin_imports_no_torch` is the fresh interpreter."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest_plugins = ["pytester"]


def run_pytest(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """An inner pytest session in this process. Without hypothesis's plugin, unrelated to
    vitprof: it imports hypothesis when the session ends, and pytester removes the modules a
    session imported, so each session would import (and assertion-rewrite) it again."""
    return pytester.runpytest_inprocess("-p", "no:hypothesispytest", *args)


WITH_BUDGETS = ("-p", "vitprof.pytest_plugin", "--vitprof-budgets", "budgets.toml")

MODEL = "vitprof.models.notes.note002:build_cifar_vit"
# the note 002 CIFAR-ViT: 6 blocks of 12*512^2 + 13*512 params, plus 127*512 + 10 outside
PARAMS = 6 * (12 * 512**2 + 13 * 512) + 127 * 512 + 10  # 18_979_338

BUDGETS = f"""
[fits]
model = "{MODEL}"
max_params = {PARAMS}

[too_big]
model = "{MODEL}"
max_params = {PARAMS - 1}
"""


def test_one_item_per_entry_failure_shows_the_table(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", budgets=BUDGETS)
    result = run_pytest(pytester, *WITH_BUDGETS, "-v")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*budgets.toml::fits PASSED*", "*budgets.toml::too_big FAILED*"])
    # the failure message is the check table: the limit, the actual count, -1 headroom
    result.stdout.fnmatch_lines([
        "*check*limit*actual*headroom*verdict*",
        f"too_big.max_params*<= {PARAMS - 1:,}*{PARAMS:,}*-1*fail*",
        "FAIL: 1 of 3 checks failed: too_big.max_params",
    ])


def test_k_selects_entries(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", budgets=BUDGETS)
    result = run_pytest(pytester, *WITH_BUDGETS, "-k", "fits")
    result.assert_outcomes(passed=1, deselected=1)


def test_a_bad_budget_file_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", budgets="[fits]\nmax_parms = 1\n")
    result = run_pytest(pytester, *WITH_BUDGETS)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*vitprof: error: *budgets.toml:2: entry 'fits', key "
                                 "'max_parms': unknown key*"])


def test_an_unknown_model_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", budgets='[nope]\nmodel = "vit_b_61"\nmax_params = 1\n')
    result = run_pytest(pytester, *WITH_BUDGETS)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*vitprof: error: *entry 'nope', key 'model': unknown model "
                                 "'vit_b_61'*"])


def test_an_entry_that_cannot_be_analyzed_fails(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(factories="def boom():\n    raise RuntimeError('the factory exploded')\n")
    pytester.makefile(".toml", budgets='[nope]\nmodel = "factories.py:boom"\nmax_params = 1\n')
    result = run_pytest(pytester, *WITH_BUDGETS)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["vitprof: error: *entry 'nope'*the factory exploded*"])


def test_profile_fixture(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(f"""
        def test_params(vitprof_profile):
            profile = vitprof_profile("{MODEL}")
            assert profile.totals.params == {PARAMS}
            assert vitprof_profile("{MODEL}") is profile  # analyzed once
    """)
    result = run_pytest(pytester, "-p", "vitprof.pytest_plugin")
    result.assert_outcomes(passed=1)


def test_loading_the_plugin_imports_no_torch() -> None:
    """pytest loads the plugin in every session of a project that installs vitprof."""
    code = "import sys, vitprof.pytest_plugin; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout == "False\n"
