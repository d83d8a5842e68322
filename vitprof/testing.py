"""Budgets inside a test suite: one model with :func:`assert_budget`, a file with
:func:`assert_budget_file`.

::

    from vitprof.testing import assert_budget

    def test_my_vit_stays_in_budget():
        assert_budget(
            MyViT(), image_size=224, max_params=90_000_000, max_macs=18_000_000_000,
            components={"attn_core": {"min_macs": 1, "max_share": 0.05}},
            blocks={"max_macs": 1_500_000_000},
        )

The limits are the keys of a budget-file entry, validated by the same closed schema. A failed
check raises ``AssertionError`` whose message is the table ``vitprof check`` prints; a mistake
in the budget itself (an unknown key, a wrong type) or a model that cannot be analyzed raises
:class:`vitprof.UserError`, since that is a broken test rather than a failed one.

:func:`neutral_names` renames a model's modules, parameters, buffers and classes in place, so
that a test can check that a breakdown depends on the computation, not on what things are
called; :func:`own_classes` does the same and gives every module a class of its own, so that it
can check that the breakdown reads the code that runs, not the class that holds it;
:func:`name_blindness` compares the two breakdowns, on the models of :data:`NAME_BLIND_MODELS`
built by :func:`meta_builder` in vitprof's own tests.

:func:`unique_params` and :func:`oracle_macs` count a model independently of vitprof's counter
(the elements of its parameters; torch's ``FlopCounterMode``), the oracles a profile's totals
are held to (the zoo sweep, the third-party page, the acceptance tests on real models).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import count
from pathlib import Path
from typing import Any

from torch import nn

from vitprof.analysis import analyze
from vitprof.checks.budget import BudgetResult, check_profile, evaluate, load_budgets, parse_budget
from vitprof.core.errors import UserError
from vitprof.core.overrides import Override
from vitprof.count.result import Profile
from vitprof.recognize.graph.roles import NO_EVIDENCE
from vitprof.render.budget import budget_document
from vitprof.render.formats import render


def _raise_on_failure(outcomes: Sequence[BudgetResult]) -> None:
    if not all(outcome.passed for outcome in outcomes):
        raise AssertionError(render(budget_document(outcomes)))


def assert_budget(
    model: str | nn.Module | Profile,
    *,
    name: str | None = None,
    image_size: int | tuple[int, int] | None = None,
    batch_size: int | None = None,
    num_classes: int | None = None,
    overrides: Sequence[Override] = (),
    **limits: Any,
) -> BudgetResult:
    """Analyze ``model`` (a name, a module, or an existing :class:`Profile`) and check
    ``limits`` (``max_params=...``, ``components={...}``, ``blocks={...}``, ...).

    Returns the result when every check holds; raises ``AssertionError`` with the table
    otherwise.
    """
    settings = {"image_size": image_size, "batch_size": batch_size, "num_classes": num_classes}
    table: dict[str, Any] = {key: value for key, value in settings.items() if value is not None}
    if overrides:
        table["map"] = {regex: str(component) for regex, component in overrides}
    if isinstance(model, Profile):
        if table:
            raise UserError(f"{', '.join(table)} cannot apply to a Profile that is already "
                            "analyzed; analyze again or pass the model")
        budget = parse_budget(name or model.model, limits, model=model.model)
        outcome = check_profile(budget, model)
    else:
        entry = name or (model if isinstance(model, str) else type(model).__name__)
        outcome = evaluate(parse_budget(entry, {**table, **limits}, model=model))
    _raise_on_failure([outcome])
    return outcome


def assert_budget_file(
    path: str | Path, entries: Sequence[str] | None = None
) -> list[BudgetResult]:
    """Check every entry of the budget file ``path`` (or only ``entries``).

    Returns the results when every check holds; raises ``AssertionError`` with the table of all
    the checks otherwise.
    """
    budgets = load_budgets(path)
    if entries is not None:
        missing = sorted(set(entries) - {b.name for b in budgets})
        if missing:
            raise UserError(f"{path}: no entry named {', '.join(missing)}")
        budgets = [b for b in budgets if b.name in entries]
    outcomes = [evaluate(budget) for budget in budgets]
    _raise_on_failure(outcomes)
    return outcomes


NEUTRAL_PREFIXES = {"_modules": "m", "_parameters": "p", "_buffers": "b"}
"""The prefix of the new names :func:`neutral_names` gives children, parameters and buffers."""
_ALIASES = "_neutral_aliases"  # the attribute of a renamed module holding its old -> new names


def neutral_names(model: nn.Module) -> nn.Module:
    """Rename, in place, every module path segment, parameter, buffer and module class of
    ``model`` to a neutral name, and return it; its forward computes exactly what it did.

    In each module, children become ``m0``, ``m1``, ..., parameters ``p0``, ... and buffers
    ``b0``, ..., in registration order, except keys that code indexes: digits (``Sequential``,
    ``ModuleList``, ``ParameterList``) and the keys of a ``ModuleDict`` or ``ParameterDict``.
    Each module becomes an instance of a subclass of its class, named ``C0``, ``C1``, ...
    (one class per original class, so modules of one class still share one; ``isinstance``
    still holds), whose attribute access maps the old names to the new ones (kept per module,
    in its attribute ``_neutral_aliases``), so ``self.attn``, ``self.weight`` and torch's own
    modules' reads of ``self.weight`` still work.
    """
    return _neutralised(model, class_per_module=False)


def own_classes(model: nn.Module) -> nn.Module:
    """:func:`neutral_names`, but every module becomes an instance of a class of its own
    (``C0``, ``C1``, ..., one per module, each a subclass of its original class): what two
    copies of one block class look like, so that a test can check that a breakdown reads the
    code that runs, not which class holds it."""
    return _neutralised(model, class_per_module=True)


def _neutralised(model: nn.Module, class_per_module: bool) -> nn.Module:
    classes: dict[object, type[nn.Module]] = {}  # by original class, or by module
    for module in list(model.modules()):
        original = type(module)
        key = id(module) if class_per_module else original
        if key not in classes:
            classes[key] = _aliasing_class(original, f"C{len(classes)}")
        aliases = {old: new for kind in NEUTRAL_PREFIXES
                   for old, new in _renamed(module, kind)}
        object.__setattr__(module, _ALIASES, aliases)
        module.__class__ = classes[key]
    return model


def _kept(module: nn.Module, key: str) -> bool:
    """Keys that code indexes: digits, and a dict container's keys."""
    return key.isdigit() or isinstance(module, nn.ModuleDict | nn.ParameterDict)


