"""What is counted: a model and what one forward of it is fed. The ONLY place both are built.

An :class:`InputSpec` is one forward's input: a batch of ``channels``-channel tensors whose
spatial sizes have any rank (``(H, W)`` an image, ``(T, H, W)`` a video, ...), in ``dtype``,
with its channels at ``channel_axis`` (1: ``B, C, T, H, W``; 2: ``B, T, C, H, W``, the layout
of Hugging Face video models), placed at ``position`` (an index among the positional
arguments, or a keyword) among extra positional and keyword arguments. Extra tensors are kept as
:class:`TensorSpec` (shape and dtype) and made on the device of each run.

A :class:`Workload` is a model ready to count: its name, its module, its inputs, and the
component rules (``(regex, component)``) of its zoo entry followed by the caller's.
:func:`make_workload` builds one from what a user gave: a zoo name, ``timm:NAME``, ``hf:...``,
``FILE.py:factory``, ``package.module:factory`` (all through :func:`vitprof.models.zoo.build`,
which builds the model at the image size, frames and channels asked for) or an ``nn.Module``
(a ``torch.compile``'d one, given or built, is unwrapped to its ``_orig_mod``, with a warning),
plus an :class:`InputRequest`: an image size (an int for a square, or ``(H, W)``), frames,
channels, a dtype, a whole input shape, or the inputs themselves. Without them the input is the
model's own: a zoo entry's size, else what the module declares
(:func:`vitprof.models.declared_input.declared_input`: timm's ``pretrained_cfg``, a Hugging Face
config, ``img_size`` / ``in_chans`` attributes, a config's ``num_frames``; a non-square size kept
as declared), else :data:`vitprof.models.zoo.DEFAULT_IMAGE_SIZE` (and, for a first convolution
that is 3-D of a model that declares nothing, no size asked,
:data:`vitprof.models.zoo.DEFAULT_FRAMES` frames). :attr:`Workload.input_source` says what
decided, and names every guess that did.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from functools import partial
from typing import Any

import torch
from torch import nn
from torch.utils._pytree import tree_map

from vitprof.core.errors import UserError, VitprofDeprecationWarning
from vitprof.core.overrides import Override
from vitprof.core.records import InputRecord
from vitprof.core.validate import check_elements, check_image_size, check_int, check_shape
from vitprof.core.vocab import Dtype
from vitprof.count.running import one_line
from vitprof.count.session import call
from vitprof.models.declared_input import DeclaredInput, declared_input, square_or_pair
from vitprof.models.deploy import deploy_form
from vitprof.models.forward_inputs import OwnInput, TensorSpec, make_tensor, own_forward_input
from vitprof.models.libraries.base import BuildSizes
from vitprof.models.reached_channels import traced_channels
from vitprof.models.zoo import (
    DEFAULT_FRAMES,
    DEFAULT_IMAGE_SIZE,
    BuiltModel,
    ZooEntry,
    build_sized,
)

CallArgs = tuple[tuple[Any, ...], dict[str, Any]]
ImageSize = int | tuple[int, int]  # an int: a square image; a pair: (height, width)

DTYPES: dict[str, torch.dtype] = {name: getattr(torch, name) for name in Dtype}
"""The dtypes a model and its input can be counted in, by name."""


def dtype_named(value: torch.dtype | str | None) -> torch.dtype | None:
    """A dtype of :data:`DTYPES`, given as itself or by name (None stays None)."""
    if value is None or (isinstance(value, torch.dtype) and value in DTYPES.values()):
        return value
    if isinstance(value, str) and value.removeprefix("torch.") in DTYPES:
        return DTYPES[value.removeprefix("torch.")]
    raise UserError(f"unknown dtype {value!r}; choose from {', '.join(DTYPES)}")


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.bfloat16`` -> ``bfloat16``."""
    return str(dtype).removeprefix("torch.")


def _made(value: Any, device: str, random: bool) -> Any:
    """``value`` with every :class:`TensorSpec` in it (nested in tuples, lists, dicts) made."""
    return tree_map(lambda v: v.make(device, random=random) if isinstance(v, TensorSpec) else v,
                    value)


