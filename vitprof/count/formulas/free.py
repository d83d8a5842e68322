"""The operations known to cost nothing: they move, reshape, select or allocate data and do no
arithmetic. An operation neither here nor in the registry is decomposed, or else reported as
unsupported; it is never silently zero."""

from __future__ import annotations

from typing import Any

import torch

FREE_OP_NAMES: tuple[str, ...] = (
    "view", "_unsafe_view", "reshape", "t", "transpose", "permute", "expand", "unsqueeze",
    "squeeze", "flatten", "clone", "copy_", "_to_copy", "slice", "select", "index",
    "index_select", "gather", "cat", "stack", "split", "split_with_sizes", "chunk",
    "unbind", "narrow", "as_strided", "alias", "detach", "lift_fresh", "lift_fresh_copy",
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "new_zeros",
    "new_ones", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like", "fill",
    "fill_", "zero_", "arange", "scalar_tensor", "masked_fill", "where", "topk", "sort",
    "argmax", "argmin", "im2col", "repeat", "roll", "flip", "constant_pad_nd", "embedding",
    "dropout", "_unsafe_index", "_assert_tensor_metadata", "_local_scalar_dense",
    "_assert_async",
    "linspace", "unfold", "movedim", "contiguous", "_reshape_alias", "unsafe_split",
    # complex numbers as views of (real, imaginary) pairs, a lazy conjugate, and the packing
    # of two real tensors into one complex one (rotary embeddings in complex numbers)
    "view_as_real", "view_as_complex", "_conj", "complex",
    "bernoulli_", "uniform_", "normal_", "erfinv_",
    "as_strided_", "squeeze_", "unsqueeze_", "transpose_", "t_",
    "rand", "rand_like", "randn", "randn_like", "randint", "randint_like", "randperm",
    "multinomial",  # indices drawn by the given weights (a random masking's choice of tokens)
    "upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d",
    "_upsample_nearest_exact1d", "_upsample_nearest_exact2d", "_upsample_nearest_exact3d",
    # channels moved to space and back (a sub-pixel upsampling), channels interleaved
    "pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "native_channel_shuffle",
    # gradients that only move data: a zero tensor with the gradient copied into a slice of it
    "select_backward", "slice_backward", "diagonal_backward", "unfold_backward",
    "as_strided_scatter", "slice_scatter", "select_scatter",
    # masks made or applied (an identity, a triangle kept, masked elements overwritten), a
    # diagonal viewed, values written at indices: they select or place, add nothing
    "eye", "tril", "triu", "tril_", "triu_", "masked_fill_", "diagonal", "index_put",
    "index_put_",
)

FREE_OPS: frozenset[Any] = frozenset(
    getattr(torch.ops.aten, name) for name in FREE_OP_NAMES if hasattr(torch.ops.aten, name)
) | {torch.ops.prim.device}  # a tensor's device, asked below a dispatch mode (fake tensors)
