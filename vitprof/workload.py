"""What is counted: a model and what one forward of it is fed. The ONLY place both are built.

An :class:`InputSpec` is one forward's input: a batch of ``channels``-channel tensors whose
spatial sizes have any rank (``(H, W)`` an image, ``(T, H, W)`` a video, ...), in ``dtype``,
followed by extra positional and keyword arguments. Its tensor has shape
``(batch, channels, *spatial)``.

A :class:`Workload` is a model ready to count: its name, its module, its inputs, and the
component rules (``(regex, component)``) of its zoo entry followed by the caller's.
:func:`make_workload` builds one from what a user gave: a zoo name, ``timm:NAME``, ``hf:...``,
``FILE.py:factory``, ``package.module:factory`` (all through :func:`vitprof.models.zoo.build`)
or an ``nn.Module``, plus an image size, a batch size and a class count. Without an image size
the input is the model's own: a zoo entry's size, else what the module declares
(:func:`vitprof.models.declared_input.declared_input`: timm's ``pretrained_cfg``, a Hugging Face
config, ``img_size`` / ``in_chans`` attributes; a non-square size kept as declared), else
:data:`vitprof.models.zoo.DEFAULT_IMAGE_SIZE`. :attr:`Workload.input_source` says which, and
names every guess. A given ``image_size`` is a square image.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import nn

from vitprof.core.errors import UserError
from vitprof.count.families import Rule
from vitprof.count.running import check_input, check_int
from vitprof.models.declared_input import declared_input
from vitprof.models.deploy import deploy_form
from vitprof.models.zoo import DEFAULT_IMAGE_SIZE, ZooEntry, build

CallArgs = tuple[tuple[Any, ...], dict[str, Any]]


@dataclass(frozen=True)
class InputSpec:
    """One forward's input: ``(batch, channels, *spatial)`` in ``dtype``, then ``args`` and
    ``kwargs`` passed after it unchanged."""

    batch: int
    channels: int
    spatial: tuple[int, ...]  # (H, W) for an image, (T, H, W) for a video
    dtype: torch.dtype = torch.float32
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        check_int("batch size", self.batch, 1)
        check_int("number of input channels", self.channels, 1)
        if not self.spatial:
            raise UserError("an input needs at least one spatial size")
        for size in self.spatial:
            check_int("input size", size, 1)

    @classmethod
    def image(
        cls, size: int, *, batch: int = 1, channels: int = 3, dtype: torch.dtype = torch.float32
    ) -> InputSpec:
        """A batch of square ``size`` x ``size`` images."""
        return cls(batch, channels, (size, size), dtype)

    @property
    def shape(self) -> tuple[int, ...]:
        """The input tensor's shape: ``(batch, channels, *spatial)``."""
        return (self.batch, self.channels, *self.spatial)

    @property
    def image_size(self) -> int:
        """The side of a square image input; a UserError for any other input."""
        if len(self.spatial) != 2 or self.spatial[0] != self.spatial[1]:
            raise UserError(f"this needs a square image input, got {self.describe()}")
        return self.spatial[0]

    def describe(self) -> str:
        """The input for a report: ``1x3x224x224 float32``."""
        return f"{'x'.join(map(str, self.shape))} {str(self.dtype).removeprefix('torch.')}"

    def tensor(self, device: str = "meta", *, random: bool = False) -> torch.Tensor:
        """The input tensor on ``device``: uninitialised on meta (nothing is allocated), else
        zeros, or standard normal values when ``random``."""
        if device == "meta":
            return torch.empty(self.shape, dtype=self.dtype, device="meta")
        if random:
            return torch.randn(self.shape, device=device).to(self.dtype)
        return torch.zeros(self.shape, dtype=self.dtype, device=device)

    def example(self, device: str = "meta", *, random: bool = False) -> CallArgs:
        """The arguments of one forward, ``model(*args, **kwargs)``: the input tensor
        (:meth:`tensor`) followed by the extra ``args``, and the ``kwargs``."""
        return (self.tensor(device, random=random), *self.args), dict(self.kwargs)


