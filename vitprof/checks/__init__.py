"""Checks of counted results: budgets and baselines (``vitprof check``), ``vitprof diff`` and
crosschecks against peers and published figures (``vitprof crosscheck``); and sweeps along one
axis. The notes' corrections and the model pages' check (``report --check``) are the study's,
:mod:`vitprof.study`.
"""
