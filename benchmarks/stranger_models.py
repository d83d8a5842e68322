"""Models from packages the per-rank memory grid had not run, built as a user would write them
in a ``FILE.py:FACTORY`` (``vitprof memory benchmarks/stranger_models.py:vit_pytorch_tiny``), and
built the same way by ``benchmarks/distributed_measured.py`` (which loads this file by path).

* ``vit_pytorch_tiny``: vit-pytorch's ``ViT`` at DeiT-Ti's shape (224 x 224, patch 16, width
  192, depth 12, 3 heads of 64, MLP 768, 1,000 classes, class-token pooling); its blocks are
  ``transformer.layers.N``, each a ``ModuleList`` of an attention and a feed-forward module
  (the ``ModuleList`` itself never runs a forward).
"""

from __future__ import annotations

from torch import nn


def vit_pytorch_tiny() -> nn.Module:
    """vit-pytorch's ViT at DeiT-Ti's shape (see the module)."""
    from vit_pytorch import ViT  # type: ignore[import-untyped]

    return ViT(image_size=224, patch_size=16, num_classes=1000, dim=192, depth=12, heads=3,
               mlp_dim=768, dim_head=64)