def _renamed(module: nn.Module, kind: str) -> Iterator[tuple[str, str]]:
    """Rename the entries of ``module``'s ``kind`` dict (``_modules``, ``_parameters``,
    ``_buffers``) in place, order kept; yield ``(old, new)`` for each renamed one."""
    entries: dict[str, Any] = getattr(module, kind)
    numbers = count()
    renamed = {key: key if _kept(module, key) else f"{NEUTRAL_PREFIXES[kind]}{next(numbers)}"
               for key in entries}
    items = list(entries.items())
    entries.clear()
    entries.update((renamed[key], value) for key, value in items)
    if kind == "_buffers":
        hidden = module._non_persistent_buffers_set
        module._non_persistent_buffers_set = {renamed[key] for key in hidden}
    yield from ((old, new) for old, new in renamed.items() if old != new)


def _aliasing_class(original: type[nn.Module], name: str) -> type[nn.Module]:
    """A subclass of ``original`` named ``name`` that reads, writes and deletes the attribute
    ``old`` of a module's aliases (:data:`_ALIASES`) as ``aliases[old]``."""

    def _new(self: nn.Module, attribute: str) -> str:
        aliases: dict[str, str] = self.__dict__.get(_ALIASES, {})
        return aliases.get(attribute, attribute)

    def __getattr__(self: nn.Module, attribute: str) -> Any:
        return original.__getattr__(self, _new(self, attribute))

    def __setattr__(self: nn.Module, attribute: str, value: Any) -> None:
        original.__setattr__(self, _new(self, attribute), value)

    def __delattr__(self: nn.Module, attribute: str) -> None:
        original.__delattr__(self, _new(self, attribute))

    return type(name, (original,), {
        "__getattr__": __getattr__, "__setattr__": __setattr__, "__delattr__": __delattr__,
        "__qualname__": name, "__module__": original.__module__,
    })


@dataclass(frozen=True)
class NameBlindness:
    """A model analyzed under its own names and under :func:`neutral_names`: the components
    whose params or MACs differ (``changes``: one line each, real -> neutral) and whether the
    neutral run says it placed something without data-flow evidence (``warned``)."""

    changes: tuple[str, ...]
    warned: bool
    macs: int  # the total MACs (equal both ways)
    changed_macs: int  # the MACs that moved: half the sum of the per-component differences

    @property
    def holds(self) -> bool:
        """The breakdown is the same under any names, or the neutral run says why not."""
        return not self.changes or self.warned


