"""Self-checks on a breakdown: patterns that no correct ViT breakdown shows.

Totals are exact whatever the recognizer decides; the split into components is not. These rules
read only the op and parameter records, the component each got and the module tree (which
module holds which), never a module's, parameter's or class's name, so they hold for any model:

* **attention outside attn_core**: an attention product ran but its MACs are counted elsewhere.
  Attention is a fused attention op, by the kind its formula is registered with
  (:class:`~vitprof.core.records.OpKind` ``attention``: ``scaled_dot_product_attention`` and
  its kernels, ``flex_attention``; ``multi_head_attention``:
  ``_native_multi_head_attention``) or, in one module's forward, a softmax
  between two batched activation products (``aten.bmm`` / ``aten.baddbmm``: a linear layer runs
  as ``addmm`` / ``mm``, so a ``bmm`` multiplies two activations).
* **projections without a core**: a block with ``attn_qkv`` or ``attn_proj`` MACs and no
  ``attn_core`` work (MACs, or the vector FLOPs of an element-wise core: additive attention).
* **projections out of order**: in a block, ``attn_qkv`` runs before an attention core (its
  output feeds the core) or, beside it (a gate), before the output projection, and
  ``attn_proj`` after one; an ``attn_qkv`` op after the block's last core and last
  ``attn_proj`` op, or an ``attn_proj`` op before its first core, is something else (an MLP
  counted as attention).
* **one module in two components**: the parameters and the operations of one module land in one
  component. A leaf module (no module below it ran, none holds a parameter) whose operations all
  landed in one component has its parameters there too (a LayerNorm on the raw patches: its
  weights counted as ``patch_embed``, its operations as ``norm``); a parameter shared out by
  output columns (a fused projection's: two records of its name) is exempt, the record says so.
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
  whose arithmetic is element-wise (vector FLOPs); a multiply-accumulate there is misplaced,
  but a product that the trace shows reading no weight (a sin-cos table made in the forward
  from constants: ``constant-product``).
* **no blocks, yet components**: a model without recognized transformer blocks is at most a
  convolutional network, broken down as one (its stem or downsampling in ``patch_embed``, its
  residual blocks in ``conv``, what follows them in ``head``), and leaves what it does not
  recognize in ``other``; MACs in attention, ``mlp`` or ``tokens`` fail.

The checks of meaning read, besides the records, which parameters each forward record reads as
its weights (:func:`weight_reads`, from the trace of the data flow; without one they pass):

* **weight in another component**: a weighted record (MACs reading a weight) whose component
  holds none of the parameters it reads as weights.
* **weight operand in tokens**: a parameter whose values reach the activations only as the
  weight of products (read by products, or by records computing a weight from parameters
  alone that products read: a parametrized weight) placed in ``tokens``; a class token, a
  position table, memory key/values all meet activations in a record without MACs.
* **norm affine elsewhere**: a module that normalises by a vector norm (``linalg_vector_norm``,
  then its input divided by it: ``F.normalize``), no MACs of its own, whose own parameters
  applied to the normalised output (its gain) sit outside ``norm`` (an RMSNorm written with
  ``F.normalize``, not recognized as a norm; ``other`` in a model without blocks passes); one
  of its parameters applied after a product (a classifier's logits scaled) is no gain. A
  global response norm divides the norms by their mean, not its input: no norm of the tokens.
  A fused norm op's affine away from its record is *one module in two components*.
* **same computation split differently**: two blocks that run the same ops with the same MACs
  and vector FLOPs, record by record, whose records with MACs are placed in other components
  (records without MACs at a block's edge follow their producer, which differs between the
  first block of a stage and the others: not compared); or two blocks that run the same
  layers, in the same order (weighted records of one op reading parameters of the same
  shapes), whatever runs between them and on how many tokens, whose layers are placed in other
  components (a block reorganizing its tokens between its attention and its MLP runs its
  layers on fewer tokens, with a fused token's product between them). The blocks placed
  otherwise than most of those running the same are named.
* **feed-forwards outside blocks**: blocks with a core and no ``mlp`` while, between two of
  them, weighted records in no block, none a convolution, are ``conv`` or ``head``: a layer's
  feed-forward left out of its block (MobileNetV4-hybrid's inverted residuals between its
  attention blocks convolve).

Each failed rule is one warning line naming the rule, the MACs involved and up to three module
paths. An empty list means the breakdown passed every check.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence, Set

from vitprof.core.records import Component, OpKind, OpRecord, ParamRecord, Phase
from vitprof.count.trace import Trace
from vitprof.recognize.graph.flow import Flow
from vitprof.recognize.graph.ops import DIVIDES, SOFTMAX

_FUSED_ATTENTION = (OpKind.ATTENTION, OpKind.MULTI_HEAD_ATTENTION)
_ACTIVATION_PRODUCTS = ("aten.bmm", "aten.baddbmm")
_PROJECTIONS = (Component.ATTN_QKV, Component.ATTN_PROJ)
_ALLOWED_WITHOUT_BLOCKS = (Component.OTHER, Component.HEAD, Component.PATCH_EMBED,
                          Component.CONV)
_LAYERS_PER_BLOCK = 3  # the fewest weighted layers of a repeated unit that make it a block


def _is_fused_attention(op: OpRecord) -> bool:
    return op.kind in _FUSED_ATTENTION


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


def _owner(param: ParamRecord) -> str:
    return param.name.rpartition(".")[0]


def _leaves(ops: Sequence[OpRecord], params: Sequence[ParamRecord]) -> set[str]:
    """The modules that ran operations with nothing below them: no other module ran, none
    holds a parameter."""
    paths = {op.module for op in ops} | {_owner(p) for p in params}
    above = {".".join(parts[:k]) for parts in (path.split(".") for path in paths)
             for k in range(len(parts))}
    return {op.module for op in ops if op.module and op.module not in above}


def module_in_two_components(
    ops: Sequence[OpRecord], params: Sequence[ParamRecord] = ()
) -> list[str]:
    forward = [op for op in ops if op.phase is Phase.FORWARD and (op.macs or op.vector_flops)]
    leaves = _leaves(forward, params)
    placed: dict[str, set[Component]] = {}
    for op in forward:
        if op.module in leaves:
            placed.setdefault(op.module, set()).add(op.component)
    shared = {name for name, n in Counter(p.name for p in params).items() if n > 1}
    astray = [p for p in params if p.name not in shared and len(placed.get(_owner(p), ())) == 1
              and p.component not in placed[_owner(p)]]
    if not astray:
        return []
    modules = list(dict.fromkeys(_owner(p) for p in astray))
    shown = ", ".join(modules[:3]) + (f" and {len(modules) - 3} more" if len(modules) > 3 else "")
    where = sorted({f"{p.component} / {next(iter(placed[_owner(p)]))}" for p in astray})
    return [f"self-check failed (one module in two components): "
            f"{sum(p.numel for p in astray):,} params in another component than their module's "
            f"operations ({', '.join(where)}), in {shown}"]


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


def macs_in_tokens(ops: Sequence[OpRecord], reads: Reads | None = None) -> list[str]:
    """``reads``: per op record, the parameters it reads as weights, when a trace says so (a
    product reading none is a table computed from constants); None: every product counts."""
    astray = [op for k, op in enumerate(ops) if op.component is Component.TOKENS and op.macs
              and (reads is None or reads[k])]
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


# ----------------------------------------------------------------------------- checks of meaning

Reads = Sequence[frozenset[str]]  # per op record, the parameters it reads as weights


def weight_reads(ops: Sequence[OpRecord], params: Sequence[ParamRecord], trace: Trace | None,
                 origins: Sequence[int] | None) -> tuple[Reads, frozenset[str], frozenset[str]]:
    """Per op record of ``ops``, the parameters its forward record reads as weights
    (:meth:`~vitprof.recognize.graph.flow.Flow.weight_params`; none for a backward record, a part
    of a fused op priced in parts, or without ``trace``), and the parameters whose values reach
    the activations only as the weights of products (:func:`_weights_only`). ``origins``: per
    record of ``ops``, the index of the counted record it is a share of (None: one for one);
    and the gains of the modules that normalise by a vector norm (:func:`_vector_norm_gains`)."""
    if trace is None:
        return [frozenset()] * len(ops), frozenset(), frozenset()
    flow = Flow(trace)
    per_step: dict[int, frozenset[str]] = {}
    reads: list[frozenset[str]] = []
    for k, op in enumerate(ops):
        step = trace.owners[origins[k] if origins is not None else k]
        if op.phase is not Phase.FORWARD or step is None or not op.macs or (
                trace.steps[step].fixed is not None):  # a fused op priced in parts names its own
            reads.append(frozenset())
            continue
        if step not in per_step:
            per_step[step] = frozenset(flow.weight_params(step)) if flow.weighted(step) \
                else frozenset()
        reads.append(per_step[step])
    matrices = {p.name for p in params if len(p.shape) >= 2}
    return reads, _weights_only(flow, matrices), _vector_norm_gains(flow)


def _weights_only(flow: Flow, matrices: Set[str]) -> frozenset[str]:
    """The parameters read by products only, directly or through records computing a weight
    from parameters alone (:attr:`Flow.weights`), as their weight: a product that reads
    another of the ``matrices`` (parameters of two or more dimensions) directly takes the
    parameter as its input (learned queries normed, then projected). One a record without
    MACs adds, joins or multiplies to an activation is not."""
    reach: dict[str, bool] = {}
    for i, step in enumerate(flow.steps):
        names = set(step.params) | (set(step.carried) - set(step.carried_joined))
        for name in names:
            reach[name] = reach.get(name, True) and _only_products(flow, i, name, matrices)
    return frozenset(name for name, only in reach.items() if only)


def _only_products(flow: Flow, i: int, name: str, matrices: Set[str]) -> bool:
    """Record ``i`` is a product weighted by ``name``, or computes a weight that only such
    products use (through other records computing weights)."""
    stack, seen = [i], {i}
    while stack:
        j = stack.pop()
        if flow.steps[j].macs:
            if (set(flow.steps[j].params) & matrices) - {name}:
                return False
            continue
        if not flow.weights[j] or not flow.consumers[j]:
            return False
        for k in flow.consumers[j]:
            if k not in seen:
                seen.add(k)
                stack.append(k)
    return True


def _components(params: Sequence[ParamRecord]) -> dict[str, set[Component]]:
    found: dict[str, set[Component]] = {}
    for p in params:
        found.setdefault(p.name, set()).add(p.component)
    return found


def weight_elsewhere(ops: Sequence[OpRecord], params: Sequence[ParamRecord],
                     reads: Reads) -> list[str]:
    placed = _components(params)
    astray = [op for op, names in zip(ops, reads, strict=True)
              if names and not any(op.component in placed.get(n, ()) for n in names)]
    if not astray:
        return []
    where = sorted({str(op.component) for op in astray})
    return [_warning("weight in another component", astray,
                     f"of weighted records in {', '.join(where)} whose component holds none "
                     f"of the parameters they read")]


def weight_operand_in_tokens(params: Sequence[ParamRecord], weights: frozenset[str]
                             ) -> list[str]:
    astray = [p for p in params if p.component is Component.TOKENS and p.name in weights]
    if not astray:
        return []
    names = list(dict.fromkeys(_owner(p) or p.name for p in astray))
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return [f"self-check failed (weight operand in tokens): {sum(p.numel for p in astray):,} "
            f"params read only as the weights of products are in tokens, in {shown}"]


def _vector_norm_gains(flow: Flow) -> frozenset[str]:
    """The gains of the modules without MACs that divide a tensor by its vector norm
    (``F.normalize``: ``linalg_vector_norm``, a clamp, a division of the norm's input by it):
    their own parameters that records of theirs apply to the division's output, reached
    through records without MACs (``g`` in ``F.normalize(x) * scale * g``). A parameter of
    such a module applied elsewhere is no gain of its norm: a model's forward that normalises
    its tokens and scales the logits of its classifier's linear by a parameter (nViT's
    ``logit_scale``) holds a head's parameter."""
    with_macs = {step.module for step in flow.steps if step.macs}
    found: set[str] = set()
    for i, step in enumerate(flow.steps):
        if step.kind is not OpKind.VECTOR_NORM or not step.sources or step.module in with_macs:
            continue
        normed = step.sources[0]
        after = flow.descendants(i, i + _DIVISION_WITHIN)
        for j in after:
            division = flow.steps[j]
            if division.op in DIVIDES and division.sources[:1] == (normed,) \
                    and division.module == step.module:
                found |= _applied(flow, j)
    return frozenset(found)


