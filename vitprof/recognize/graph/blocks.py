"""Blocks: the attention cores grouped by the module tree, or by spans of a flat forward.

A *container* is a module with at least two children that each contain a core (a core lives in
the module running its first record). A core's block is the child, on its module path, of the
innermost container that is a ``ModuleList`` / ``Sequential``, else of the innermost container:
``layers[i] = ModuleList([attn, ff])`` gives ``layers.i``, ``layers.s.blocks.j`` a block of a
stage, two attentions in one layer (over time, then over space) one block; a module whose cores
are parallel branches summed into one residual add is no container (two attentions, one
block); the children of the innermost container, list or not, are the blocks where each runs
residual adds of its own (a window and a grid attention layer, two blocks). A block holding a single
core narrows to the innermost module holding the core and its stream's residual adds
(``joined-span-block``): a stage of one block is not the block. When list blocks exist, a
core outside any list that runs after them (an attention-pooling head) is in no block. A join
(residual add) run outside any block, in a parent's forward, whose branch lies in one block
belongs to it, and so does a core-less sibling of the blocks of their class that runs after one
(the MLP layer of a stack alternating attention and MLP layers), and any record run between
two records of one block. A block's residual stream goes on after its module: the residual
segments that follow it, before the next block, whose branches mix no tokens (a feed-forward
called from a parallel list, ``for a, f in zip(attns, ffs)``), are the block's
(``residual-segment-block``). Cores with no container (a flat, hand-written forward) get one block
each: from the norms feeding its q/k/v projections (or from the end of the previous block) to
the last join of its residual stream before the next core starts (:func:`_span_end`). A block's
module called several times (a decoder layer run step by step) is a block per call
(``block-per-call``). Blocks are numbered in execution order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from types import CodeType
from typing import NamedTuple

from torch import nn

from vitprof.recognize.graph.attention import Core
from vitprof.recognize.graph.flow import Flow

LISTS = (nn.ModuleList, nn.Sequential)  # containers, subclasses included (isinstance)


def kind(module: nn.Module) -> object:
    """What ``module`` runs, as the rules compare modules "of one class": the code of its
    class's forward (bytecode, names, constants), not the class itself; a subclass that only
    renames (:func:`vitprof.testing.own_classes` gives each module one) and a copy of a class
    under another name are one kind, whatever their classes."""
    forward = type(module).forward
    code = getattr(forward, "__code__", None)
    return forward if code is None else _code(code)


def _code(code: CodeType) -> tuple[object, ...]:
    """A code object as what it runs: its bytecode, names and constants (nested code, a
    comprehension's, the same way), without its file and line numbers."""
    consts = tuple(_code(c) if isinstance(c, CodeType) else c for c in code.co_consts)
    return code.co_code, code.co_names, code.co_varnames, consts


@dataclass(frozen=True)
class Blocks:
    """Per step its block (or None), the module paths of the blocks (a module called several
    times: its first call's block), the cores in no block."""

    of_step: list[int | None]
    paths: dict[str, int]
    loose: frozenset[int]  # indices of the cores in no block (attention-pooling heads)
    selected: frozenset[int] = frozenset()  # records a token selector put in a block
    between: frozenset[int] = frozenset()  # records of a query selection between two stacks
    later: Mapping[int, str] = field(default_factory=dict)  # a later call's block -> its path

    def modules(self) -> dict[int, str]:
        """Per block found in a module, the module's path, every call of it included."""
        return {**{index: path for path, index in self.paths.items()}, **self.later}


def module_chain(path: str) -> list[tuple[str, str]]:
    """(parent, child) module paths from the root down to ``path``."""
    parts = path.split(".") if path else []
    return [(".".join(parts[:i]), ".".join(parts[: i + 1])) for i in range(len(parts))]


def core_paths(
    model: nn.Module, paths: Sequence[str], parallel: Callable[[list[int]], bool],
    residual: Callable[[str], bool],
) -> list[tuple[str | None, bool]]:
    """Per core module path: its block path (None: no container) and whether a list gave it.
    A module whose cores are ``parallel`` (called with their indices) is no container: its
    children are the parallel branches of one block.
    An innermost container whose children holding cores each run a ``residual`` add of their
    own gives the block before a list above it: those children are the blocks (an inverted
    residual conv, then a window and a grid attention layer: two blocks)."""
    children: dict[str, set[str]] = {}
    for path in paths:
        for parent, child in module_chain(path):
            children.setdefault(parent, set()).add(child)
    containers = {parent for parent, kids in children.items() if len(kids) >= 2 and not parallel(
        [k for k, path in enumerate(paths) if not parent or path.startswith(f"{parent}.")])}
    whole = {parent for parent in containers if all(residual(c) for c in children[parent])}
    found: list[tuple[str | None, bool]] = []
    for path in paths:
        chain = [(p, c) for p, c in module_chain(path) if p in containers]
        lists = [c for p, c in chain if isinstance(model.get_submodule(p), LISTS)]
        if chain and chain[-1][0] in whole:
            found.append((chain[-1][1], bool(lists)))
        elif lists:
            found.append((lists[-1], True))
        else:
            found.append((chain[-1][1] if chain else None, False))
    return _mixed_lists(model, paths, _narrowed(model, paths, found))


def _mixed_lists(
    model: nn.Module, paths: Sequence[str], found: list[tuple[str | None, bool]]
) -> list[tuple[str | None, bool]]:
    """A block that holds a list whose children are of several classes, only one of them with
    the core, narrows to that child: the stage of a hybrid that runs convolutional blocks and
    then one attention block (``stages.s.blocks``); the other children are no part of it. A
    list of children of one class (``[PreNorm(attn), PreNorm(ff)]``) is the block's own layers
    and stays."""
    narrowed = []
    for path, (block, is_list) in zip(paths, found, strict=True):
        if block is not None:
            for parent, child in module_chain(path):
                if not within(parent, block):
                    continue
                container = model.get_submodule(parent)
                if isinstance(container, LISTS) and _one_cored_among_blocks(
                        container, parent, child, paths):
                    block = child
        narrowed.append((block, is_list))
    return narrowed


def _narrowed(
    model: nn.Module, paths: Sequence[str], found: list[tuple[str | None, bool]]
) -> list[tuple[str | None, bool]]:
    """A stage holding a single block is no container, so its core's block came out as the
    whole stage: where a module of the class of the other blocks lies on the core's path below
    it, that module is the block (a one-block first stage)."""
    classes = {kind(model.get_submodule(block)) for block, _ in found if block is not None}
    narrowed = []
    for path, (block, is_list) in zip(paths, found, strict=True):
        if block is not None:
            deeper = [child for _, child in module_chain(path)
                      if child.startswith(f"{block}.")
                      and kind(model.get_submodule(child)) in classes]
            block = deeper[0] if deeper else block
        narrowed.append((block, is_list))
    return narrowed


def _one_cored_among_blocks(
    container: nn.Module, parent: str, child: str, paths: Sequence[str]
) -> bool:
    """Whether ``child`` is the one child of ``container`` (three or more, of several classes)
    holding the cores under it, its siblings being blocks of their own (modules with children),
    not the layers of one block: a norm beside its attention (``Sequential(LayerNorm,
    attention)``) or an (attention, MLP) pair."""
    children = dict(container.named_children())
    if len(children) < 3 or len({kind(c) for c in children.values()}) < 2:
        return False
    under = [p for p in paths if within(p, parent)]
    if any(not within(p, child) for p in under):
        return False
    return all(any(True for _ in module.children())
               for name, module in children.items() if f"{parent}.{name}" != child)


def module_blocks(paths: dict[str, int]) -> Callable[[str], int | None]:
    """A function from a module path to the block holding it (by ``paths``), else None."""
    cache: dict[str, int | None] = {}

    def block(module: str) -> int | None:
        if module not in cache:
            path, index = module, None
            while index is None:
                index = paths.get(path)
                if not path:
                    break
                path = path.rpartition(".")[0]
            cache[module] = index
        return cache[module]

    return block


def spans(flow: Flow, cores: list[Core], of_step: list[int | None], first: int) -> None:
    """One block per core of a flat forward, numbered from ``first``, on the unplaced steps."""
    starts = []
    for core in cores:
        feeding = {j for i in core.qkv for j in flow.steps[i].sources if flow.norm(j)}
        starts.append(min(core.steps | core.qkv | feeding))
    begin = starts[0]
    for k, core in enumerate(cores):
        limit = starts[k + 1] if k + 1 < len(cores) else len(flow.steps)
        end = _span_end(flow, core, limit)
        for i in range(begin, end + 1):
            if of_step[i] is None:
                of_step[i] = first + k
        begin = end + 1


def _span_end(flow: Flow, core: Core, limit: int) -> int:
    """The last residual add of the block of ``core`` before record ``limit``: the adds that
    add to the residual stream, one of their sources the block's input (a record before the
    core) or an earlier add of the block; an add of branches that read the stream (the sum of
    a distilled head's two classifiers of the last block's output, normed or not) is no part
    of the block."""
    return max([max(core.steps | core.proj), *stream_joins(flow, core, limit)])


def stream_joins(flow: Flow, core: Core, limit: int) -> list[int]:
    """The residual adds of the stream of ``core``'s block before record ``limit``: those
    after the core with a source before it (the block's input; the first one may fork from
    the model's input itself) or an earlier such add, or a norm of them
    (:meth:`~vitprof.recognize.graph.flow.Flow.on_stream`)."""
    stream = min(core.steps) - 1
    found: list[int] = []
    for join in sorted(j for j in flow.joins if max(core.steps) < j < limit):
        from_input = not found and flow.forks[join][0] is None
        if from_input or any(flow.on_stream(j, stream) for j in flow.steps[join].sources):
            stream = join
            found.append(join)
    return found


def within(module: str, unit: str) -> bool:
    """``module`` is ``unit`` or runs under it."""
    return module == unit or module.startswith(f"{unit}.")



def shared_parts(a: list[str], b: list[str]) -> int:
    """How many leading parts two module paths share."""
    return next((k for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                min(len(a), len(b)))


def path_parts(module: str) -> list[str]:
    """The names along a module path (none for the root)."""
    return module.split(".") if module else []


def holders(module: str) -> list[str]:
    """``module`` and the modules holding it, the root aside."""
    parts = path_parts(module)
    return [".".join(parts[:k]) for k in range(1, len(parts) + 1)]


class Span(NamedTuple):
    """The records from the first block's first (``start``) to the last block's last
    (``last``); in a convolutional network without blocks, its residual span."""

    start: int
    last: int

def common(modules: list[str]) -> str:
    """The innermost module holding every one of ``modules`` (paths)."""
    parts = [m.split(".") if m else [] for m in modules]
    shared = []
    for names in zip(*parts, strict=False):
        if len(set(names)) > 1:
            break
        shared.append(names[0])
    return ".".join(shared)


def sublayers(
    model: nn.Module, paths: dict[str, int], holding: set[str]
) -> Callable[[str], bool]:
    """Whether a module path lies in a sibling of the blocks that has their class but holds no
    core (``holding``: the modules that do):
    the MLP sub-layer of a stack that alternates attention and MLP layers (``layers =
    [Residual(attention), Residual(mlp), ...]``), part of the block before it."""
    classes: dict[str, set[object]] = {}
    for path in paths:
        parent = path.rpartition(".")[0]
        classes.setdefault(parent, set()).add(kind(model.get_submodule(path)))
    found: dict[str, bool] = {}

    def sublayer(module: str) -> bool:
        if module not in found:
            found[module] = any(
                child not in holding and parent in classes
                and kind(model.get_submodule(child)) in classes[parent]
                for parent, child in module_chain(module)
            )
        return found[module]

    return sublayer


def absorb_sublayers(
    flow: Flow, of_step: list[int | None], sublayer: Callable[[str], bool]
) -> None:
    last = None
    for i, step in enumerate(flow.steps):
        if of_step[i] is None and last is not None and sublayer(step.module):
            of_step[i] = last
        last = of_step[i] if of_step[i] is not None else last


def absorb_joins(flow: Flow, of_step: list[int | None]) -> None:
    for join, branch in sorted(flow.joins.items()):
        if of_step[join] is not None:
            continue
        owners = {of_step[i] for i in branch if of_step[i] is not None}
        if len(owners) == 1:
            of_step[join] = owners.pop()


def absorb_sandwiched(of_step: list[int | None]) -> None:
    """A record run between two records of one block is in it: a module registered outside
    the blocks but called from a block's forward (a convolutional position encoding shared
    by the blocks)."""
    following: list[int | None] = [None] * len(of_step)
    after = None
    for i in reversed(range(len(of_step))):
        following[i] = after
        after = of_step[i] if of_step[i] is not None else after
    before = None
    for i, block in enumerate(of_step):
        if block is None and before is not None and before == following[i]:
            of_step[i] = before
        before = of_step[i] if of_step[i] is not None else before


def parallel_cores(flow: Flow, cores: list[Core], every: Set[int]) -> bool:
    """Whether ``cores`` are the parallel branches of one block: none depends on another and a
    residual add's branch holds them all and no other core (``every``: the records of all
    cores): they read one input and are summed (two attentions side by side, or attentions at
    several scales mixed). Two cross attentions, each added to its own branch, are held
    together only by adds holding later cores too."""
    steps = set().union(*(core.steps for core in cores))
    if not any(steps <= branch and not (branch & every) - steps
               for branch in flow.joins.values()):
        return False
    low = min(steps)
    return all(not (steps - core.steps) & flow.ancestors(max(core.steps), low) for core in cores)