@dataclass(frozen=True)
class InputSpec:
    """One forward's input: ``channels`` x ``spatial`` in ``dtype`` (channels at
    ``channel_axis`` of the tensor), placed at ``position`` among ``args`` and ``kwargs``,
    which are passed unchanged (a :class:`TensorSpec` among them made on the run's device).
    ``channel_axis`` None: the tensor has no channel axis, ``(batch, *spatial)`` (token ids,
    an image already cut into patches), and ``channels`` is 1."""

    batch: int
    channels: int
    spatial: tuple[int, ...]  # (H, W) for an image, (T, H, W) for a video
    dtype: torch.dtype = torch.float32
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict, hash=False)
    channel_axis: int | None = 1  # 1: (B, C, *spatial); 2: (B, T, C, H, W); None: (B, *spatial)
    position: int | str = 0  # where the tensor goes: an index among args, or a keyword

    def __post_init__(self) -> None:
        check_int("batch size", self.batch, 1)
        check_int("number of input channels", self.channels, 1)
        if not self.spatial:
            raise UserError("an input needs at least one spatial size")
        for size in self.spatial:
            check_int("input size", size, 1)
        if self.channel_axis is None:
            if self.channels != 1:
                raise UserError("an input without a channel axis has 1 channel")
        elif not 1 <= self.channel_axis <= len(self.spatial) + 1:
            raise UserError(f"channel axis {self.channel_axis} is outside the input's "
                            f"{len(self.spatial) + 2} dimensions")

    @classmethod
    def image(
        cls, size: int, *, batch: int = 1, channels: int = 3, dtype: torch.dtype = torch.float32
    ) -> InputSpec:
        """A batch of square ``size`` x ``size`` images."""
        return cls(batch, channels, (size, size), dtype)

    @property
    def shape(self) -> tuple[int, ...]:
        """The input tensor's shape: ``(batch, channels, *spatial)``, channels at
        ``channel_axis`` (none without one)."""
        if self.channel_axis is None:
            return (self.batch, *self.spatial)
        before = self.spatial[: self.channel_axis - 1]
        return (self.batch, *before, self.channels, *self.spatial[self.channel_axis - 1:])

    @property
    def image_size(self) -> int:
        """The side of a square image input; a UserError for any other input."""
        if len(self.spatial) != 2 or self.spatial[0] != self.spatial[1]:
            raise UserError(f"this needs a square image input, got {self.describe()}")
        return self.spatial[0]

    def describe(self) -> str:
        """The input for a report: ``1x3x224x224 float32``."""
        return f"{'x'.join(map(str, self.shape))} {dtype_name(self.dtype)}"

    def tensor(self, device: str = "meta", *, random: bool = False) -> torch.Tensor:
        """The input tensor on ``device``: uninitialised on meta (nothing is allocated), else
        zeros, or standard normal values when ``random``."""
        return make_tensor(self.shape, self.dtype, device, random)

    def example(self, device: str = "meta", *, random: bool = False) -> CallArgs:
        """The arguments of one forward, ``model(*args, **kwargs)``: the input tensor
        (:meth:`tensor`) at ``position`` among the extra ``args`` and ``kwargs``, every
        :class:`TensorSpec` among them made on ``device``."""
        args = [_made(value, device, random) for value in self.args]
        kwargs = {key: _made(value, device, random) for key, value in self.kwargs.items()}
        tensor = self.tensor(device, random=random)
        if isinstance(self.position, str):
            kwargs = {self.position: tensor, **kwargs}  # the input first
        else:
            args.insert(self.position, tensor)
        return tuple(args), kwargs

    def at_batch(self, batch: int) -> InputSpec:
        """This input at ``batch``: the input tensor, and every further :class:`TensorSpec`
        among ``args`` and ``kwargs`` whose first size is this batch (a further input's first
        size is the batch: ``extra_shapes``, ``patch_mask``); one of another first size (a 1
        that broadcasts) is kept."""
        def scaled(value: Any) -> Any:
            if isinstance(value, TensorSpec) and value.shape[:1] == (self.batch,):
                return replace(value, shape=(batch, *value.shape[1:]))
            return value

        return replace(self, batch=batch, args=tree_map(scaled, self.args),
                       kwargs=tree_map(scaled, dict(self.kwargs)))

    def records(self) -> tuple[InputRecord, ...]:
        """Every tensor of one forward, in call order: ``args[i]`` for a positional one, its
        keyword otherwise."""
        args, kwargs = self.example("meta")
        named = [(f"args[{i}]", v) for i, v in enumerate(args)] + list(kwargs.items())
        return tuple(InputRecord(name, tuple(v.shape), dtype_name(v.dtype))
                     for name, v in named if isinstance(v, torch.Tensor))


TEXT = "text"
"""The metadata key of an :class:`InputRequest` field the command line gives as text, ``--input
NAME=VALUE``: its value, a function of every text given for it, in order, to the field's value.
A new input kind declares it beside its field, and the command line offers it (nothing else)."""