def _applied(flow: Flow, division: int) -> set[str]:
    """The parameters of the module running record ``division`` that its records read
    (directly or through records computing a weight) on the way from ``division``'s output,
    through records of that module without MACs."""
    module = flow.steps[division].module
    found: set[str] = set()
    stack, seen = [division], {division}
    while stack:
        i = stack.pop()
        found |= {name for name in flow.weight_params(i) if name.rpartition(".")[0] == module}
        for j in flow.consumers[i]:
            if j not in seen and not flow.steps[j].macs and flow.steps[j].module == module:
                seen.add(j)
                stack.append(j)
    return found


_DIVISION_WITHIN = 4  # records from a vector norm to the division by it (a clamp, an expand)


def norm_affine_elsewhere(params: Sequence[ParamRecord], gains: frozenset[str]) -> list[str]:
    astray = [p for p in params if p.name in gains
              and p.component not in (Component.NORM, Component.OTHER)]
    if not astray:
        return []
    modules = list(dict.fromkeys(_owner(p) or "(root)" for p in astray))
    shown = ", ".join(modules[:3]) + (f" and {len(modules) - 3} more" if len(modules) > 3 else "")
    where = sorted({str(p.component) for p in astray})
    return [f"self-check failed (norm affine elsewhere): {sum(p.numel for p in astray):,} "
            f"params of modules that normalise by a vector norm are in {', '.join(where)}, "
            f"not norm, in {shown}"]


