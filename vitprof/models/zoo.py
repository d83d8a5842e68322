"""Model names to ``nn.Module`` factories. Weights are never loaded: random init, or meta.

Accepted names:

* every torchvision ViT (``vit_b_16``, ``torchvision:vit_b_16``, ...) and ``vit_22b``
  (torchvision's class at ViT-22B's sizes);
* ``timm:NAME`` (needs the ``timm`` extra);
* ``hf:vit-base-patch16-224`` style built-in configs, ``hf:path/to/config.json`` and
  ``hf:path/to/dir`` holding a ``config.json`` (need the ``transformers`` extra);
* the models of the source notes (``note001_vit_b16``, ``note002_cifar_vit``, ...) and
  ``vit_22b_parallel``, vitprof's ViT-22B-style model (:mod:`vitprof.models.vit22b`);
* ``path/to/file.py:factory`` and ``package.module:factory`` for anything else.
"""

from __future__ import annotations

import ast
import contextlib
import difflib
import importlib
import importlib.util
import inspect
import json
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from torch import nn

from vitprof.core.errors import UserError
from vitprof.core.slow_notice import notice_if_slow
from vitprof.core.validate import check_image_size, check_int
from vitprof.count.running import ZERO_ELEMENT_WARNING, meta_caused, one_line
from vitprof.models.declared_input import declared_input
from vitprof.models.family import ENTRIES, torchvision
from vitprof.models.family.base import (
    Factory,
    Published,
    ZooEntry,
    missing_package,
    require_package,
)

__all__ = [
    "DEFAULT_FRAMES", "DEFAULT_IMAGE_SIZE", "TORCHVISION_VITS", "ZOO", "BuiltModel", "Factory",
    "Published", "ZooEntry", "build", "check_zoo_size", "default_image_size", "infer_image_size",
    "infer_patch_size", "lookup", "published_sizes", "validate_name",
]


@dataclass(frozen=True)
class BuiltModel:
    """A model ready to be analyzed, with what is known about its input."""

    name: str
    module: nn.Module
    image_size: int | tuple[int, int]  # an int: a square image; a pair: (height, width)
    entry: ZooEntry | None
    warnings: tuple[str, ...] = ()  # what the build noticed and the analysis should say


DEFAULT_IMAGE_SIZE = 224  # the input size of a model that does not say its own
# the frames of a model with a 3-D patch embedding that does not say its own: the clip length of
# transformers' VideoMAEConfig
DEFAULT_FRAMES = 16

TORCHVISION_VITS = tuple(torchvision.VITS)

ZOO: dict[str, ZooEntry] = {entry.name: entry for entry in ENTRIES}


