"""Self-checks on a breakdown: patterns that no correct ViT breakdown shows.

Totals are exact whatever the recognizer decides; the split into components is not. These rules
read only the op records and the component each got, so they hold for any model:

* **attention outside attn_core**: an attention product ran but its MACs are counted elsewhere.
  Attention is a fused attention op (``scaled_dot_product_attention`` and its kernels,
  ``_native_multi_head_attention``, ``flex_attention``) or, in one module's forward, a softmax
  between two batched activation products (``aten.bmm`` / ``aten.baddbmm``: a linear layer runs
  as ``addmm`` / ``mm``, so a ``bmm`` multiplies two activations).
* **projections without a core**: a block with ``attn_qkv`` or ``attn_proj`` MACs and no
  ``attn_core`` work (MACs, or the vector FLOPs of an element-wise core: additive attention).
* **projections out of order**: in a block, ``attn_qkv`` runs before an attention core (its
  output feeds the core) or, beside it (a gate), before the output projection, and
  ``attn_proj`` after one; an ``attn_qkv`` op after the block's last core and last
  ``attn_proj`` op, or an ``attn_proj`` op before its first core, is something else (an MLP
  counted as attention).
* **attention module counted elsewhere**: in a model with recognized blocks, MACs of a module
  whose innermost attention-, MLP- or shortcut-like path segment names attention (``attn``,
  ``attention``, ``mha``, ``msa``; ``mlp``, ``ffn``, ``feed_forward`` for an MLP; ``shortcut``,
  ``skip``, ``residual`` for the residual path, mvitv2's ``shortcut_proj_attn``) counted outside
  ``attn_qkv`` / ``attn_core`` / ``attn_proj`` and ``head`` (attention pooling): an attention
  the recognizer missed. A gate is no attention core: a module so named whose ops hold a
  sigmoid and no softmax nor attention product (a squeeze-excitation, transformers RegNet's
  ``attention``, timm's ``attn`` of an SE block) passes. A model without blocks is left to
  *no blocks, yet components*, which wants no attention or MLP there.
* **patch embedding inside a block**: ``patch_embed`` MACs recorded in a block, or run between
  two ops of one block. Embedding between the stages of a hierarchical model runs between two
  different blocks and passes.
* **patch embedding with repeated blocks**: a patch embedding is a chain of layers; ``patch_embed``
  MACs run in a row (no op of a block or with MACs of another component between them) from two
  or more units of one container (``stages.0.blocks.1`` and ``stages.0.blocks.2``) that run the
  same named layers, three or more each, are a stage of blocks (a convolutional stage)
  counted as patch embedding. The downsampling of each stage of a convolutional trunk repeats
  too, but with the stages' own ops between them. A unit whose layers are the numbered
  children of one Sequential (``proj.0``, ``proj.2``, ``proj.4``: conv, act, conv, ...) is a
  chain of layers, a multi-conv stem, not a block: CrossViT's two branches each embed the
  image with one (``patch_embed.0.proj`` and ``patch_embed.1.proj``).
* **MACs in tokens**: ``tokens`` is the class / register tokens and the position embedding,
  whose arithmetic is element-wise (vector FLOPs); a multiply-accumulate there is misplaced.
* **no blocks, yet components**: a model without recognized transformer blocks is at most a
  convolutional network, broken down as one (its stem or downsampling in ``patch_embed``, its
  residual blocks in ``conv``, what follows them in ``head``), and leaves what it does not
  recognize in ``other``; MACs in attention, ``mlp`` or ``tokens`` fail.

Each failed rule is one warning line naming the rule, the MACs involved and up to three module
paths. An empty list means the breakdown passed every check.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from vitprof.core.records import Component, OpRecord, Phase
from vitprof.count.families.base import ATTENTION_NAME
from vitprof.count.graph.flow import SOFTMAX, is_gate

_FUSED_ATTENTION = ("scaled_dot_product", "_native_multi_head_attention", "flex_attention")
_ACTIVATION_PRODUCTS = ("aten.bmm", "aten.baddbmm")
_PROJECTIONS = (Component.ATTN_QKV, Component.ATTN_PROJ)
_ALLOWED_WITHOUT_BLOCKS = (Component.OTHER, Component.HEAD, Component.PATCH_EMBED,
                          Component.CONV)
# an innermost segment naming an MLP or the residual path is not attention, whatever else it says
_NOT_ATTENTION_SEGMENT = re.compile(r"mlp|ffn|feed_?forward|shortcut|skip|residual",
                                    re.IGNORECASE)
_ATTENTION_PLACES = (Component.ATTN_QKV, Component.ATTN_CORE, Component.ATTN_PROJ,
                     Component.NORM, Component.HEAD)
_LAYERS_PER_BLOCK = 3  # the fewest weighted layers of a repeated unit that make it a block


def _is_fused_attention(op: OpRecord) -> bool:
    return any(name in op.op for name in _FUSED_ATTENTION)


def _paths(ops: Iterable[OpRecord]) -> str:
    modules = list(dict.fromkeys(op.module or "(root)" for op in ops))
    shown = ", ".join(modules[:3])
    return shown + (f" and {len(modules) - 3} more" if len(modules) > 3 else "")


def _warning(rule: str, ops: Sequence[OpRecord], what: str) -> str:
    macs = sum(op.macs for op in ops)
    return f"self-check failed ({rule}): {macs:,} MACs {what}, in {_paths(ops)}"


def _explicit_attention(ops: Sequence[OpRecord]) -> list[OpRecord]:
    """The records of every bmm -> softmax -> bmm run inside one module's forward."""
    found: list[OpRecord] = []
    by_module: dict[tuple[str, str], list[OpRecord]] = {}
    for op in ops:
        by_module.setdefault((op.module, op.phase), []).append(op)
    for group in by_module.values():
        pending: list[OpRecord] = []  # a bmm, then maybe a softmax, waiting for the second bmm
        for op in group:
            if op.op in _ACTIVATION_PRODUCTS:
                if len(pending) == 2:
                    found.extend([*pending, op])
                pending = [op]
            elif op.op in SOFTMAX and len(pending) == 1:
                pending.append(op)
    return found


