"""The training-memory estimates vitprof is compared with in reports/memory.md. They are the
published rules, applied as their authors state them, for comparison only (not predictions of
vitprof's): each function's docstring gives its source.

* :func:`korthikanti_bytes`: the activation memory of a transformer layer, 34sbh + 5as^2b bytes
  (16-bit activations), applied to every attention layer of a model at the shape its input has.
* :func:`accelerate_bytes`: ``accelerate estimate-memory``'s "Training using Adam" column.
* :func:`zero2_bytes`, :func:`zero3_bytes`: DeepSpeed's model-state estimators on one GPU
  without offload.

None of them counts what a ViT's training step holds beyond its own scope: the parameter-only
estimators hold no activation, the formula holds no parameter, gradient or optimizer state.

Run as a command, it prints every estimate for each model (any name vitprof builds, on meta)
at the input shape given after ``=``: a ``== MODEL`` line, each attention layer's shape, then
the bytes of each estimator (accelerate's only where accelerate is installed)::

    python benchmarks/memory_baselines.py timm:deit_tiny_patch16_224=128,3,224,224 [MODEL=SHAPE ...]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class LayerShape:
    """An attention layer's input as the formula reads it: ``s`` tokens per sequence, ``b``
    sequences (a Swin window is a sequence: b = batch x windows), ``h`` the hidden width, ``a``
    the heads."""

    s: int
    b: int
    h: int
    a: int


def layer_activation_bytes(shape: LayerShape) -> int:
    """34sbh + 5as^2b: the bytes one transformer layer keeps for its backward, from V. A.
    Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models" (MLSys
    2023, arXiv:2205.05198), section 4.1, without tensor or sequence parallelism. s: sequence
    length, b: micro-batch size, h: hidden size, a: attention heads. It assumes 16-bit
    activations (2 bytes an element) and 1-byte dropout masks, a 4h MLP, and counts the layer's
    attention block (11sbh + 5as^2b) and MLP block (19sbh) and its two LayerNorms (4sbh);
    nothing outside the layers (embedding, head, loss) and no parameter."""
    s, b, h, a = shape.s, shape.b, shape.h, shape.a
    return 34 * s * b * h + 5 * a * s * s * b


def attention_shapes(model: nn.Module, example: torch.Tensor) -> list[LayerShape]:
    """The input shape ``(b, s, h)`` of every attention layer, in run order: the modules with
    an integer ``num_heads`` none of whose submodules has one (torchvision's encoder block has
    one, and so has the ``nn.MultiheadAttention`` inside it: the inner one is the layer), read by
    forward hooks in one forward of ``model`` on the meta device (nothing is allocated;
    ``model`` is left on meta)."""
    shapes: list[LayerShape] = []

    def hook(module: nn.Module, args: tuple[torch.Tensor, ...]) -> None:
        b, s, h = args[0].shape
        shapes.append(LayerShape(s, b, h, int(module.num_heads)))  # type: ignore[arg-type]

    def heads(module: nn.Module) -> bool:
        return isinstance(getattr(module, "num_heads", None), int)

    model = model.to("meta")
    layers = [m for m in model.modules()
              if heads(m) and not any(heads(d) for d in m.modules() if d is not m)]
    handles = [m.register_forward_pre_hook(hook) for m in layers]
    try:
        with torch.no_grad():
            model(example.to("meta"))
    finally:
        for handle in handles:
            handle.remove()
    return shapes


def korthikanti_bytes(shapes: list[LayerShape]) -> int:
    """The formula summed over the model's attention layers (one transformer layer each)."""
    return sum(layer_activation_bytes(shape) for shape in shapes)


def accelerate_bytes(model: nn.Module, precision: str) -> int:
    """What ``accelerate estimate-memory`` prints as "Training using Adam" for ``precision``
    (``float32``, ``float16`` or ``bfloat16``), computed by accelerate's own functions
    (accelerate.utils.calculate_maximum_sizes and
    accelerate.commands.estimate.estimate_training_usage, accelerate 1.x): with T the bytes of
    the model's parameters and buffers as they are (float32 here), the largest of model T,
    gradients T, Adam's state 2T and the step 4T in float32 (= 4T); in mixed precision the
    largest of T, 1.5T, 2T and 2T (= 2T). At batch 1 in its words, and without any activation."""
    from accelerate.commands.estimate import estimate_training_usage
    from accelerate.utils import calculate_maximum_sizes

    total, _ = calculate_maximum_sizes(model)
    return int(max(estimate_training_usage(total, precision).values()))


def model_params(model: nn.Module) -> tuple[int, int]:
    """DeepSpeed's ``model_to_params``: the parameters (a shared one once) and the largest
    number held directly by one module (its own, not its children's)."""
    total = sum({id(p): p.numel() for p in model.parameters()}.values())
    largest = max(sum(p.numel() for p in m.parameters(recurse=False)) for m in model.modules())
    return total, largest


def zero2_bytes(params: int) -> int:
    """DeepSpeed's ``estimate_zero2_model_states_mem_needs`` per GPU on one GPU without CPU
    offload: 4 x params (16-bit parameters and gradients) + 16 x params / GPUs (float32 master
    weights, Adam's two moments and float32 gradients, partitioned). As documented in DeepSpeed's
    "Memory Requirements" page (deepspeed.readthedocs.io, ZeRO-2); model states only."""
    gpus = 1
    return 4 * params + 16 * params // gpus


def zero3_bytes(params: int, largest_layer: int) -> int:
    """DeepSpeed's ``estimate_zero3_model_states_mem_needs`` per GPU on one GPU without offload:
    4 x the largest layer's parameters (gathered 16-bit parameters and gradients) + 18 x params
    / GPUs. As documented in DeepSpeed's "Memory Requirements" page (ZeRO-3); model states
    only."""
    gpus = 1
    return 4 * largest_layer + 18 * params // gpus


def estimates(model: nn.Module, example: torch.Tensor) -> list[str]:
    """The lines the command prints for ``model`` fed ``example``: one per attention layer
    (``layer: s=197 b=8 h=192 a=3``), then ``name: bytes`` per estimator."""
    total, largest = model_params(model)
    shapes = attention_shapes(model, example)
    lines = [f"layer: s={x.s} b={x.b} h={x.h} a={x.a}" for x in shapes]
    lines += [f"34sbh + 5as2b: {korthikanti_bytes(shapes)}",
              f"deepspeed params: {total} (largest layer {largest})",
              f"zero2: {zero2_bytes(total)}", f"zero3: {zero3_bytes(total, largest)}"]
    try:
        lines += [f"accelerate {p}: {accelerate_bytes(model, p)}" for p in ("float32", "bfloat16")]
    except ImportError as missing:
        lines.append(f"accelerate: not installed ({missing})")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    from vitprof.models.zoo import build

    parser = argparse.ArgumentParser(description="The published estimators on models.")
    parser.add_argument("subjects", nargs="+", metavar="MODEL=SHAPE",
                        help="any name vitprof builds (timm:NAME, path/to/file.py:factory) and "
                             "the example's shape, comma-separated: 8,3,224,224")
    for subject in parser.parse_args(argv).subjects:
        name, _, shape = subject.rpartition("=")
        example = torch.zeros([int(n) for n in shape.split(",")], device="meta")
        print("\n".join([f"== {name}", *estimates(build(name).module, example)]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
