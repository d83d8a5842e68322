"""Hand-written Vision Transformers transcribed from the project's source notes (``seeds/``).

Plain ``torch.nn`` modules with random initialisation, built to show that vitprof's counters
handle any hand-written ViT: :mod:`.note001` (ViT-B/16 from scratch), :mod:`.note002` (CIFAR-ViT,
its linear-attention and token-pruning variants) and :mod:`.note004` (timm-style ViT-B/16).
"""
