"""The closed vocabularies of a :class:`~vitprof.models.closed_form.ViTSpec`: head, final norm,
attention kind and its implementation. They import nothing heavy, so that ``vitprof formula``
can offer them as choices without importing torch; :mod:`vitprof.models.closed_form` re-exports
them.
"""

from __future__ import annotations

from enum import StrEnum


class HeadKind(StrEnum):
    """What turns the last tokens into logits."""

    TOKEN = "token"  # class token -> Linear(D, K)
    GAP = "gap"  # mean of the patch tokens (prefix excluded) -> Linear(D, K)
    HIDDEN = "hidden"  # class token -> Linear(D, D) -> GELU -> Linear(D, K) (note 001's MLPHead)
    POOLER = "pooler"  # class token -> Linear(D, D) -> tanh -> Linear(D, K) (HF ViTModel pooler)
    DISTILLED = "distilled"  # class and distillation tokens -> two Linear(D, K), averaged (DeiT)


class FinalNorm(StrEnum):
    """Where the LayerNorm after the last block runs."""

    TOKENS = "tokens"  # on every token, before pooling (torchvision, timm token pool, HF)
    POOLED = "pooled"  # on the pooled vector(s) only (timm fc_norm, note 001's MLPHead norm)
    NONE = "none"  # no final norm (timm final_norm=False)


class AttentionKind(StrEnum):
    """What a block's attention core computes."""

    SOFTMAX = "softmax"  # softmax(q k^T / sqrt(d)) v per head
    LINEAR = "linear"  # note 002 3.2: relu(q) (relu(k)^T v) per head, no softmax, no scale


class AttentionImpl(StrEnum):
    """How softmax attention is written; it changes vector FLOPs and one attribution only."""

    SDPA = "sdpa"  # F.scaled_dot_product_attention: scale 1 + softmax 5 per score
    SCALED_SCORES = "scaled_scores"  # softmax((q @ k^T) * scale) @ v: the same 6 per score
    SCALED_QUERY = "scaled_query"  # softmax((q * scale) @ k^T) @ v: 1 per q element + 5 per score
    MHA_WEIGHTS = "mha_weights"  # nn.MultiheadAttention, need_weights=True: as scaled_query, then
    # the weights' mean over heads (1 per score)