def _shape_text(text: str) -> tuple[int, ...]:
    """``2,1,17,17`` -> ``(2, 1, 17, 17)`` (the sizes are checked by the request)."""
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError:
        raise UserError(f"expected integers B,SIZE[,SIZE...], got '{text}'") from None


def _shapes_text(texts: Sequence[str]) -> tuple[tuple[int, ...], ...]:
    """Each text a shape (:func:`_shape_text`), in order: a field that holds several."""
    return tuple(_shape_text(text) for text in texts)


def _one_shape_text(texts: Sequence[str]) -> tuple[int, ...]:
    """The one shape of a field that holds one; given twice is a UserError."""
    if len(texts) != 1:
        raise UserError(f"given {len(texts)} times ({'; '.join(texts)}); it takes one shape")
    return _shape_text(texts[0])


def _parsed(name: str, form: Callable[[Sequence[str]], Any], texts: Sequence[str]) -> Any:
    """``texts`` of ``--input name=...`` read by the field's text ``form``; its UserError
    names the option and the field."""
    try:
        return form(texts)
    except UserError as error:
        raise UserError(f"--input {name}: {error}") from None


@dataclass(frozen=True)
class InputRequest(BuildSizes):
    """What a caller asks of the input, as one value; a field left None is the model's own.
    Its first fields, the sizes a model is built for (``image_size``, ``frames``,
    ``in_chans``), are a :class:`~vitprof.models.libraries.base.BuildSizes`'.

    ``image_size`` is an int (a square) or ``(H, W)``; ``frames`` makes a video input;
    ``in_chans`` the channels; ``dtype`` (a ``torch.dtype`` or its name) the model's and the
    input's dtype; ``input_shape`` the whole input tensor ``(batch, ...)``, fed as it is (a
    model named is built for it where it can be: :func:`_built_for_shape`); ``inputs`` the
    arguments themselves: a tensor, a tuple of them, a dict of keyword arguments, or a callable
    ``(device, dtype) -> args | (args, kwargs)``; ``batch_size`` the batch; ``num_classes`` the
    classes of a model built by name (0: no head); ``extra_shapes`` the shapes of further
    positional tensors fed after the input, in its dtype (timm's ``attn_mask``, ``B, 1, N, N``;
    Hugging Face's ``bool_masked_pos``, ``B, Np``); ``patch_mask`` the shape ``(B, Np)`` of a
    boolean mask over the patch tokens, fed as the keyword ``bool_masked_pos`` (Hugging Face's
    masked image modeling: ViT, DeiT, BEiT, ... replace each masked patch's embedding by a
    learned mask token; all False, as which patches are masked changes no count).
    ``input_shape`` excludes the first three
    and a batch size, ``inputs`` every size and extra shape.

    A field whose metadata holds :data:`TEXT` is an input the command line gives as ``--input
    NAME=VALUE`` (:meth:`from_text`): a new input kind is its field here, its place in the
    forward's arguments (:func:`_input`) and its closed form, nothing else.

    Checked once, here: every consumer (``analyze``, ``profile_model``, ``run_crosscheck``, the
    budgets, the sweep, the pages) takes the request as it is. The command line
    (:func:`vitprof.cli.commands.common.input_request`), the budget parser and the Python API's
    keywords (:meth:`of`) each build one.
    """

    dtype: torch.dtype | None = None
    input_shape: tuple[int, ...] | None = None
    inputs: Any = None
    batch_size: int = 1
    num_classes: int | None = None
    extra_shapes: tuple[tuple[int, ...], ...] = field(default=(), metadata={TEXT: _shapes_text})
    patch_mask: tuple[int, ...] | None = field(default=None, metadata={TEXT: _one_shape_text})

    def __post_init__(self) -> None:
        set_ = partial(object.__setattr__, self)
        set_("image_size", check_image_size(self.image_size))
        set_("dtype", dtype_named(self.dtype))
        for what, value in (("number of frames", self.frames),
                            ("number of input channels", self.in_chans)):
            if value is not None:
                check_int(what, value, 1)
        check_int("batch size", self.batch_size, 1)
        if self.num_classes is not None:
            check_int("number of classes", self.num_classes, 0)
        if self.input_shape is not None:
            set_("input_shape", check_shape(self.input_shape))
        set_("extra_shapes", tuple(_extra_shape(shape) for shape in self.extra_shapes))
        if self.patch_mask is not None:
            set_("patch_mask", _extra_shape(self.patch_mask, "patch mask"))
            if len(self.patch_mask) != 2:
                raise UserError(f"a patch mask is (batch, patches), got {self.patch_mask!r}")
        self._check_exclusions()
        self._check_elements()

    def _check_elements(self) -> None:
        """The input tensor, as far as this request fixes its sizes (the whole shape, else the
        batch and each of frames, channels and image size given), fits torch's sizes."""
        if self.input_shape is not None:
            check_elements("the input shape", self.input_shape)
            return
        sizes = {"batch": self.batch_size, "frames": self.frames, "channels": self.in_chans}
        if self.image_size is not None:
            sizes |= dict(zip(("height", "width"), square_or_pair(self.image_size), strict=True))
        given = {name: size for name, size in sizes.items() if size is not None}
        check_elements(f"the input ({', '.join(given)})", tuple(given.values()))

    def _check_exclusions(self) -> None:
        given = self.sizes_given()
        if self.input_shape is not None and given:
            raise UserError(f"input_shape is the whole input: it excludes {', '.join(given)}")
        if self.input_shape is not None and self.batch_size != 1:
            raise UserError("input_shape is the whole input: its first size is the batch, so "
                            "it excludes batch_size")
        if self.input_shape is not None:
            given.append("input_shape")
        given += [name for name in self.given() if name in self.text_forms()]
        if self.inputs is not None and given:
            raise UserError(f"inputs are given: they exclude {', '.join(given)}")

    def sizes_given(self) -> list[str]:
        """The sizes asked for: ``image_size``, ``frames``, ``in_chans``, in that order."""
        return [name for name in ("image_size", "frames", "in_chans")
                if getattr(self, name) is not None]

    @classmethod
    def text_forms(cls) -> dict[str, Callable[[Sequence[str]], Any]]:
        """The fields the command line gives as ``--input NAME=VALUE``, with their parsers
        (:data:`TEXT`)."""
        return {f.name: f.metadata[TEXT] for f in fields(cls) if TEXT in f.metadata}

    @classmethod
    def from_text(cls, pairs: Sequence[tuple[str, str]]) -> dict[str, Any]:
        """The fields ``pairs`` (``--input NAME=VALUE``, in order) give: each ``NAME`` a field
        with a text form (:meth:`text_forms`), its texts parsed together; an unknown one is a
        UserError listing them."""
        texts: dict[str, list[str]] = {}
        for name, text in pairs:
            texts.setdefault(name, []).append(text)
        forms = cls.text_forms()
        if unknown := [name for name in texts if name not in forms]:
            raise UserError(f"unknown input '{unknown[0]}' in --input; choose from "
                            f"{', '.join(forms)}")
        return {name: _parsed(name, forms[name], given) for name, given in texts.items()}

    @classmethod
    def of(cls, request: InputRequest | None = None, **keywords: Any) -> InputRequest:
        """``request``, else the request the keywords of ``analyze()`` make; a keyword given
        beside a request is a UserError (the input would be asked for twice)."""
        if request is None:
            return cls(**keywords)
        if twice := cls.asked(**keywords):
            raise UserError(f"the input is given as a request: it excludes {', '.join(twice)}")
        return request

    def or_dtype(self, dtype: torch.dtype | str) -> InputRequest:
        """This request, in ``dtype`` where it names none (a measurement runs in one)."""
        return self if self.dtype is not None else replace(self, dtype=dtype_named(dtype))

    def given(self) -> list[str]:
        """The fields given a value other than their default, in field order."""
        return self.asked(**{f.name: getattr(self, f.name) for f in fields(self)})

    @classmethod
    def asked(cls, **keywords: Any) -> list[str]:
        """The ``keywords`` (fields of a request) given a value other than their default."""
        defaults = {f.name: f.default for f in fields(cls)}
        return [key for key, value in keywords.items()
                if value is not None and not _same(value, defaults[key])]


