"""The recognizer for ViTs nobody wrote a table for: module types, parameter shapes, names.

* Blocks: the children of every ModuleList / Sequential whose children all share one class and
  contain an attention module (``nn.MultiheadAttention`` or a class or attribute named like
  ``attn`` / ``attention``), innermost stacks only: a list of stages that each hold a stack of
  blocks (Swin) yields the blocks, not the stages. Several stacks (CaiT's class-attention
  blocks, an MAE decoder, hierarchical stages) are numbered on, in registration order.
* Inside a block: the attention module is ``attn_core``; its linears are ``attn_qkv`` unless
  named like an output projection (``proj``, ``out``, ``o_proj``, ``dense``...), and when none is,
  the last one registered is ``attn_proj``. Norm layers are ``norm``; every other child holding
  parameters is ``mlp``. Layer scales (``gamma_1``/``ls1``/``layer_scale1`` and their ``2``
  twins, raw parameters or modules) scale a branch's output: the first goes with ``attn_proj``,
  the second with ``mlp``.
* Outside the blocks: raw parameters (class, distillation, register tokens, position
  embeddings) and the modules holding them are ``tokens``; convolutions, linears and
  ``patch``-named modules registered before the first stack of blocks, and those between two
  stacks (patch merging), are ``patch_embed``; convolutions, linears and ``head``/``neck``-named
  modules registered after the last stack are ``head``; norm layers are ``norm``.
* Anything else lands in ``other`` with a warning.
"""

from __future__ import annotations

import re

from torch import nn

from vitprof.core.records import Component as C
from vitprof.count.families.base import ATTENTION_NAME, ComponentMap, unrecognized_warnings

GENERIC = "generic"  # the family name of the maps this recognizer makes
_QKV_NAME = re.compile(
    r"(^|[._])(qkv|q|k|v|kv|query|key|value|in_proj|to_q|to_k|to_v|to_qkv|to_kv|"
    r"q_proj|k_proj|v_proj|wq|wk|wv|q_linear|k_linear|v_linear)($|[._])"
)
_PROJ_NAME = re.compile(r"(^|[._])(proj|out|out_proj|o_proj|to_out|output|dense|wo|o)($|[._])")
_PATCH_NAME = re.compile(r"patch|patcher|stem|conv_proj|to_patch", re.IGNORECASE)
_HEAD_NAME = re.compile(r"head|neck|classifier|logits|pooler|(^|\.)fc($|\.)", re.IGNORECASE)
_LAYER_SCALE = re.compile(r"^(gamma|ls|layer_scale|lambda)_?([12])$")
_MHA_QKV_PARAMS = ("in_proj_weight", "in_proj_bias", "q_proj_weight", "k_proj_weight",
                   "v_proj_weight", "bias_k", "bias_v")
_CONV = (nn.Conv1d, nn.Conv2d, nn.Conv3d)
_WEIGHTED_LEAVES = (nn.Linear, *_CONV, nn.Embedding)


def is_norm(module: nn.Module) -> bool:
    return isinstance(module, nn.LayerNorm | nn.GroupNorm | nn.modules.batchnorm._BatchNorm) or (
        "Norm" in type(module).__name__ and not list(module.children())
    )


def is_attention(name: str, module: nn.Module) -> bool:
    if isinstance(module, nn.MultiheadAttention):
        return True
    leaf_name = name.rpartition(".")[2]
    named_like = ATTENTION_NAME.search(type(module).__name__) or ATTENTION_NAME.search(leaf_name)
    return bool(named_like) and any(isinstance(m, nn.Linear) for m in module.modules())


def _is_block_stack(container: nn.Module) -> bool:
    if not isinstance(container, nn.ModuleList | nn.Sequential):
        return False
    children = list(container.children())
    if not children or len({type(c) for c in children}) != 1:
        return False
    return any(is_attention(n, m) for n, m in children[0].named_modules() if n)


def find_block_stacks(model: nn.Module) -> list[str]:
    """Paths of the innermost containers whose children are transformer blocks, in order."""
    stacks = [path for path, module in model.named_modules() if _is_block_stack(module)]
    return [
        path for path in stacks
        if not any(other.startswith(f"{path}.") for other in stacks)
    ]


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix and name else prefix or name


