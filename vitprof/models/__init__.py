"""Models: the zoo's registry (:mod:`.zoo`), reading a model's spec (:mod:`.spec_inference`), the
closed-form counts (:mod:`.closed_form`), deploy-time reparameterization (:mod:`.deploy`), the
reference ViT and the notes' hand-written models (:mod:`.notes`).
"""