def request_of(request: InputRequest | None, inputs: Mapping[str, Any], caller: str,
               depth: int = 1) -> InputRequest:
    """The input of ``caller(model, request=None, *, ...)``: ``request``, else the request the
    input keywords ``inputs`` make, the way ``caller`` took its input before it took a request
    (a DeprecationWarning names them; a keyword that is no field of a request is a TypeError,
    as for any function). ``depth``: how many calls down from ``caller`` this one is, so that
    the warning points at ``caller``'s caller."""
    if request is not None and not isinstance(request, InputRequest):
        raise UserError(f"{caller}'s request is an InputRequest, got {type(request).__name__} "
                        f"{request!r}")
    known = {f.name for f in fields(InputRequest)}
    if unknown := [name for name in inputs if name not in known]:
        raise TypeError(f"{caller}() got an unexpected keyword argument '{unknown[0]}'")
    if inputs:
        warnings.warn(f"{caller}({'=..., '.join(inputs)}=...) is deprecated: pass "
                      f"{caller}(model, InputRequest(...))", VitprofDeprecationWarning,
                      stacklevel=2 + depth)
    return InputRequest.of(request, **inputs)


def _extra_shape(shape: object, what: str = "extra input shape") -> tuple[int, ...]:
    """The shape of an extra tensor (``what``, as errors name it): 1 or more positive ints,
    the batch first."""
    if not isinstance(shape, tuple | list) or not shape:
        raise UserError(f"an {what} needs at least the batch, got {shape!r}")
    sizes = tuple(check_int(f"{what} size", size, 1) for size in shape)
    check_elements(f"the {what}", sizes)
    return sizes