def lookup(name: str) -> ZooEntry:
    """The zoo entry for ``name`` (``torchvision:`` prefix optional) or a UserError."""
    key = name.removeprefix("torchvision:")
    if key in ZOO:
        return ZOO[key]
    close = difflib.get_close_matches(key, list(ZOO), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else "; see 'vitprof models'"
    raise UserError(f"unknown model '{name}'{hint}")


def published_sizes(name: str) -> tuple[int, ...]:
    """The square image sizes the published weights of the zoo model ``name`` are made for
    (torchvision's weights: 224 and 384 for vit_b_16), or () when vitprof knows none."""
    entry = ZOO.get(name.removeprefix("torchvision:"))
    return entry.published_sizes() if entry is not None else ()


ImageSize = int | tuple[int, int]  # an int: a square image; a pair: (height, width)


def size_text(image_size: ImageSize) -> str:
    """``224`` or ``224x320``."""
    return str(image_size) if isinstance(image_size, int) else "x".join(map(str, image_size))


def _square(image_size: ImageSize) -> ImageSize:
    """A square pair as its side (what a builder taking one int understands)."""
    return image_size if isinstance(image_size, int) or image_size[0] != image_size[1] \
        else image_size[0]


def infer_patch_size(module: nn.Module) -> int | None:
    """Kernel of the first convolution whose kernel equals its stride (a patchify conv)."""
    for child in module.modules():
        if isinstance(child, nn.Conv2d) and child.kernel_size == child.stride:
            return int(child.kernel_size[0])
    return None


def infer_image_size(module: nn.Module) -> int | None:
    """Height of the image a model was built for, read by
    :func:`vitprof.models.declared_input.declared_input` (declared first, then guessed)."""
    size = declared_input(module).size
    return size[0] if size else None


def default_image_size(module: nn.Module) -> int:
    """The image size a model was built for (:func:`infer_image_size`), else
    :data:`DEFAULT_IMAGE_SIZE`."""
    return infer_image_size(module) or DEFAULT_IMAGE_SIZE


def _construct(name: str, factory: Callable[[], nn.Module], device: str) -> nn.Module:
    """Call ``factory`` with ``device`` as the default device; on meta, when the constructor
    itself needs data (``.item()`` in an init: :func:`~vitprof.count.running.meta_caused`), fall
    back
    to a CPU build moved to meta: the one case where a factory runs twice. A head of zero
    classes (``num_classes=0``, no head) is built without torch's zero-element warning."""
    try:
        module = _quietly(factory, device)
    except UserError:
        raise
    except Exception as error:
        if device != "meta" or not meta_caused(error):
            raise _build_failed(name, error) from None
        try:
            module = _quietly(factory, "cpu").to("meta")
        except Exception as cpu_error:
            raise _build_failed(name, cpu_error) from None
    if not isinstance(module, nn.Module):
        raise UserError(f"factory for {name} returned {type(module).__name__}, not an nn.Module")
    return module


def _build_failed(name: str, error: Exception) -> UserError:
    """The one line for a build that raised: a missing optional package (an ImportError: ``No
    module named 'natten'``, or transformers' ``X requires the natten library but it was not
    found in your environment. You can install it ...``) named as one, by its first sentence."""
    if isinstance(error, ImportError):
        first = " ".join(str(error).split()).partition(". ")[0].rstrip(".")
        return UserError(f"building {name} failed: a missing optional package: {first}")
    return UserError(f"building {name} failed: {one_line(error)}")


def _quietly(factory: Callable[[], nn.Module], device: str) -> nn.Module:
    with torch.device(device), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=ZERO_ELEMENT_WARNING)
        return factory()


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


@dataclass(frozen=True)
class BuildSizes:
    """The input sizes a model is built for; None: its own."""

    image_size: ImageSize | None = None
    frames: int | None = None
    in_chans: int | None = None

    def keywords(self) -> dict[str, tuple[tuple[str, ...], Any]]:
        """Each size asked for, with the keywords a factory may take it as."""
        sizes = {
            "image size": (("image_size", "img_size"), self.image_size),
            "frames": (("num_frames", "frames"), self.frames),
            "channels": (("in_chans", "in_channels", "num_channels"), self.in_chans),
        }
        return {what: given for what, given in sizes.items() if given[1] is not None}

    def naming(self, name: str) -> str:
        """``name`` with the sizes asked for, as a failed build names it: ``vit_b_16 at image
        size 225``."""
        asked = [f"{what} {size_text(value) if what == 'image size' else value}"
                 for what, (_, value) in self.keywords().items()]
        return f"{name} at {', '.join(asked)}" if asked else name


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


def _hf_from_config(path: str, num_classes: int | None, sizes: BuildSizes) -> Factory:
    transformers = require_package("transformers", "transformers")
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UserError(f"no such file: {path}") from None
    except (OSError, json.JSONDecodeError) as error:
        raise UserError(f"malformed Hugging Face config {path}: {one_line(error)}") from None
    if not isinstance(data, dict) or "model_type" not in data:
        raise UserError(f"malformed Hugging Face config {path}: no 'model_type' key")
    try:
        config = transformers.AutoConfig.for_model(data.pop("model_type"), **data)
    except Exception as error:  # transformers validates fields with its own error classes
        raise UserError(f"malformed Hugging Face config {path}: {one_line(error)}") from None
    if num_classes is not None:
        config.num_labels = num_classes
    if sizes.image_size is not None:
        config.image_size = _square(sizes.image_size)
    if sizes.frames is not None:
        config.num_frames = sizes.frames
    if sizes.in_chans is not None:
        config.num_channels = sizes.in_chans
    auto = _hf_auto_class(transformers, config)
    return lambda: auto.from_config(config)