def name_blindness(build: Callable[[], nn.Module],
                   rename: Callable[[nn.Module], nn.Module] = neutral_names,
                   **kwargs: Any) -> NameBlindness:
    """Analyze the model ``build`` makes (call it twice: one model keeps its names, the other
    is renamed by ``rename``: :func:`neutral_names`, or :func:`own_classes`) with ``kwargs``
    (those of :func:`vitprof.analyze`; give the input, since nothing can be read from neutral
    names) and compare the per-component params and MACs."""
    real = analyze(build(), **kwargs)
    neutral = analyze(rename(build()), **kwargs)
    changes = tuple(
        f"{component}: {a.params:,} params {a.macs:,} MACs -> {b.params:,} params {b.macs:,} MACs"
        for component, a in real.components.items()
        if (a.params, a.macs) != ((b := neutral.components[component]).params, b.macs))
    moved = sum(abs(a.macs - neutral.components[c].macs) for c, a in real.components.items())
    return NameBlindness(changes, any(w.startswith(NO_EVIDENCE) for w in neutral.warnings),
                         real.totals.macs, moved // 2)


# the models name-blindness is held on (tests/test_name_blind.py, benchmarks/name_blind.py): timm
# models (issue 24's list and a few of each attention module), then torchvision's ViTs:
# (name, its image size)
NAME_BLIND_MODELS: tuple[tuple[str, int], ...] = (
    ("timm:mobilevitv2_050", 256), ("timm:mvitv2_tiny", 224), ("timm:swiftformer_s", 224),
    ("timm:volo_d1_224", 224), ("timm:coatnet_pico_rw_224", 224),
    ("timm:efficientformerv2_s1", 224), ("timm:efficientvit_b1", 224), ("timm:pvt_v2_b1", 224),
    ("timm:twins_svt_small", 224), ("timm:vit_base_patch16_224", 224),
    ("timm:deit_tiny_patch16_224", 224), ("timm:swin_tiny_patch4_window7_224", 224),
    ("timm:convit_tiny", 224), ("timm:cait_xxs24_224", 224), ("timm:xcit_nano_12_p16_224", 224),
    ("timm:levit_128s", 224), ("timm:crossvit_9_240", 240), ("timm:beit_base_patch16_224", 224),
    ("timm:eva02_tiny_patch14_224", 224), ("timm:maxvit_nano_rw_256", 256),
    ("timm:coat_lite_tiny", 224), ("timm:davit_tiny", 224), ("timm:edgenext_xx_small", 256),
    ("timm:efficientformer_l1", 224), ("timm:efficientvit_m0", 224), ("timm:fastvit_t8", 256),
    ("timm:gcvit_xxtiny", 224), ("timm:hiera_tiny_224", 224), ("timm:tiny_vit_5m_224", 224),
    ("timm:nest_tiny", 224), ("timm:nextvit_small", 224), ("timm:pit_ti_224", 224),
    ("timm:visformer_tiny", 224), ("timm:tnt_s_patch16_224", 224),
    ("timm:swinv2_tiny_window8_256", 256), ("timm:swinv2_cr_tiny_224", 224),
    ("timm:vit_relpos_small_patch16_224", 224), ("timm:vitamin_small_224", 224),
    ("timm:vit_small_r26_s32_224", 224), ("timm:caformer_s18", 224), ("timm:mobilevit_xxs", 256),
    ("timm:shvit_s1", 224), ("vit_b_16", 224), ("swin_t", 224), ("maxvit_t", 224),
)


def meta_builder(name: str) -> Callable[[], nn.Module]:
    """A function building ``name`` (``timm:...`` or a torchvision model) on meta, untrained, at
    its own image size: what :func:`name_blindness` takes, for :data:`NAME_BLIND_MODELS`."""
    def build() -> nn.Module:
        import torch

        with torch.device("meta"):
            if name.startswith("timm:"):
                import timm

                return timm.create_model(name.removeprefix("timm:"), pretrained=False)
            import torchvision

            return getattr(torchvision.models, name)()

    return build


def unique_params(model: nn.Module) -> int:
    """The oracle of params: the elements of every parameter tensor, each shared one once."""
    seen: dict[int, int] = {}
    for p in model.parameters():
        seen[id(p)] = p.numel()
    return sum(seen.values())


def oracle_macs(model: nn.Module, shape: tuple[int, ...], call: Any = None) -> int:
    """The oracle of MACs: ``FlopCounterMode`` over one eval forward of ``model`` on meta, fed
    ``call`` (``(args, kwargs)`` of meta tensors) or else one meta tensor of ``shape``; its
    FLOPs are 2 x MACs. The parameters are frozen first: a view of a parameter made under
    ``no_grad`` (CaiT's expanded class token) still requires grad and has no grad_fn, which
    FlopCounterMode's module tracker refuses as a child's input."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    args, kwargs = call if call is not None else ((torch.empty(shape, device="meta"),), {})
    model.eval().requires_grad_(False)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(*args, **kwargs)
    return counter.get_total_flops() // 2  # FLOPs = 2 x MACs