def _same(value: Any, default: Any) -> bool:
    """``value`` is ``default`` (a tensor given as inputs is never a default)."""
    return type(value) is type(default) and bool(value == default)


@dataclass(frozen=True)
class Workload:
    """A model ready to count: ``model(*inputs.example())`` is one forward. ``owned``: vitprof
    built it by name, so it may give it real storage (a caller's module is left as it is)."""

    name: str
    module: nn.Module
    inputs: InputSpec
    rules: tuple[Override, ...] = ()  # the zoo entry's overrides, then the caller's
    entry: ZooEntry | None = None
    warnings: tuple[str, ...] = ()  # what the build noticed and the analysis should say
    input_source: str = "given"  # where the input's size and channels came from
    owned: bool = False


def make_workload(
    model: nn.Module | str,
    request: InputRequest | None = None,
    *,
    name: str | None = None,
    overrides: Sequence[Override] = (),
    device: str = "meta",
    **keywords: Any,
) -> Workload:
    """The workload of ``model`` at ``request`` (:class:`InputRequest`; else the request its
    fields given as ``keywords`` make, :meth:`InputRequest.of`): a name is built on ``device``
    without weights (:func:`vitprof.models.zoo.build`) at the image size, frames and channels
    asked for; a module is taken as it is (``name`` names it, else its class).
    ``num_classes`` applies to a name only. ``dtype`` converts a model built by name and sets
    the input's dtype (None: the model as built, the input in the dtype of its parameters); a
    module in another dtype is refused, not converted (it is the caller's)."""
    request = InputRequest.of(request, **keywords)
    if isinstance(model, str):
        built = _built(model, request, device)
        module, notes = _uncompiled(built.module)
        module = module.to(request.dtype) if request.dtype is not None else module
        inputs_, source = _input(module, request, built.entry, built.image_size)
        rules = (*(built.entry.overrides if built.entry else ()), *overrides)
        return Workload(built.name, module, inputs_, rules, built.entry,
                        (*notes, *built.warnings), source, owned=True)
    if not isinstance(model, nn.Module):
        raise UserError(f"expected an nn.Module or a model name, got {type(model).__name__}")
    if request.num_classes is not None:
        raise UserError("num_classes applies to a model built by name; this nn.Module is "
                        "already built")
    module, notes = _uncompiled(model)
    _check_module_dtype(module, request.dtype)
    inputs_, source = _input(module, request, None, request.image_size)
    return Workload(name or type(module).__name__, module, inputs_, tuple(overrides),
                    warnings=notes, input_source=source)


def _built(name: str, request: InputRequest, device: str) -> BuiltModel:
    """The model ``name`` built on ``device`` at the sizes ``request`` asks for."""
    if request.input_shape is not None:
        return _built_for_shape(name, request.input_shape, request.num_classes, device)
    sizes = BuildSizes(request.image_size, request.frames, request.in_chans)
    return build_sized(name, sizes, request.num_classes, device)


