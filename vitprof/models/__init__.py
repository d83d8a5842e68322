"""Models: the zoo's entries as data (:mod:`.entries`, no torch) and building them (:mod:`.zoo`),
the spec's vocabularies (:mod:`.spec_kinds`, no torch), reading a model's spec
(:mod:`.spec_inference`), the closed-form counts (:mod:`.closed_form`), deploy-time
reparameterization (:mod:`.deploy`), the reference ViT and the notes' hand-written models
(:mod:`.notes`).
"""
