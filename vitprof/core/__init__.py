"""The vocabulary every layer shares: components, phases and counts (:mod:`.records`), the one
user-error type (:mod:`.errors`), the notices a long run prints (:mod:`.progress`,
:mod:`.slow_notice`) and the choices command-line parsers offer (:mod:`.choices`). Nothing here
imports torch.
"""
