"""A user's own model: ``path/to/file.py:factory`` and ``package.module:factory``, any name with a
``:`` that no other library claims (the registry lists this library last). The factory is
called with the sizes and classes asked for, as the keywords it accepts; checking a name reads
the source without running it.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from vitprof.core.errors import UserError, one_line
from vitprof.models.libraries.base import BuildSizes, ModelFile, ModelLibrary

if TYPE_CHECKING:
    from torch import nn

NAME = "factory"


def _load_factory(spec: str) -> Callable[..., Any]:
    """The callable ``factory`` of ``FILE.py:factory`` (:func:`_run_file`) or
    ``package.module:factory`` (imported with the current directory importable, as ``python -m``
    has it: :func:`_importable`)."""
    target, _, attribute = spec.rpartition(":")
    if target.endswith(".py"):
        module = _run_file(target)
    else:
        with _importable(Path.cwd()):
            try:
                module = importlib.import_module(target)
            except Exception as error:
                raise UserError(f"cannot import {target}: {one_line(error)}") from None
    factory = getattr(module, attribute, None)
    if not callable(factory):
        raise UserError(f"{target} has no callable named '{attribute}'")
    return factory


def _run_file(target: str) -> ModuleType:
    """``FILE.py`` executed as Python runs a script, under its own name (the file's stem): its
    folder importable (:func:`_importable`), so it imports its siblings, and the module in
    ``sys.modules`` while it executes, as ``runpy.run_path`` has it (a ``@dataclass`` reads its
    module's namespace there, to resolve ``from __future__ import annotations``' strings); the
    entry of that name is restored afterwards."""
    path = Path(target)
    if not path.is_file():
        raise UserError(f"no such file: {target}")
    module_spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(module_spec)  # type: ignore[arg-type]
    with _importable(path.parent), _registered(module):
        try:
            module_spec.loader.exec_module(module)  # type: ignore[union-attr]
        except Exception as error:
            raise UserError(f"cannot import {target}: {one_line(error)}") from None
    return module


@contextlib.contextmanager
def _importable(folder: Path) -> Iterator[None]:
    """The modules of ``folder`` importable: ``folder`` first on ``sys.path`` for the duration
    (where Python puts a script's folder, or the current directory for ``python -m``), then
    last, where it stays: a factory or a forward may import a sibling when it runs, after the
    load, and the user's files then shadow no installed package that vitprof imports later."""
    entry = str(folder.resolve())
    sys.path.insert(0, entry)
    importlib.invalidate_caches()  # a folder's listing may be cached from before its files
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):  # the module's own code may have removed it
            sys.path.remove(entry)
        if entry not in sys.path:
            sys.path.append(entry)


@contextlib.contextmanager
def _registered(module: ModuleType) -> Iterator[None]:
    """``module`` in ``sys.modules`` under its name for the duration; then the entry it
    replaced, or none."""
    name = module.__name__
    before = sys.modules.get(name)
    sys.modules[name] = module
    try:
        yield
    finally:
        if before is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = before


def _call_factory(
    spec: str, factory: Callable[..., Any], sizes: BuildSizes, classes: int | None
) -> Callable[[], Any]:
    """``factory`` with the sizes and classes asked for, as keywords it accepts.

    A class count the factory cannot take (no ``num_classes`` parameter, no ``**kwargs``) is
    refused rather than ignored: a count for another head than the one asked for would look
    right and be wrong. The sizes set the input whether the factory takes them or not.
    """
    accepted = inspect.signature(factory).parameters
    open_ended = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values())
    kwargs: dict[str, Any] = {}
    for keys, value in sizes.keywords().values():
        kwargs.update({key: value for key in keys if key in accepted})
    if classes is not None:
        if "num_classes" not in accepted and not open_ended:
            raise UserError(f"{spec} takes no num_classes parameter: cannot build it with "
                            f"{classes} classes")
        kwargs["num_classes"] = classes
    return lambda: factory(**kwargs)


def _bound_names(nodes: Iterable[ast.AST]) -> Iterator[str]:
    """Names a module's statements bind at its top level (``*`` for a star import), read from
    its syntax tree; the bodies of functions and classes are not entered."""
    for node in nodes:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield node.name
        elif isinstance(node, ast.Import | ast.ImportFrom):
            yield from (alias.asname or alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            yield node.id
        else:
            yield from _bound_names(ast.iter_child_nodes(node))


def _factory_source(target: str) -> Path | None:
    """The Python source file of ``FILE.py`` or ``package.module``, found without running it;
    None for a module that has no such file (compiled, namespace): it is checked when built."""
    if target.endswith(".py"):
        if not Path(target).is_file():
            raise UserError(f"no such file: {target}")
        return Path(target)
    try:
        with _importable(Path.cwd()):  # as _load_factory will import it
            found = importlib.util.find_spec(target)  # imports the parents, not the module
    except (ImportError, ValueError) as error:
        raise UserError(f"cannot import {target}: {one_line(error)}") from None
    if found is None:
        raise UserError(f"cannot import {target}: no module named '{target}'")
    origin = found.origin or ""
    return Path(origin) if origin.endswith(".py") else None


def _check(spec: str) -> bool:
    """``FILE.py:factory`` or ``package.module:factory``: the source exists, parses and binds
    ``factory`` at its top level (or has a star import that may). A name bound only at run time
    (``globals()[...] = ...``) is not seen."""
    target, _, attribute = spec.rpartition(":")
    source = _factory_source(target)
    if source is None:
        return True
    try:
        tree = ast.parse(source.read_bytes(), filename=str(source))
    except (SyntaxError, ValueError, OSError) as error:
        raise UserError(f"cannot import {target}: {one_line(error)}") from None
    names = set(_bound_names(tree.body))
    if attribute not in names and "*" not in names:
        raise UserError(f"{target} has no callable named '{attribute}'")
    return True


def _build(spec: str, sizes: BuildSizes, num_classes: int | None) -> Callable[[], nn.Module]:
    return _call_factory(spec, _load_factory(spec), sizes, num_classes)


def _model_file(spec: str) -> ModelFile | None:
    """``FILE.py:factory`` as ``("", "FILE.py", ":factory")``; None for ``package.module:f``."""
    target, sep, attribute = spec.rpartition(":")
    return ("", target, f"{sep}{attribute}") if target.endswith(".py") else None


LIBRARY = ModelLibrary(
    name=NAME,
    tables=(),
    inferrers=(),
    known="",
    names=("path/to/file.py:factory", "package.module:factory"),
    check=_check,
    build=_build,
    claims_name=lambda name: ":" in name,
    model_file=_model_file,
)
