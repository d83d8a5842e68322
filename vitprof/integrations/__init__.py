"""Training frameworks' callbacks over one engine, :func:`vitprof.track`: PyTorch Lightning
(:mod:`vitprof.integrations.lightning`) and the Hugging Face ``Trainer``
(:mod:`vitprof.integrations.transformers`). Each module imports its framework when it is
imported, never ``import vitprof``; a framework that is not installed is one line saying which
extra to install. :mod:`vitprof.integrations.feeding` holds what both need: the model's inputs
read from a batch, or caught at the model's forward.
"""
