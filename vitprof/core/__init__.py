"""The vocabulary every layer shares: components, phases and counts (:mod:`.records`), the one
user-error type (:mod:`.errors`) and the notices a long run prints (:mod:`.progress`,
:mod:`.slow_notice`). Nothing here imports torch.
"""
