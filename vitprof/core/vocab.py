"""Every closed set of words vitprof uses, one enum each, importable without torch.

A word has one meaning here: the parser offers an enum as ``choices=list(E)``, the API accepts
it (a :class:`Word` compares equal to its string, so ``"train"`` and ``Mode.TRAIN`` are the
same argument) and the JSON writes its value. ``repr`` of a word is its quoted value, so that
argparse's "invalid choice" message and every ``{value!r}`` read as they did for strings.
The study's own vocabularies (claims, verdicts of corrections) stay in :mod:`vitprof.study`.
"""

from __future__ import annotations

from enum import StrEnum


class Word(StrEnum):
    """A closed word: its string value, written as the string everywhere."""

    def __repr__(self) -> str:
        return repr(self.value)


# ---- the count: what is counted, where, and where it belongs ----


class Component(Word):
    """Where an operation or a parameter belongs in a Vision Transformer."""

    PATCH_EMBED = "patch_embed"
    CONV = "conv"  # convolutional blocks and stages of hybrids (MBConv, RepMixer, conv mixers)
    TOKENS = "tokens"  # class / distillation / register tokens and the position embedding
    ATTN_QKV = "attn_qkv"
    ATTN_CORE = "attn_core"  # QK^T, softmax, AV, or one fused scaled-dot-product attention
    ATTN_PROJ = "attn_proj"
    MLP = "mlp"
    NORM = "norm"
    HEAD = "head"
    OTHER = "other"


class Phase(Word):
    """Which pass an operation ran in: the forward, or the backward of a training step."""

    FORWARD = "forward"
    BACKWARD = "backward"


class OpKind(Word):
    """What an aten operation is, as its formula's registration says
    (:func:`vitprof.count.formulas.register`): the recognizer, the self-checks and the peers ask
    a record for its kind, never its op name. A gradient operation has the kind of its forward
    (``convolution_backward`` is a convolution); an operation registered without a kind is
    ``other``."""

    PRODUCT = "product"  # a matrix product: mm, bmm, addmm... (MACs)
    CONV = "conv"  # a convolution, transposed or grouped
    ATTENTION = "attention"  # one fused attention core: scaled-dot-product kernels, flex_attention
    MULTI_HEAD_ATTENTION = "multi_head_attention"  # a whole attention module: projections, core
    NORM = "norm"  # a normalisation by the data's statistics: layer, group, batch, RMS norm
    VECTOR_NORM = "vector_norm"  # the norm of a vector (F.normalize's denominator)
    POOL = "pool"  # a pooling window: max or average, fixed or adaptive
    ELEMENTWISE = "elementwise"  # per-element work: arithmetic, activations, reductions, resampling
    OTHER = "other"  # registered without a kind


class Mode(Word):
    """What is counted (and what ``vitprof memory`` steps): one inference forward, or a
    training step (forward and backward)."""

    INFERENCE = "inference"
    TRAIN = "train"


class Recognizer(Word):
    """Who names the components: ``auto`` (the graph, compared with the table that detects the
    model if one does), ``graph`` (roles read from the data flow), ``tables`` (a table, else
    the graph: to compare)."""

    AUTO = "auto"
    GRAPH = "graph"
    TABLES = "tables"


class EventKind(Word):
    """A module event of a counted run: the module is entered, or left."""

    ENTER = "enter"
    LEAVE = "leave"


class Device(Word):
    """Where a model runs: ``meta`` counts without allocating weights; the others are real."""

    META = "meta"
    CPU = "cpu"
    CUDA = "cuda"


REAL_DEVICES: tuple[Device, ...] = (Device.CPU, Device.CUDA)  # where timing runs


class Dtype(Word):
    """The torch dtype names a request runs in (and `profile` measures in)."""

    FLOAT32 = "float32"
    BFLOAT16 = "bfloat16"
    FLOAT16 = "float16"


class View(Word):
    """The breakdowns ``analyze --by`` offers."""

    COMPONENT = "component"
    BLOCK = "block"
    MODULE = "module"
    OP = "op"


class SweepAxis(Word):
    """The dimension ``sweep`` varies."""

    IMAGE_SIZE = "image_size"
    DEPTH = "depth"
    WIDTH = "width"


SWEEP_AXES: dict[str, str] = {  # an axis -> its label in tables and figures
    SweepAxis.IMAGE_SIZE: "image size (px)",
    SweepAxis.DEPTH: "depth (blocks)",
    SweepAxis.WIDTH: "width D",
}


