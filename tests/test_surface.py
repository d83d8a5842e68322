"""The surface: ``profile_model``, ``memory`` and ``run_crosscheck`` take ``(model,
request=None, *, their own options)``, as ``sweep`` takes its request; the input keywords they
took before still make the request, with a DeprecationWarning, and give the same result."""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

import vitprof
from vitprof import InputRequest, UserError, memory
from vitprof.checks.crosscheck import run_crosscheck
from vitprof.core.errors import VitprofDeprecationWarning
from vitprof.measure.profile import profile_model
from vitprof.models.libraries.base import BuildSizes

SURFACE = [profile_model, memory, run_crosscheck]


@pytest.mark.parametrize("function", SURFACE, ids=lambda f: f.__name__)
def test_the_input_is_the_request_and_the_rest_are_own_keywords(function: Callable) -> None:
    parameters = list(inspect.signature(function).parameters.values())
    assert [p.name for p in parameters[:2]] == ["model", "request"]
    assert all(p.kind is p.POSITIONAL_OR_KEYWORD for p in parameters[:2])
    own = {p.name for p in parameters[2:] if p.kind is p.KEYWORD_ONLY}
    kinds = inspect.Parameter
    assert {p.kind for p in parameters[2:]} <= {kinds.KEYWORD_ONLY, kinds.VAR_KEYWORD}
    assert not own & {"image_size", "batch_size", "frames", "in_chans", "dtype", "input_shape",
                      "num_classes", "inputs"}


def tiny() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 4, stride=4), nn.Flatten(), nn.Linear(4 * 2 * 2, 3))


# each function's call on tiny(), at a request or at the old keywords, and what to compare
CALLS: dict[str, tuple[Callable[..., Any], dict[str, Any], Callable[[Any], Any]]] = {
    "memory": (memory, {"target": "cpu"},
               lambda estimate: (estimate.peak_bytes, estimate.batch_size)),
    "profile_model": (profile_model, {"warmup": 0, "iters": 1, "peak_tflops": 1.0, "threads": 1},
                      lambda result: (result.input_shape, result.profile.totals)),
    "run_crosscheck": (run_crosscheck, {"peers": ["closed-form"]},
                       lambda check: (check.input_shape, check.vitprof)),
}


@pytest.mark.parametrize("name", CALLS)
def test_the_old_input_keywords_make_the_request_with_a_deprecation_warning(name: str) -> None:
    function, own, result = CALLS[name]
    new = function(tiny(), InputRequest(batch_size=2, image_size=8), **own)
    with pytest.warns(DeprecationWarning, match=rf"{name}\(batch_size=..., image_size=...\) is "
                                                 "deprecated") as warned:
        old = function(tiny(), batch_size=2, image_size=8, **own)
    assert result(old) == result(new)
    assert {w.filename for w in warned if issubclass(w.category, DeprecationWarning)} == {__file__}


def test_the_suite_fails_on_a_vitprof_deprecation_no_test_asked_for() -> None:
    # pyproject's filterwarnings: an old keyword outside pytest.warns is an error, so that the
    # tests cannot call the deprecated surface again unnoticed (162 warnings were printed)
    with pytest.raises(VitprofDeprecationWarning, match=r"memory\(batch_size=...\) is deprecated"):
        memory(tiny(), batch_size=2, target="cpu")
    assert issubclass(VitprofDeprecationWarning, DeprecationWarning)


def test_a_keyword_that_is_no_option_and_no_input_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'image_sise'"):
        memory(tiny(), image_sise=8)


def test_a_request_that_is_not_one_is_one_line() -> None:
    # image_size was run_crosscheck's second positional parameter
    with pytest.raises(UserError, match="run_crosscheck's request is an InputRequest, got int"):
        run_crosscheck(tiny(), 8)  # type: ignore[arg-type]


def test_the_channels_are_typed_once_in_the_request_and_once_in_analyzes_wrapper() -> None:
    # in_chans: int | None was in 7 signatures (analyze, profile_model, memory, run_crosscheck,
    # zoo.build, BuildSizes, InputRequest): the request's sizes are now BuildSizes' own
    package = Path(vitprof.__file__).parent
    typed = [f"{path.relative_to(package)}:{node.lineno}"
             for path in package.rglob("*.py") for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.arg | ast.AnnAssign) and node.annotation is not None
             and (node.arg if isinstance(node, ast.arg) else getattr(node.target, "id", ""))
             == "in_chans" and ast.unparse(node.annotation) == "int | None"]
    assert len(typed) <= 2, typed
    assert issubclass(InputRequest, BuildSizes)
    assert InputRequest(in_chans=1).in_chans == 1