@dataclass(frozen=True)
class Workload:
    """A model ready to count: ``model(*inputs.example())`` is one forward."""

    name: str
    module: nn.Module
    inputs: InputSpec
    rules: tuple[Rule, ...] = ()  # the zoo entry's overrides, then the caller's
    entry: ZooEntry | None = None
    warnings: tuple[str, ...] = ()  # what the build noticed and the analysis should say
    input_source: str = "given"  # where the input's size and channels came from


def make_workload(
    model: nn.Module | str,
    *,
    image_size: int | None = None,
    batch_size: int = 1,
    num_classes: int | None = None,
    name: str | None = None,
    overrides: Sequence[Rule] = (),
    device: str = "meta",
    dtype: torch.dtype | None = None,
) -> Workload:
    """The workload of ``model``: a name is built on ``device`` without weights
    (:func:`vitprof.models.zoo.build`), a module is taken as it is (``name`` names it, else
    its class). ``image_size`` None means the model's own; ``num_classes`` applies to a name
    only (0: no head). ``dtype`` converts a model built by name and sets the input's dtype
    (None: the model as built, float32 input)."""
    check_input(image_size, batch_size, num_classes)
    input_dtype = dtype or torch.float32
    if isinstance(model, str):
        built = build(model, image_size=image_size, num_classes=num_classes, device=device)
        module = built.module.to(dtype) if dtype is not None else built.module
        spatial, channels, source = _own_input(built.module, image_size, built.entry,
                                               built.image_size)
        inputs = InputSpec(batch_size, channels, spatial, input_dtype)
        rules = (*(built.entry.overrides if built.entry else ()), *overrides)
        return Workload(built.name, module, inputs, rules, built.entry, built.warnings, source)
    if not isinstance(model, nn.Module):
        raise UserError(f"expected an nn.Module or a model name, got {type(model).__name__}")
    if num_classes is not None:
        raise UserError("num_classes applies to a model built by name; this nn.Module is "
                        "already built")
    spatial, channels, source = _own_input(model, image_size, None, image_size)
    inputs = InputSpec(batch_size, channels, spatial, input_dtype)
    return Workload(name or type(model).__name__, model, inputs, tuple(overrides),
                    input_source=source)


def _own_input(
    module: nn.Module, image_size: int | None, entry: ZooEntry | None, built_size: int | None
) -> tuple[tuple[int, ...], int, str]:
    """Spatial size, channels and where they came from: a given ``image_size`` (square), else
    the zoo entry's size, else what ``module`` declares, else the default size. A zoo entry is
    an RGB image model of vitprof's own, so its channels are not a guess."""
    declared = declared_input(module)
    channels = declared.channels or 3
    guesses = [] if entry is not None else list(declared.guessed)
    if declared.channels is None and entry is None:
        guesses.append("3 channels (the model declares none and has no convolution)")
    if image_size is not None:
        return (image_size, image_size), channels, _source("image size given", guesses)
    if entry is not None:
        return (entry.image_size,) * 2, channels, "zoo entry"
    if declared.size is not None:
        return declared.size, channels, _source(declared.source, guesses)
    size = built_size or DEFAULT_IMAGE_SIZE
    said = "the default size" if size == DEFAULT_IMAGE_SIZE else "the size it was built with"
    return (size, size), channels, _source(said, guesses)


def _source(said: str, guesses: Sequence[str]) -> str:
    return "; ".join([said or "nothing declared", *(f"guessed {g}" for g in guesses)])


def deployed(work: Workload, deploy: bool) -> Workload:
    """``work`` with its module in deploy form (:func:`vitprof.models.deploy.deploy_form`, a
    copy) and its name saying so, when ``deploy``; else ``work`` unchanged."""
    if not deploy:
        return work
    return replace(work, name=f"{work.name} (deploy form)", module=deploy_form(work.module))