Layer = tuple[str, tuple[tuple[int, ...], ...]]  # a weighted record's op, its weights' shapes


def _layers(ops: Sequence[OpRecord], params: Sequence[ParamRecord], reads: Reads
            ) -> list[Layer | None]:
    """Per op record, the layer it runs: its op and the shapes of the parameters it reads as
    weights (a share of a fused projection by the shapes of every share); None for a record
    reading none."""
    shapes: dict[str, list[tuple[int, ...]]] = {}
    for p in params:
        shapes.setdefault(p.name, []).append(p.shape)
    return [(op.op, tuple(sorted(shape for name in names for shape in shapes.get(name, ()))))
            if names else None for op, names in zip(ops, reads, strict=True)]


def _split_otherwise(blocks: Sequence[int], runs: Sequence[tuple[object, ...]],
                     placed: Sequence[tuple[Component, ...]]) -> set[int]:
    """The ``blocks`` running what another block runs (``runs``, one per block), their records
    placed (``placed``, one per block) otherwise than in most of the blocks running it (the
    first placement seen, among those of as many blocks)."""
    ways: dict[tuple[object, ...], dict[tuple[Component, ...], list[int]]] = {}
    for block, run, place in zip(blocks, runs, placed, strict=True):
        ways.setdefault(run, {}).setdefault(place, []).append(block)
    astray: set[int] = set()
    for split in ways.values():
        most = max(split.values(), key=len)
        astray.update(block for others in split.values() if others is not most
                      for block in others)
    return astray