class DiffScope(Word):
    """What a row of a diff compares: the total, a component, a block, or a block's
    component."""

    TOTAL = "total"
    COMPONENT = "component"
    BLOCK = "block"
    BLOCK_COMPONENT = "block_component"


# ---- `vitprof memory`: the optimizers whose state it models, the autocast dtypes, whose
# kernels and allocator it models (target), the attention kernels, and the training loop ----


class Optimizer(Word):
    SGD = "sgd"
    SGD_MOMENTUM = "sgd-momentum"
    ADAM = "adam"
    ADAMW = "adamw"


class AmpDtype(Word):
    BFLOAT16 = "bfloat16"
    FLOAT16 = "float16"


class MemoryTarget(Word):
    """Whose kernels and allocator a memory prediction models."""

    CUDA = "cuda"
    CPU = "cpu"


class AttentionPath(Word):
    """The attention kernel a memory step models; ``auto``: what torch dispatches to."""

    AUTO = "auto"
    MATH = "math"
    EFFICIENT = "efficient"
    FLASH = "flash"


class Loss(Word):
    """The loss a memory step takes of the output."""

    ONES = "ones"
    SUM = "sum"
    CROSS_ENTROPY = "cross-entropy"


class ZeroGrad(Word):
    """Where ``zero_grad()`` stands in the modelled training loop."""

    START = "start"
    BEFORE_BACKWARD = "before-backward"
    END = "end"


class Freeze(Word):
    """What of the model is frozen in the modelled training loop."""

    NONE = "none"
    BACKBONE = "backbone"


# ---- budgets (`vitprof check`) ----


class Strategy(Word):
    """The data-parallel strategy of each rank's step (:mod:`vitprof.measure.distributed`):
    none (one process), DDP, DDP with ZeroRedundancyOptimizer (zero1), FSDP2 per block and root
    without (zero2) and with (fsdp) resharding after the forward."""

    NONE = "none"
    DDP = "ddp"
    ZERO1 = "zero1"
    ZERO2 = "zero2"
    FSDP = "fsdp"


class Scope(Word):
    """What a limit measures: the whole model, one component, or every block."""

    MODEL = "model"
    COMPONENT = "component"
    BLOCKS = "blocks"


class Bound(Word):
    MAX = "max"
    MIN = "min"


class Metric(Word):
    PARAMS = "params"
    MACS = "macs"
    FLOPS = "flops"
    VECTOR_FLOPS = "vector_flops"
    SHARE = "share"  # share of the model's total MACs
    PARAMS_SHARE = "params_share"  # share of the model's total params
    COUNT = "count"  # number of blocks
    UNSUPPORTED_OPS = "unsupported_ops"  # op calls without a formula
    SELF_CHECKS = "self_checks"  # failed self-checks of the breakdown
    PEAK_BYTES = "peak_bytes"  # a training step's predicted peak (vitprof.memory), bytes


class Verdict(Word):
    PASS = "pass"
    FAIL = "fail"


class ValueKind(Word):
    """Type of a budget value (the value is how an error message names it)."""

    TEXT = "text"
    POSITIVE = "positive integer"
    IMAGE_SIZE = 'positive integer, "HxW" or [height, width]'
    DTYPE = f"dtype ({', '.join(Dtype)})"
    COUNT = "whole number >= 0"
    SHARE = "share in [0, 1]"
    RULES = "table of REGEX = COMPONENT"
    TABLE = "table"
    PERCENT = "percentage such as \"1%\""
    RECOGNIZER = "recognizer"  # one of Recognizer
    MEMORY = ("table of memory settings (optimizer, amp, checkpoint, target, attention, mode, "
              "loss, zero_grad, set_to_none, gradient_accumulation, freeze)")


# ---- tables: every column, and how its cells are written ----


class CellKind(Word):
    """How a column's cells are written (``None``: an empty cell)."""

    TEXT = "text"  # str(value); a total row leaves it empty (its first column says "total")
    COUNT = "count"  # an exact integer with thousands separators (a float: %g); totals sum it
    SIGNED = "signed"  # a change: +1,234 or -1,234, and 0 without a sign
    SHARE = "share"  # a fraction as a percentage, two decimals (0.0407 -> 4.07%); totals sum it
    PERCENT = "percent"  # a fraction as a percentage, one decimal (0.407 -> 40.7%)
    GIGA = "giga"  # a count in billions, three decimals (:func:`vitprof.render.document.giga`)
    MS = "ms"  # seconds written in milliseconds, three decimals
    RATE = "rate"  # per second, in billions (GFLOP/s), two decimals
    RATIO = "ratio"  # a plain ratio, two decimals
    MIB = "mib"  # bytes in MiB, two decimals