def attention_outside_core(ops: Sequence[OpRecord]) -> list[str]:
    attention = [op for op in ops if _is_fused_attention(op)] + _explicit_attention(ops)
    astray = [op for op in attention if op.macs and op.component is not Component.ATTN_CORE]
    if not astray:
        return []
    where = sorted({str(op.component) for op in astray})
    return [_warning("attention outside attn_core", astray,
                     f"of attention products counted as {', '.join(where)}")]


def projections_without_core(ops: Sequence[OpRecord]) -> list[str]:
    astray = [op for block in _by_block(ops).values()
              if not any(op.component is Component.ATTN_CORE and (op.macs or op.vector_flops)
                         for op in block)  # an element-wise core (additive attention) is one
              for op in block if op.component in _PROJECTIONS and op.macs]
    if not astray:
        return []
    blocks = len({op.block for op in astray})
    return [_warning("projections without a core", astray,
                     f"in attn_qkv / attn_proj of {blocks} block(s) with no attn_core work")]


def _by_block(ops: Sequence[OpRecord]) -> dict[int, list[OpRecord]]:
    """The ops of each block, in execution order."""
    by_block: dict[int, list[OpRecord]] = {}
    for op in ops:
        if op.block is not None:
            by_block.setdefault(op.block, []).append(op)
    return by_block


def _out_of_order(block: Sequence[OpRecord]) -> list[OpRecord]:
    cores = [i for i, op in enumerate(block) if op.component is Component.ATTN_CORE and op.macs]
    if not cores:
        return []  # projections_without_core's case
    # an input projection beside q/k/v (a gate) may run after the core, not after the output
    end = max(i for i, op in enumerate(block) if i == cores[-1] or (
        op.component is Component.ATTN_PROJ and op.macs))
    return [op for i, op in enumerate(block) if op.macs and (
        (op.component is Component.ATTN_QKV and i > end)
        or (op.component is Component.ATTN_PROJ and i < cores[0]))]


def projections_out_of_order(ops: Sequence[OpRecord]) -> list[str]:
    forward = [op for op in ops if op.phase is Phase.FORWARD]  # a backward runs in reverse
    astray = [op for block in _by_block(forward).values() for op in _out_of_order(block)]
    if not astray:
        return []
    return [_warning("projections out of order", astray,
                     "in attn_qkv after the block's last attention core or in attn_proj "
                     "before its first")]


def _named_attention(module: str) -> str | None:
    """The module path up to its innermost attention-, MLP- or shortcut-like segment when that
    segment names attention, else None."""
    segments = module.split(".")
    for k in range(len(segments) - 1, -1, -1):
        if _NOT_ATTENTION_SEGMENT.search(segments[k]):
            return None
        if ATTENTION_NAME.search(segments[k]):
            return ".".join(segments[:k + 1])
    return None


def _a_gate(ops: Sequence[OpRecord]) -> bool:
    """Whether a module's ops gate: a sigmoid, and no softmax nor attention product
    (squeeze-excitation: pool, 1x1 conv, act, 1x1 conv, sigmoid, multiply)."""
    return is_gate(op.op for op in ops) and not any(
        op.op in _ACTIVATION_PRODUCTS or _is_fused_attention(op) for op in ops)