def same_computation_split_differently(
    ops: Sequence[OpRecord], params: Sequence[ParamRecord] = (), reads: Reads | None = None
) -> list[str]:
    """Blocks running the same ops with the same MACs and vector FLOPs, record by record, whose
    records with MACs are placed otherwise; and, given ``reads`` (per op, the parameters it
    reads as weights), blocks running the same layers (:func:`_layers`, in the same order),
    whatever runs between them and on how many tokens, whose layers are placed otherwise (a
    block reorganizing its tokens between its attention and its MLP, its MLP's first linear
    taken for an output projection)."""
    blocks: dict[int, list[int]] = {}  # per block, the indices of its forward records
    for k, op in enumerate(ops):
        if op.phase is Phase.FORWARD and op.block is not None:
            blocks.setdefault(op.block, []).append(k)
    records = list(blocks.values())
    computations = [tuple((ops[k].op, ops[k].macs, ops[k].vector_flops) for k in block)
                    for block in records]
    astray = _split_otherwise(
        list(blocks), computations,
        [tuple(ops[k].component for k in block if ops[k].macs) for block in records])
    if reads is not None:
        layers = _layers(ops, params, reads)
        weighted = [[k for k in block if layers[k] is not None] for block in records]
        astray |= _split_otherwise(
            list(blocks), [tuple(layers[k] for k in block) for block in weighted],
            [tuple(ops[k].component for k in block) for block in weighted])
    found = [ops[k] for block in sorted(astray) for k in blocks[block] if ops[k].macs]
    if not found:
        return []
    return [_warning("same computation split differently", found,
                     "in blocks that run the same ops or layers as another block, split "
                     "otherwise")]


