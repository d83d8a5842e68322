"""The ``vitprof`` command line: :mod:`.main` (argument parsing, one-line user errors) and one
module per command in :mod:`.commands`.
"""