def attention_module_elsewhere(ops: Sequence[OpRecord]) -> list[str]:
    if not any(op.block is not None for op in ops):
        return []  # components_without_blocks' case: no attention component there at all
    named: dict[str, list[OpRecord]] = {}
    for op in ops:
        if (module := _named_attention(op.module)) is not None:
            named.setdefault(module, []).append(op)
    astray = [op for group in named.values() if not _a_gate(group)
              for op in group if op.macs and op.component not in _ATTENTION_PLACES]
    if not astray:
        return []
    where = sorted({str(op.component) for op in astray})
    return [_warning("attention module counted elsewhere", astray,
                     f"of modules named like attention counted as {', '.join(where)}")]


def _block_around(ops: Sequence[OpRecord]) -> list[int | None]:
    """Per op: its block, or the block of the ops on both sides of it when those agree."""
    before: list[int | None] = []
    last = None
    for op in ops:
        last = op.block if op.block is not None else last
        before.append(last)
    around: list[int | None] = [None] * len(ops)
    following = None
    for i in range(len(ops) - 1, -1, -1):
        op = ops[i]
        following = op.block if op.block is not None else following
        if op.block is not None or before[i] == following:
            around[i] = op.block if op.block is not None else following
    return around


def patch_embed_inside_blocks(ops: Sequence[OpRecord]) -> list[str]:
    around = _block_around(ops)
    astray = [op for op, block in zip(ops, around, strict=True)
              if op.component is Component.PATCH_EMBED and block is not None and op.macs]
    return [_warning("patch embedding inside a block", astray, "in patch_embed")] if astray else []


def _patch_embed_runs(ops: Sequence[OpRecord]) -> list[list[OpRecord]]:
    """The ``patch_embed`` ops with MACs that run one after another outside blocks: split
    wherever an op of a block runs or an op with MACs of another component (the downsampling
    of each stage of a convolutional trunk is a run of its own)."""
    runs: list[list[OpRecord]] = [[]]
    for op in ops:
        if op.block is None and op.component is Component.PATCH_EMBED and op.macs:
            runs[-1].append(op)
        elif (op.block is not None or op.macs) and runs[-1]:
            runs.append([])
    return [run for run in runs if run]


def _a_chain(layers: Sequence[tuple[str, ...]]) -> bool:
    """Whether the layers (paths inside a unit) are the numbered children of one Sequential."""
    return len({path[:-1] for path in layers}) == 1 and all(path[-1].isdigit() for path in layers)


def _repeats_a_unit(modules: Sequence[str]) -> bool:
    """Whether two numbered units of one container (``P.1.S...``, ``P.2.S...``) ran the same
    layers, at least ``_LAYERS_PER_BLOCK`` each and not a chain (:func:`_a_chain`)
    (``modules``: one path per weighted op)."""
    units: dict[tuple[str, ...], dict[str, list[tuple[str, ...]]]] = {}
    for path in modules:
        parts = path.split(".")
        for k, part in enumerate(parts[:-1]):
            if part.isdigit():
                units.setdefault(tuple(parts[:k]), {}).setdefault(part, []).append(
                    tuple(parts[k + 1:]))
    for by_index in units.values():
        layers = [tuple(s) for s in by_index.values()
                  if len(s) >= _LAYERS_PER_BLOCK and not _a_chain(s)]
        if len(layers) != len(set(layers)):
            return True
    return False


def patch_embed_with_blocks(ops: Sequence[OpRecord]) -> list[str]:
    astray = []
    for run in _patch_embed_runs(ops):
        if _repeats_a_unit([op.module for op in run]):
            astray.extend(run)
    if not astray:
        return []
    return [_warning("patch embedding with repeated blocks", astray,
                     "in patch_embed, repeated units of three or more layers run in a row")]


def macs_in_tokens(ops: Sequence[OpRecord]) -> list[str]:
    astray = [op for op in ops if op.component is Component.TOKENS and op.macs]
    return [_warning("MACs in tokens", astray, "in tokens")] if astray else []


def components_without_blocks(ops: Sequence[OpRecord]) -> list[str]:
    if any(op.block is not None for op in ops):
        return []
    astray = [op for op in ops if op.component not in _ALLOWED_WITHOUT_BLOCKS and op.macs]
    if not astray:
        return []
    where = sorted({str(op.component) for op in astray})
    return [_warning("no blocks, yet components", astray,
                     f"in {', '.join(where)} of a model with no recognized blocks")]


RULES = (attention_outside_core, projections_without_core, projections_out_of_order,
         attention_module_elsewhere, patch_embed_inside_blocks, patch_embed_with_blocks,
         macs_in_tokens, components_without_blocks)


def self_checks(ops: Sequence[OpRecord]) -> list[str]:
    """One warning per failed rule (see the module docstring); empty when all pass."""
    return [line for rule in RULES for line in rule(ops)]
