"""Closed vocabularies that command-line parsers offer as choices, importable without torch.

``vitprof --help``, ``vitprof X --help`` and usage errors build every command's parser; the
choices they list live here (or in another module that imports nothing heavy, such as the format
registry :mod:`vitprof.render.formats`) so that building a parser imports neither torch nor
pandas nor matplotlib. The modules that act on these values
import them from here; each list is written once.
"""

from __future__ import annotations

PROFILE_DTYPES = ("float32", "bfloat16", "float16")  # torch dtype names `profile` measures in
# how a breakdown is recognized: auto (a table if it detects the model and its breakdown is
# clean, else the graph), graph (roles read from the data flow), tables (a table, else generic)
RECOGNIZERS = ("auto", "graph", "tables")
VIEWS = ("component", "block", "module", "op")  # the breakdowns `analyze --by` offers
# the peers of `vitprof crosscheck`, in the order of their rows; each name is a row of
# vitprof.checks.crosscheck.run.TABLE, which holds its unit and adapter (a test checks they agree)
CROSSCHECK_PEERS = (
    "closed-form", "fvcore", "torchinfo", "flopcounter-meta", "flopcounter-cpu",
    "ptflops-pytorch", "ptflops-aten", "calflops", "deepspeed", "published", "timm-published",
)
SWEEP_AXES: dict[str, str] = {  # the dimension `sweep` varies -> its label in tables and figures
    "image_size": "image size (px)",
    "depth": "depth (blocks)",
    "width": "width D",
}