def _built_for_shape(
    name: str, shape: tuple[int, ...], num_classes: int | None, device: str
) -> BuiltModel:
    """The model ``name`` built for the input ``shape`` where its builder takes the sizes
    (:func:`vitprof.models.zoo.build`): an image ``B, C, H, W`` at ``(H, W)`` and ``C``
    channels; a video (5 sizes) also at its frames, read with the channel axis the model
    declares (``B, C, T, H, W`` or ``B, T, C, H, W``: built at ``(H, W)`` first to read it).
    A builder that refuses the sizes (a square-only zoo entry, a size its patches do not
    divide, a factory without such keywords) builds the model at its own size, and the shape
    is fed as it is, with a warning; any other shape is fed to the model's own size."""
    if len(shape) not in (4, 5):
        return build_sized(name, BuildSizes(), num_classes, device)
    image: ImageSize = shape[-1] if shape[-2] == shape[-1] else (shape[-2], shape[-1])
    try:
        if len(shape) == 4:
            return build_sized(name, BuildSizes(image, in_chans=shape[1]), num_classes, device)
        built = build_sized(name, BuildSizes(image), num_classes, device)
        axis = declared_input(built.module).channel_axis
        frames, channels = shape[3 - axis], shape[axis]
        return build_sized(name, BuildSizes(image, frames, channels), num_classes, device)
    except UserError as refused:
        own = build_sized(name, BuildSizes(), num_classes, device)
        note = (f"built at its own size, fed the input shape {'x'.join(map(str, shape))} as it "
                f"is: building it for that shape failed ({refused})")
        return replace(own, warnings=(*own.warnings, note))


def _uncompiled(model: nn.Module) -> tuple[nn.Module, tuple[str, ...]]:
    """A ``torch.compile``'d model's original module (``_orig_mod``), and the warning that
    says so; any other model as it is. Every model is taken through here, a caller's module
    and one a factory built alike, so the Python API and the command line warn the same."""
    original = getattr(model, "_orig_mod", None)
    if not isinstance(original, nn.Module):
        return model, ()
    return original, (f"a torch.compile'd model: counted its original module "
                      f"{type(original).__name__} (_orig_mod), run eagerly",)


def _floating_dtype(module: nn.Module) -> torch.dtype | None:
    """The dtype of the module's first floating-point parameter or buffer, if any."""
    tensors = [*module.parameters(), *module.buffers()]
    return next((t.dtype for t in tensors if t.dtype.is_floating_point), None)


def _check_module_dtype(module: nn.Module, dtype: torch.dtype | None) -> None:
    own = _floating_dtype(module)
    if dtype is not None and own is not None and own != dtype:
        raise UserError(f"the model's parameters are {dtype_name(own)}; convert it with "
                        f".to(torch.{dtype_name(dtype)}) first, or leave dtype unset")


def _input(
    module: nn.Module, request: InputRequest, entry: ZooEntry | None,
    built_size: ImageSize | None,
) -> tuple[InputSpec, str]:
    """The input ``module`` is fed (:func:`_main_input`), with the request's patch mask as the
    keyword ``bool_masked_pos`` and followed by a tensor of each of its ``extra_shapes`` in the
    input's dtype, and where it came from."""
    spec, source = _main_input(module, request, entry, built_size)
    if request.patch_mask is not None:
        _check_mask_token(module)
        mask = {"bool_masked_pos": TensorSpec(request.patch_mask, torch.bool)}
        spec = replace(spec, kwargs={**spec.kwargs, **mask})
        source += f"; patch mask {'x'.join(map(str, request.patch_mask))} given"
    if not request.extra_shapes:
        return spec, source
    extra = tuple(TensorSpec(shape, spec.dtype) for shape in request.extra_shapes)
    shown = ", ".join("x".join(map(str, shape)) for shape in request.extra_shapes)
    return replace(spec, args=(*spec.args, *extra)), f"{source}; extra tensors {shown} given"


def _check_mask_token(module: nn.Module) -> None:
    """A patch mask needs the learned token the model puts in place of a masked patch (Hugging
    Face's ``embeddings.mask_token``, a model built with ``use_mask_token=True``): a model without
    one is a UserError before any run (its forward would fail on ``None.expand``)."""
    if not any(isinstance(getattr(m, "mask_token", None), torch.Tensor) for m in module.modules()):
        raise UserError(f"a patch mask needs a model with a mask token (Hugging Face's "
                        f"embeddings.mask_token, built with use_mask_token=True); "
                        f"{type(module).__name__} has none")