_HF_AUTO_CLASSES = ("AutoModelForImageClassification", "AutoModelForVideoClassification",
                    "AutoModel")


def _hf_auto_class(transformers: Any, config: Any) -> Any:
    """The first auto class that maps ``config`` to a model: an image classifier, else a video
    classifier (VideoMAE, ViViT, TimeSformer), else the bare model."""
    for name in _HF_AUTO_CLASSES:
        auto = getattr(transformers, name)
        if type(config) in auto._model_mapping:
            return auto
    raise UserError(f"transformers has no model for a {config.model_type} config")


def _hf_config_file(target: str) -> str | None:
    """The config file an ``hf:`` target names: a ``*.json`` path, or a directory's
    ``config.json`` (a directory without one is a UserError); None for a built-in name."""
    if target.endswith(".json"):
        return target
    if not Path(target).is_dir():
        return None
    in_directory = Path(target, "config.json")
    if not in_directory.is_file():
        raise UserError(f"no config.json in {target}")
    return str(in_directory)


def _timm_model(name: str) -> tuple[Any, str]:
    """timm and the model name of ``timm:NAME``, or a UserError for an unknown architecture."""
    timm = require_package("timm", "timm")
    model_name = name.removeprefix("timm:")
    # a pretrained tag (``vit_base_patch16_224.augreg_in21k``) selects that checkpoint's
    # architecture settings (its class count, say); no weights are loaded either way
    architecture = model_name.partition(".")[0]
    if architecture not in timm.list_models():
        close = difflib.get_close_matches(architecture, timm.list_models(), n=3)
        hint = f"; did you mean {', '.join('timm:' + c for c in close)}?" if close else ""
        raise UserError(f"unknown timm model '{model_name}'{hint}")
    return timm, model_name


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


def _check_factory(spec: str) -> None:
    """``FILE.py:factory`` or ``package.module:factory``: the source exists, parses and binds
    ``factory`` at its top level (or has a star import that may). A name bound only at run time
    (``globals()[...] = ...``) is not seen."""
    target, _, attribute = spec.rpartition(":")
    source = _factory_source(target)
    if source is None:
        return
    try:
        tree = ast.parse(source.read_bytes(), filename=str(source))
    except (SyntaxError, ValueError, OSError) as error:
        raise UserError(f"cannot import {target}: {one_line(error)}") from None
    names = set(_bound_names(tree.body))
    if attribute not in names and "*" not in names:
        raise UserError(f"{target} has no callable named '{attribute}'")


def validate_name(name: str) -> ZooEntry | None:
    """Check, without building anything or running a factory, that :func:`build` knows
    ``name``: a zoo name, ``timm:NAME`` (timm installed, a known architecture), ``hf:``
    (transformers installed; a built-in name, or a config file that exists), ``FILE.py:factory``
    or ``package.module:factory`` (the source defines ``factory``). Returns the zoo entry where
    ``name`` is one, else None; raises UserError naming what is wrong."""
    if name.startswith("timm:"):
        _timm_model(name)
        return None
    if name.startswith("hf:"):
        if importlib.util.find_spec("transformers") is None:  # found, not imported: a slow import
            raise missing_package("transformers", "transformers")
        config_file = _hf_config_file(name.removeprefix("hf:"))
        if config_file is None:
            return lookup(name)
        if not Path(config_file).is_file():
            raise UserError(f"no such file: {config_file}")
        return None
    if ":" in name and not name.startswith("torchvision:"):
        _check_factory(name)
        return None
    return lookup(name)


def _check_square(entry: ZooEntry, image_size: ImageSize) -> None:
    """Refuse a non-square size for a zoo entry whose builder takes one int. Any other size is
    the model's to take or refuse: a patch size that does not divide it is no refusal of
    vitprof's (a strided convolution floors it, :mod:`vitprof.count.flooring`); a model that
    refuses it (torchvision's ViT asserts) fails to build, with its own reason."""
    if not isinstance(image_size, int) and image_size[0] != image_size[1] \
            and not entry.non_square:
        raise UserError(f"{entry.name} takes a square image size only (its builder takes one "
                        f"int); got {size_text(image_size)}")


