"""Memory by kind: parameters by dtype, activations per component, what a backward keeps.

* **Parameters**: ``numel x element_size`` of every parameter, by dtype and by component; each
  shared tensor once.
* **Inference activations** of a component: the bytes its counted operations write (their
  outputs), from the counter's records. It is the activation traffic of one forward, not a
  peak: a runtime frees and reuses buffers.
* **Saved for backward** of a component: the bytes autograd keeps for the backward after one
  training-mode forward, found with ``torch.autograd.graph.saved_tensors_hooks`` on meta
  stand-ins. Each saved storage counts once, whole (a view keeps its base alive), for the
  first forward operation whose autograd node saved it (the pack hook hands out tokens; reading
  each node's ``_saved_*`` fields unpacks them and names the node); parameters are not counted.
  The meta device runs attention by its math decomposition, which saves the softmax scores
  (O(L^2) per head); a flash kernel would keep O(L).
* **Peak device memory**: ``torch.cuda.max_memory_allocated`` over the timed run on a GPU; the
  CPU allocator reports none.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

import torch
from torch import nn
from torch.autograd.graph import saved_tensors_hooks

from vitprof.core.records import COMPONENTS, Component, OpRecord, ParamRecord, Phase
from vitprof.count.counter import storage_key
from vitprof.count.session import Inputs, as_inputs, count, meta_twins
from vitprof.recognize.placement import place
from vitprof.recognize.tables import ComponentMap
from vitprof.workload import dtype_name


def param_bytes_by_dtype(model: nn.Module) -> dict[str, int]:
    """Parameter bytes per dtype name, each shared tensor once."""
    totals: dict[str, int] = defaultdict(int)
    for p in model.parameters():
        totals[dtype_name(p.dtype)] += p.numel() * p.element_size()
    return dict(totals)


def param_bytes_by_component(model: nn.Module, params: Iterable[ParamRecord]
                             ) -> dict[Component, int]:
    """Parameter bytes per component (every component present), of a breakdown's parameter
    records (a fused projection's weight is two records, one per share of its rows), each
    element at the dtype of ``model``'s parameter of its name."""
    sizes = {name: p.element_size() for name, p in model.named_parameters()}
    totals = dict.fromkeys(COMPONENTS, 0)
    for record in params:
        totals[record.component] += record.numel * sizes[record.name]
    return totals


def activation_bytes(records: Iterable[OpRecord]) -> dict[Component, int]:
    """Bytes written by each component's forward operations (every component present)."""
    totals = dict.fromkeys(COMPONENTS, 0)
    for op in records:
        if op.phase == Phase.FORWARD:
            totals[op.component] += op.bytes_written
    return totals


def saved_for_backward(
    model: nn.Module, example: torch.Tensor | Inputs, mapping: ComponentMap
) -> dict[Component, int]:
    """Bytes autograd saves for the backward, per component, after one train-mode forward.

    Counts a training step without its backward (:func:`vitprof.count.session.count`) on meta
    twins of ``example`` (the whole forward, ``(args, kwargs)``, or a tensor, its one positional
    argument) and meta stand-ins of the parameters (same dtypes, same
    ``requires_grad``), so nothing is allocated; the model's mode is restored. Its records are
    placed by ``mapping`` (:func:`vitprof.recognize.placement.place`).
    """
    saved: list[torch.Tensor] = []
    claims: dict[int, int] = {}  # token -> index of the first record whose node saved it
    reader: list[int] = []  # index of the record whose node is being read

    def pack(tensor: torch.Tensor) -> int:
        saved.append(tensor)
        return len(saved) - 1

    def unpack(token: int) -> torch.Tensor:
        if reader:
            claims.setdefault(token, reader[-1])
        return saved[token]

    with saved_tensors_hooks(pack, unpack):
        run = count(model, meta_twins(as_inputs(example)), train=True, backward=False)
    for node, index in sorted(run.nodes.items(), key=lambda item: item[1]):
        reader.append(index)
        _read_saved(node)
    records = place(run.ops, run.whereabouts, mapping)
    parameters = {storage_key(t) for t in run.params.values()}
    totals = dict.fromkeys(COMPONENTS, 0)
    seen: set[int | None] = set()
    for token in sorted(claims, key=lambda t: (claims[t], t)):
        key = storage_key(saved[token])
        if key in parameters or key in seen:
            continue
        seen.add(key)
        totals[records[claims[token]].component] += saved[token].untyped_storage().nbytes()
    unclaimed = {storage_key(t) for i, t in enumerate(saved) if i not in claims} - parameters
    if unclaimed - seen:
        totals[Component.OTHER] += sum(
            saved[i].untyped_storage().nbytes() for i in _first_tokens(saved, unclaimed - seen)
        )
    return totals


def _read_saved(node: object) -> None:
    """Touch every saved tensor of an autograd node, so that its unpack hook runs."""
    for name in dir(node):
        if name.startswith("_saved_"):
            getattr(node, name)
    if hasattr(node, "saved_tensors"):  # a custom autograd.Function
        node.saved_tensors  # noqa: B018


def _first_tokens(saved: list[torch.Tensor], keys: set[int | None]) -> list[int]:
    tokens = []
    for i, tensor in enumerate(saved):
        key = storage_key(tensor)
        if key in keys:
            tokens.append(i)
            keys = keys - {key}
    return tokens