def _main_input(
    module: nn.Module, request: InputRequest, entry: ZooEntry | None,
    built_size: ImageSize | None,
) -> tuple[InputSpec, str]:
    """The input ``module`` is fed, and where it came from: the given inputs, else, for a
    forward that takes no image tensor, its own arguments (:func:`vitprof.models.
    forward_inputs.own_forward_input`), else the given shape, else the model's own input at the
    sizes asked for (:func:`_own_input`). Its dtype is the one asked for, else the module's
    own."""
    dtype = request.dtype or _floating_dtype(module) or torch.float32
    if request.inputs is not None:
        return given_inputs(request.inputs, request.dtype), "inputs given"
    own = own_forward_input(module, request.batch_size)
    if own is not None:
        return _forward_input(own, request, dtype), own.source
    declared = declared_input(module)
    if request.input_shape is not None:
        axis = declared.channel_axis if len(request.input_shape) > 4 else 1
        shape = request.input_shape
        spatial = shape[1:axis] + shape[axis + 1:]
        return InputSpec(shape[0], shape[axis], spatial, dtype, channel_axis=axis), \
            "input shape given"
    spatial, channels, source = _own_input(module, request, entry, built_size, dtype)
    axis = declared.channel_axis if len(spatial) == 3 else 1
    return InputSpec(request.batch_size, channels, spatial, dtype, channel_axis=axis), source


def _forward_input(own: OwnInput, request: InputRequest, dtype: torch.dtype) -> InputSpec:
    """The :class:`InputSpec` of a forward that takes no image tensor (:func:`vitprof.models.
    forward_inputs.own_forward_input`): its own input only, the main tensor in ``dtype`` when
    it is a floating one; a size asked for is refused, not ignored."""
    asked = [name for name in request.given()
             if name not in ("dtype", "batch_size", "num_classes", "inputs")]
    if asked:
        raise UserError(f"this model's forward takes {own.name} of {own.source}, not an image: "
                        f"{', '.join(asked)} cannot set it; give inputs=... instead")
    main = own.main
    spatial = main.shape[1:]
    return InputSpec(main.shape[0], 1, spatial, dtype if main.dtype.is_floating_point
                     else main.dtype, kwargs=dict(own.kwargs), channel_axis=None,
                     position=own.name)


def _own_input(
    module: nn.Module, request: InputRequest, entry: ZooEntry | None,
    built_size: ImageSize | None, dtype: torch.dtype,
) -> tuple[tuple[int, ...], int, str]:
    """Spatial size, channels and where they came from: the given ``image_size``, ``frames``
    and ``in_chans``, else the zoo entry's size, else what ``module`` declares, else the
    default size; channels not given nor declared are traced (:func:`_channels`). Frames are
    the given or declared ones; only when nothing is asked of the size and the model declares
    nothing of its input does a first convolution that is 3-D make it a video of the default
    frames (a size given is an image's: a vision tower whose Conv3d runs over a time axis of 1
    takes ``B, C, H, W``). The source names only what decided: a size guessed from the
    position embedding's length is named where that guess is the size fed."""
    declared = declared_input(module)
    guesses: list[str] = []
    frames = request.frames or declared.frames
    if frames is None and declared.conv_rank == 3 and request.image_size is None \
            and entry is None and not declared.source:
        frames = DEFAULT_FRAMES
        guesses.append(f"{frames} frames (the first convolution is 3-D and nothing declares "
                       "the frames)")
    video = (frames,) if frames else ()
    given = [what for what, value in (("frames", request.frames),
                                      ("channels", request.in_chans)) if value is not None]
    if request.image_size is not None:
        size, said = square_or_pair(request.image_size), "image size given"
    elif entry is not None:
        size, said = square_or_pair(built_size or entry.image_size), "zoo entry"
    elif declared.size is not None:
        size, said = declared.size, declared.source
        guesses[:0] = declared.guessed
    else:
        size = square_or_pair(built_size or DEFAULT_IMAGE_SIZE)
        said = ("the default size" if size == (DEFAULT_IMAGE_SIZE,) * 2
                else "the size it was built with")
    spatial = (*video, *size)
    channels, guess = _channels(module, request, entry, declared, spatial, dtype)
    return spatial, channels, _source(said, [*guesses, *guess], given)


def _channels(
    module: nn.Module, request: InputRequest, entry: ZooEntry | None, declared: DeclaredInput,
    spatial: tuple[int, ...], dtype: torch.dtype,
) -> tuple[int, tuple[str, ...]]:
    """The input's channels and the guess, if any: the given ones, else the declared ones, else
    3 for a zoo entry (an RGB image model of vitprof's own), else those traced from the forward
    (:func:`vitprof.models.reached_channels.traced_channels`: the first convolution the image
    reaches, 3 when the model rejects them or reaches none)."""
    if request.in_chans is not None:
        return request.in_chans, ()
    if declared.channels is not None:
        return declared.channels, ()
    if entry is not None:
        return 3, ()
    axis = declared.channel_axis if len(spatial) == 3 else 1

    def forward(channels: int) -> Any:
        return call(module, InputSpec(1, channels, spatial, dtype, channel_axis=axis).example())

    channels, guess = traced_channels(module, forward)
    return channels, (guess,)