class Col(Word):
    """Every column name of every table; the value is the row key (and the CSV header)."""

    # analysis views (analyze, formula)
    COMPONENT = "component"
    BLOCK = "block"
    MODULE = "module"
    PLACED_BY = "placed_by"  # the recognition rule that placed a row's records
    EVIDENCE = "evidence"
    OP = "op"
    CALLS = "calls"
    PARAMS = "params"
    MACS = "macs"
    FLOPS = "flops"
    VECTOR_FLOPS = "vector_flops"
    MACS_SHARE = "macs_share"
    # a training step's phases
    FORWARD_MACS = "forward_macs"
    BACKWARD_MACS = "backward_macs"
    MACS_RATIO = "macs_ratio"
    FORWARD_VECTOR = "forward_vector_flops"
    BACKWARD_VECTOR = "backward_vector_flops"
    VECTOR_RATIO = "vector_flops_ratio"
    # profile (measured)
    SECONDS = "seconds"
    TIME_SHARE = "time_share"
    GFLOPS = "gflops"
    ACHIEVED = "achieved"
    PEAK_SHARE = "peak_share"
    INTENSITY = "intensity"
    PARAM_BYTES = "param_bytes"
    ACTIVATION_BYTES = "activation_bytes"
    SAVED_BYTES = "saved_bytes"
    # crosscheck
    PEER = "peer"
    REPORTED = "reported"
    UNIT = "unit"
    DELTA_MACS = "delta_macs"
    RESIDUAL_MACS = "residual_macs"
    DELTA_PARAMS = "delta_params"
    RESIDUAL_PARAMS = "residual_params"
    # diff
    ROW = "row"
    A = "a"
    B = "b"
    CHANGE = "change"
    RELATIVE = "relative"
    # check (budgets): limits and values are written in their check's own unit
    CHECK = "check"
    LIMIT = "limit"
    ACTUAL = "actual"
    HEADROOM = "headroom"
    VERDICT = "verdict"
    # models
    NAME = "name"
    FAMILY = "family"
    SIZE = "size"
    DESCRIPTION = "description"


# ---- the closed-form spec of a ViT (`vitprof formula`) ----


class HeadKind(Word):
    """What turns the last tokens into logits."""

    TOKEN = "token"  # class token -> Linear(D, K)
    GAP = "gap"  # mean of the patch tokens (prefix excluded) -> Linear(D, K)
    HIDDEN = "hidden"  # class token -> Linear(D, D) -> GELU -> Linear(D, K) (note 001's MLPHead)
    POOLER = "pooler"  # class token -> Linear(D, D) -> tanh -> Linear(D, K) (HF ViTModel pooler)
    DISTILLED = "distilled"  # class and distillation tokens -> two Linear(D, K), averaged (DeiT)


class FinalNorm(Word):
    """Where the LayerNorm after the last block runs."""

    TOKENS = "tokens"  # on every token, before pooling (torchvision, timm token pool, HF)
    POOLED = "pooled"  # on the pooled vector(s) only (timm fc_norm, note 001's MLPHead norm)
    NONE = "none"  # no final norm (timm final_norm=False)


class AttentionKind(Word):
    """What a block's attention core computes."""

    SOFTMAX = "softmax"  # softmax(q k^T / sqrt(d)) v per head
    LINEAR = "linear"  # note 002 3.2: relu(q) (relu(k)^T v) per head, no softmax, no scale


class AttentionImpl(Word):
    """How softmax attention is written; it changes vector FLOPs and one attribution only."""

    SDPA = "sdpa"  # F.scaled_dot_product_attention: scale 1 + softmax 5 per score
    SCALED_SCORES = "scaled_scores"  # softmax((q @ k^T) * scale) @ v: the same 6 per score
    SCALED_QUERY = "scaled_query"  # softmax((q * scale) @ k^T) @ v: 1 per q element + 5 per score
    MHA_WEIGHTS = "mha_weights"  # nn.MultiheadAttention, need_weights=True: as scaled_query, then
    # the weights' mean over heads (1 per score)
