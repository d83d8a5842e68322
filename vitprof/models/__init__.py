"""Models: the zoo's registry (:mod:`.zoo`) over the families' entries (:mod:`.family`, read
without torch), reading a model's spec (:mod:`.spec_inference`), the closed-form counts
(:mod:`.closed_form`, its vocabularies in :mod:`vitprof.core.vocab`), deploy-time
reparameterization (:mod:`.deploy`), the reference ViT and the notes' hand-written models
(:mod:`.notes`).
"""
