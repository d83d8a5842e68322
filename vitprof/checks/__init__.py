"""Checks of counted results: budgets and baselines (``vitprof check``), ``vitprof diff`` and
crosschecks against peers and published figures (``vitprof crosscheck``). Sweeps are analyses
along one axis, :mod:`vitprof.sweep` (``vitprof.checks.sweep`` re-exports it). The notes'
corrections and the model pages' check (``report --check``) are the study's,
:mod:`vitprof.study`.
"""