def feed_forwards_outside_blocks(ops: Sequence[OpRecord]) -> list[str]:
    forward = [op for op in ops if op.phase is Phase.FORWARD]
    blocks = _by_block(forward)
    bare = {block for block, records in blocks.items()
            if any(op.component is Component.ATTN_CORE for op in records)
            and not any(op.component is Component.MLP and op.macs for op in records)}
    astray: list[OpRecord] = []
    between: list[OpRecord] = []
    convolving = False  # a convolution between the blocks: a convolutional block, not an MLP
    previous = None
    for op in forward:
        if op.block is None:
            if previous in bare and op.macs and op.component in (Component.CONV, Component.HEAD):
                between.append(op)
                convolving = convolving or op.kind is OpKind.CONV
        else:
            if op.block != previous and op.block in bare and not convolving:
                astray.extend(between)
            if op.block != previous:
                between, convolving = [], False
            previous = op.block
    if not astray:
        return []
    return [_warning("feed-forwards outside blocks", astray,
                     "in conv / head, weighted and in no block, between blocks with a core "
                     "and no mlp")]


RULES = (attention_outside_core, projections_without_core, projections_out_of_order,
         patch_embed_inside_blocks, patch_embed_with_blocks, components_without_blocks)


def self_checks(ops: Sequence[OpRecord], params: Sequence[ParamRecord] = (),
                trace: Trace | None = None, origins: Sequence[int] | None = None) -> list[str]:
    """One warning per failed rule (see the module docstring); empty when all pass. The rules
    on ``params`` (:func:`module_in_two_components`, the checks of meaning) need them, those
    on the weights records read the ``trace`` (:func:`weight_reads`, with ``origins``)."""
    reads, weights, gains = weight_reads(ops, params, trace, origins)
    return ([line for rule in RULES for line in rule(ops)]
            + macs_in_tokens(ops, reads if trace is not None else None)
            + module_in_two_components(ops, params)
            + weight_elsewhere(ops, params, reads) + weight_operand_in_tokens(params, weights)
            + norm_affine_elsewhere(params, gains)
            + same_computation_split_differently(ops, params, reads)
            + feed_forwards_outside_blocks(ops))