def _source(said: str, guesses: Sequence[str], given: Sequence[str] = ()) -> str:
    parts = [f"{' and '.join(given)} given"] if given else []
    return "; ".join([*parts, said or "nothing declared", *(f"guessed {g}" for g in guesses)])


def given_inputs(inputs: Any, dtype: torch.dtype | None) -> InputSpec:
    """The :class:`InputSpec` of ``inputs`` given as they are (see :class:`InputRequest`):
    every tensor re-made as a :class:`TensorSpec` of its shape and dtype (a floating one in
    ``dtype`` when given), whatever its device. The input tensor is ``pixel_values`` if given,
    else the first positional, else the first keyword tensor of 3 or more dimensions, else of
    integer token ids, ``(batch, length)`` (an input without a channel axis)."""
    if callable(inputs) and not isinstance(inputs, torch.Tensor):
        inputs = _called(inputs, dtype)
    args, kwargs = _arguments(inputs)
    specs = [_spec(value, dtype) for value in args]
    keywords = {key: _spec(value, dtype) for key, value in kwargs.items()}
    position = _main_position(specs, keywords)
    main = keywords.pop(position) if isinstance(position, str) else specs.pop(position)
    if len(main.shape) == 2:
        return InputSpec(main.shape[0], 1, main.shape[1:], main.dtype, tuple(specs), keywords,
                         channel_axis=None, position=position)
    return InputSpec(main.shape[0], main.shape[1], main.shape[2:], main.dtype, tuple(specs),
                     keywords, position=position)


def _called(make: Callable[..., Any], dtype: torch.dtype | None) -> Any:
    """What ``make("meta", dtype)`` returns; its failure is a UserError naming it."""
    named = getattr(make, "__qualname__", type(make).__name__)
    try:
        return make("meta", dtype or torch.float32)
    except Exception as error:
        raise UserError(f"the inputs callable {named} failed: {one_line(error)}") from None


def _arguments(inputs: Any) -> CallArgs:
    """``(args, kwargs)`` of a tensor, a tuple or list (positional), a dict (keywords), or a
    pair ``(args, kwargs)``."""
    if isinstance(inputs, torch.Tensor):
        return (inputs,), {}
    if isinstance(inputs, Mapping):
        return (), dict(inputs)
    if isinstance(inputs, tuple | list):
        if len(inputs) == 2 and isinstance(inputs[0], tuple | list) and isinstance(
                inputs[1], Mapping):
            return tuple(inputs[0]), dict(inputs[1])
        return tuple(inputs), {}
    raise UserError(f"inputs must be a tensor, a tuple of tensors, a dict of keyword arguments "
                    f"or a callable (device, dtype) -> args | (args, kwargs); got "
                    f"{type(inputs).__name__}")


def _spec(value: Any, dtype: torch.dtype | None) -> Any:
    """``value`` with every tensor in it (nested in tuples, lists, dicts) a TensorSpec."""

    def spec(tensor: torch.Tensor) -> TensorSpec:
        converted = dtype if dtype is not None and tensor.dtype.is_floating_point else None
        return TensorSpec(tuple(tensor.shape), converted or tensor.dtype)

    return tree_map(lambda v: spec(v) if isinstance(v, torch.Tensor) else v, value)


def _main_position(args: Sequence[Any], kwargs: Mapping[str, Any]) -> int | str:
    def image(value: Any) -> bool:
        return isinstance(value, TensorSpec) and len(value.shape) >= 3

    def token_ids(value: Any) -> bool:
        return isinstance(value, TensorSpec) and len(value.shape) == 2 and \
            not value.dtype.is_floating_point

    if image(kwargs.get("pixel_values")):
        return "pixel_values"
    for kind in (image, token_ids):
        found = [i for i, v in enumerate(args) if kind(v)] + [
            k for k, v in kwargs.items() if kind(v)]
        if found:
            return found[0]
    raise UserError("inputs hold no tensor of 3 or more dimensions (batch, channels, sizes) "
                    "nor integer token ids (batch, length) to count as the input")


def deployed(work: Workload, deploy: bool) -> Workload:
    """``work`` with its module in deploy form (:func:`vitprof.models.deploy.deploy_form`, a
    copy) and its name saying so, when ``deploy``; else ``work`` unchanged."""
    if not deploy:
        return work
    return replace(work, name=f"{work.name} (deploy form)", module=deploy_form(work.module))