def _map_attention(path: str, attention: nn.Module, modules: dict[str, C]) -> None:
    modules[path] = C.ATTN_CORE
    linears = [(n, m) for n, m in attention.named_modules() if isinstance(m, nn.Linear)]
    named_proj = [n for n, _ in linears if _PROJ_NAME.search(n) and not _QKV_NAME.search(n)]
    for name, module in attention.named_modules():
        if not name:
            continue
        full = _join(path, name)
        if is_norm(module):
            modules[full] = C.NORM
        elif isinstance(module, nn.Linear):
            is_proj = name in named_proj if named_proj else name == linears[-1][0]
            modules[full] = C.ATTN_PROJ if is_proj and not _QKV_NAME.search(name) else C.ATTN_QKV
        elif _PROJ_NAME.search(name) and any(isinstance(m, nn.Linear) for m in module.modules()):
            modules[full] = C.ATTN_PROJ


def layer_scale_component(name: str) -> C | None:
    """``attn_proj`` for the first layer scale of a block, ``mlp`` for the second, else None."""
    match = _LAYER_SCALE.match(name)
    if match is None:
        return None
    return C.ATTN_PROJ if match.group(2) == "1" else C.MLP


def _map_block(path: str, block: nn.Module, modules: dict[str, C]) -> None:
    for name, child in block.named_children():
        full = _join(path, name)
        scale = layer_scale_component(name)
        if scale is not None:
            for sub, _ in child.named_modules():
                modules[_join(full, sub)] = scale
        elif is_attention(name, child):
            _map_attention(full, child, modules)
        elif is_norm(child):
            modules[full] = C.NORM
        elif any(True for _ in child.parameters()) or list(child.children()):
            for sub, module in child.named_modules():
                modules[_join(full, sub)] = C.NORM if is_norm(module) else C.MLP


def _map_outside(model: nn.Module, stacks: list[str], modules: dict[str, C]) -> None:
    stacks_left = len(stacks)
    for path, module in model.named_modules():
        if path in stacks:
            stacks_left -= 1
        if not path or any(path == s or path.startswith(f"{s}.") for s in stacks):
            continue
        if path in modules:
            continue
        after_last = stacks_left == 0
        if is_norm(module):
            modules[path] = C.NORM
        elif list(module.parameters(recurse=False)) and not isinstance(module, _WEIGHTED_LEAVES):
            modules[path] = C.TOKENS
        elif not stacks:
            continue
        elif not after_last and (isinstance(module, (*_CONV, nn.Linear, nn.Unfold))
                                 or _PATCH_NAME.search(path)):
            _map_subtree(path, module, C.PATCH_EMBED, modules)
        elif after_last and (isinstance(module, (*_CONV, nn.Linear)) or _HEAD_NAME.search(path)):
            _map_subtree(path, module, C.HEAD, modules)


def _map_subtree(path: str, module: nn.Module, component: C, modules: dict[str, C]) -> None:
    for sub, child in module.named_modules():
        full = _join(path, sub)
        has_tokens = list(child.parameters(recurse=False)) and not isinstance(
            child, _WEIGHTED_LEAVES
        ) and not is_norm(child)
        modules[full] = C.NORM if is_norm(child) else C.TOKENS if has_tokens else component


def _param_component(
    model: nn.Module, name: str, modules: dict[str, C], blocks: dict[str, int]
) -> C | None:
    owner, _, leaf = name.rpartition(".")
    if leaf in _MHA_QKV_PARAMS:
        return C.ATTN_QKV
    if modules.get(owner) is C.ATTN_CORE and _QKV_NAME.search(leaf):
        return C.ATTN_QKV  # separate q / v biases (BEiT, EVA)
    if owner in blocks and (scale := layer_scale_component(leaf)) is not None:
        return scale
    module = model.get_submodule(owner)
    in_block = any(owner == b or owner.startswith(b + ".") for b in blocks)
    if not in_block and not isinstance(module, _WEIGHTED_LEAVES) and not is_norm(module):
        return C.TOKENS
    path = owner
    while True:
        if path in modules:
            return modules[path]
        if not path or path in blocks:
            return None
        path = path.rpartition(".")[0]


def resolve_generic(model: nn.Module) -> ComponentMap:
    """Build the component map of ``model`` from its structure alone."""
    stacks = find_block_stacks(model)
    modules: dict[str, C] = {}
    blocks: dict[str, int] = {}
    warnings: list[str] = []
    if not stacks:
        warnings.append("no transformer blocks recognized: is this a Vision Transformer?")
    for stack in stacks:
        for name, block in model.get_submodule(stack).named_children():
            blocks[_join(stack, name)] = len(blocks)
            _map_block(_join(stack, name), block, modules)
    _map_outside(model, stacks, modules)
    params: dict[str, C] = {}
    unknown: list[str] = []
    for name, _ in model.named_parameters():
        component = _param_component(model, name, modules, blocks)
        if component is None:
            unknown.append(name)
        params[name] = component or C.OTHER
    warnings.extend(unrecognized_warnings(unknown))
    return ComponentMap(GENERIC, modules, params, blocks, tuple(warnings))
