"""Checks of counted results: budgets and baselines, ``diff``, crosschecks against peers and
published figures, the corrections to the source notes, and sweeps along one axis.
"""
