"""The settings of a memory step as one typed value, declared once: :class:`MemorySettings`.

Each field is one setting: its type (a vocabulary enum, ``bool``, a positive ``int``, or text
with its own check), its default, and in its ``metadata`` its ``help``, and where it is not
plain: ``what`` (the setting in an error: ``unknown amp dtype``, or what an int counts),
``metavar`` and ``parse`` (the argparse type of its option), ``check`` (text: a function
raising :class:`~vitprof.measure.memory.spelling.SettingError`), ``none_is`` (the word a
training step runs where the setting is None), ``training`` (it sets the
training step: set in ``mode="inference"`` it is an error) and ``group`` (``loop``: the
training loop, :mod:`vitprof.measure.memory.loop`; listed in a training step's settings only).

From the fields come the keywords of ``vitprof.memory`` (the names), the options of
``vitprof memory`` (one each, ``choices=list(E)`` the default first: ``vitprof.cli``), the keys
of a budget's ``memory`` table (:mod:`vitprof.checks.budget.schema`) and the ``settings`` an
estimate lists (:meth:`MemorySettings.names`). A new setting is its field here and the code of
the step that reads it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import Field, dataclass, field, fields
from enum import Enum
from functools import cache
from typing import Any, get_args, get_type_hints

from vitprof.core.errors import UserError
from vitprof.core.parse import checkpointing
from vitprof.core.validate import check_word
from vitprof.core.vocab import (
    AmpDtype,
    AttentionPath,
    Freeze,
    Loss,
    MemoryTarget,
    Mode,
    Optimizer,
    Word,
    ZeroGrad,
)
from vitprof.measure.memory.spelling import SettingError

LOOP = "loop"  # the group of the training loop's settings
DEFAULT_OPTIMIZER = Optimizer.ADAMW


def about(help: str | None = None, **metadata: Any) -> dict[str, Any]:
    """The metadata of a field of :class:`MemorySettings` (see the module)."""
    return {"help": help, **metadata}


def checkpoint_every(checkpoint: str | int) -> int | None:
    """``"none"`` -> None, ``"blocks"`` -> 1, ``N`` or ``"every N"`` -> N (positive)."""
    if checkpoint == "none":
        return None
    if checkpoint == "blocks":
        return 1
    text = str(checkpoint).removeprefix("every").strip()
    if not text.isdigit() or int(text) < 1:
        raise UserError(f"checkpoint must be none, blocks or 'every N' with N a positive int, "
                        f"got {checkpoint!r}")
    return int(text)


@dataclass(frozen=True)
class MemorySettings:
    """How the step of :func:`vitprof.memory` runs, each setting checked when made (one
    UserError for the first bad one; a word given as its string becomes the word)."""

    optimizer: Optimizer | None = field(default=None, metadata=about(
        "the training step's optimizer (default adamw; not with --mode inference)",
        training=True, none_is=DEFAULT_OPTIMIZER))
    amp: AmpDtype | None = field(default=None, metadata=about(
        "autocast the forward to this dtype (float32 master weights)", what="amp dtype"))
    checkpoint: str | int = field(default="none", metadata=about(
        "activation checkpointing of the transformer blocks (every N: one block in N, "
        "from the first)", metavar="none|blocks|'every N'", parse=checkpointing,
        check=checkpoint_every, training=True))
    target: MemoryTarget = field(default=MemoryTarget.CUDA, metadata=about(
        "whose kernels and allocator are modelled (the prediction runs on "
        "fake tensors either way)"))
    attention: AttentionPath = field(default=AttentionPath.AUTO, metadata=about(
        "the kernel every scaled_dot_product_attention call runs: math "
        "keeps the scores, the fused ones a log-sum-exp; auto (default): the one torch "
        "dispatches to on the target, named with why"))
    mode: Mode = field(default=Mode.TRAIN, metadata=about())
    loss: Loss = field(default=Loss.ONES, metadata=about(
        "ones: a ones gradient on the output, no loss function; sum: out.sum(); "
        "cross-entropy: F.cross_entropy(logits, labels)", training=True, group=LOOP))
    zero_grad: ZeroGrad = field(default=ZeroGrad.START, metadata=about(
        "where opt.zero_grad() stands: before the forward, between the forward "
        "and the backward (gradients alive through the forward), after opt.step()",
        training=True, group=LOOP))
    set_to_none: bool = field(default=True, metadata=about(
        "zero_grad's set_to_none: false keeps the gradients as zeros", training=True,
        group=LOOP))
    gradient_accumulation: int = field(default=1, metadata=about(
        "forward and backward passes per optimizer step (--batch-size is each one's)",
        what="forward and backward passes per optimizer step", metavar="N", training=True,
        group=LOOP))
    freeze: Freeze = field(default=Freeze.NONE, metadata=about(
        "backbone: requires_grad False on all but the head", training=True,
        group=LOOP))

    def __post_init__(self) -> None:
        for each in fields(self):
            object.__setattr__(self, each.name, _checked(each, getattr(self, each.name)))
        if not self.train:
            given = [each.name for each in fields(self)
                     if each.metadata.get("training") and getattr(self, each.name) != each.default]
            if given:
                raise SettingError(lambda s: f"{s.setting('mode', 'inference')} is one forward "
                                   f"without gradients: {s.name(given[0])} does not apply")

    @property
    def train(self) -> bool:
        """Whether the step is a training step (else one forward without gradients)."""
        return self.mode is Mode.TRAIN

    def chosen(self, name: str) -> Any:
        """The value the step runs for the setting ``name``: its ``none_is`` where it is None
        in a training step."""
        value = getattr(self, name)
        none_is = MemorySettings.__dataclass_fields__[name].metadata.get("none_is")
        return none_is if value is None and self.train and none_is is not None else value

    def names(self, dtype: str) -> dict[str, str]:
        """The settings as an estimate lists them (strings, each as the step runs it: None is
        ``none``, a bool ``true``/``false``), the request's ``dtype`` second, the loop's in a
        training step only."""
        shown = [(each.name, _shown(self.chosen(each.name))) for each in fields(self)
                 if self.train or each.metadata.get("group") != LOOP]
        shown.insert(1, ("dtype", dtype))  # where the reports have always listed it
        return dict(shown)


def words_of(each: Field[Any]) -> type[Word] | None:
    """The vocabulary enum a setting takes its value from, or None."""
    return next((kind for kind in get_args(_hints()[each.name]) or (_hints()[each.name],)
                 if isinstance(kind, type) and issubclass(kind, Word)), None)


def kind_of(each: Field[Any]) -> type:
    """The type of a setting's value: its enum, ``bool``, ``int`` or ``str`` (text with a check
    of its own)."""
    hint = _hints()[each.name]
    return words_of(each) or (hint if hint in (bool, int) else str)


@cache
def _hints() -> dict[str, Any]:
    return get_type_hints(MemorySettings)


def _checked(each: Field[Any], value: Any) -> Any:
    """``value`` of the setting ``each`` checked, a word's string as the word."""
    words, what = words_of(each), each.metadata.get("what") or each.name
    if words is not None:
        return value if value is None and each.default is None else check_word(what, value,
                                                                              words)
    if kind_of(each) is bool and not isinstance(value, bool):
        raise SettingError(lambda s: f"{s.name(each.name)} must be true or false, got "
                           f"{value!r}")
    if kind_of(each) is int and (isinstance(value, bool) or not isinstance(value, int)
                                 or value < 1):
        raise SettingError(lambda s: f"{s.name(each.name)} must be a positive int ({what}), "
                           f"got {value!r}")
    check: Callable[[Any], object] | None = each.metadata.get("check")
    if check is not None:
        check(value)
    return value


def _shown(value: object) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value.value if isinstance(value, Enum) else value)


SETTING_NAMES = tuple(each.name for each in fields(MemorySettings))
