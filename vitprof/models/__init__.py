"""Models: the zoo's registry (:mod:`.zoo`) over the model libraries' entries (:mod:`.libraries`,
read without torch), reading a model's spec (:mod:`.spec_inference`), the closed-form counts
(:mod:`.closed_form`) and the spec's vocabularies (:mod:`.spec_kinds`, no torch), deploy-time
reparameterization (:mod:`.deploy`), the reference ViT and the notes' hand-written models
(:mod:`.notes`).
"""