def check_zoo_size(entry: ZooEntry, image_size: ImageSize) -> None:
    """Refuse, before anything is analysed, an image size the zoo model ``entry`` refuses: a
    non-square size where its builder takes one int, or a size its constructor raises on, with
    its own reason (built on meta: torchvision's ViT asserts that its patch size divides the
    image). vitprof refuses nothing else: a size the model takes is counted as it computes."""
    build(entry.name, image_size=image_size, device="meta")


def build(
    name: str,
    *,
    image_size: ImageSize | None = None,
    num_classes: int | None = None,
    device: str = "meta",
    frames: int | None = None,
    in_chans: int | None = None,
) -> BuiltModel:
    """Build the model called ``name`` on ``device`` without loading any weights; a build still
    running after 2 s says so once on stderr, if that is a terminal.

    ``image_size`` is a positive int (a square) or ``(height, width)``; ``num_classes=0``
    means no head. Each size given is passed to the builder: timm's ``img_size`` and
    ``in_chans``; a Hugging Face config's ``image_size``, ``num_frames`` and ``num_channels``;
    a factory's keywords of those names (:class:`BuildSizes`); a zoo entry's image size (a
    non-square one only where the entry takes it).
    """
    image_size = check_image_size(image_size)
    if num_classes is not None:
        check_int("number of classes", num_classes, 0)
    sizes = BuildSizes(image_size, frames, in_chans)
    with notice_if_slow(f"building {name} ..."):
        return _build(name, sizes=sizes, num_classes=num_classes, device=device)


def _build(name: str, *, sizes: BuildSizes, num_classes: int | None, device: str) -> BuiltModel:
    image_size = sizes.image_size
    if name.startswith("timm:"):
        timm, model_name = _timm_model(name)
        kwargs: dict[str, Any] = {}
        if image_size is not None:
            kwargs["img_size"] = image_size
        if sizes.in_chans is not None:
            kwargs["in_chans"] = sizes.in_chans
        if num_classes is not None:
            kwargs["num_classes"] = num_classes
        module = _construct(sizes.naming(name),
                            lambda: timm.create_model(model_name, pretrained=False, **kwargs),
                            device)
        return _finish(name, module, image_size)
    config_file = _hf_config_file(name.removeprefix("hf:")) if name.startswith("hf:") else None
    if config_file is not None:
        factory = _hf_from_config(config_file, num_classes, sizes)
        return _finish(name, _construct(sizes.naming(name), factory, device), image_size)
    if ":" in name and not name.startswith(("hf:", "torchvision:")):
        factory = _call_factory(name, _load_factory(name), sizes, num_classes)
        return _finish(name, _construct(sizes.naming(name), factory, device), image_size)
    entry = lookup(name)
    size = _square(image_size) if image_size is not None else entry.image_size
    _check_square(entry, size)
    classes = num_classes if num_classes is not None else entry.num_classes
    module = _construct(sizes.naming(entry.name), lambda: entry.build(size, classes), device)
    return BuiltModel(entry.name, module, size, entry)


def _finish(name: str, module: nn.Module, image_size: ImageSize | None) -> BuiltModel:
    """A model built from outside the zoo's table (timm, hf, FILE.py:factory): no entry."""
    size = image_size if image_size is not None else default_image_size(module)
    return BuiltModel(name, module, size, None, _head_warnings(module))


def _head_warnings(module: nn.Module) -> tuple[str, ...]:
    """A Hugging Face config whose heads do not divide its width builds (transformers truncates
    each head to ``width // heads``), but no ViT of that shape exists: ``vitprof formula``
    refuses it, so say what was counted instead."""
    config = getattr(module, "config", None)
    width = getattr(config, "hidden_size", None)
    heads = getattr(config, "num_attention_heads", None)
    if not isinstance(width, int) or not isinstance(heads, int) or heads < 1 or not width % heads:
        return ()
    return (f"width {width} is not divisible by {heads} heads (vitprof formula refuses this "
            f"shape); the model ran with heads of {width // heads}, {heads * (width // heads)} "
            f"of the {width} channels in q, k and v",)
