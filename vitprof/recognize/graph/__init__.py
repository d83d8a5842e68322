"""The graph recognizer: components and blocks read from the data flow of a counted forward.

It is the one recognizer that decides (the tables, facts about the classes they detect, are
compared with it); it reads the :class:`~vitprof.count.trace.Trace` of the
run itself, never a name. This package is the machinery the rules of
:mod:`vitprof.recognize.rules` read, and decides nothing itself: :mod:`.flow` answers questions
about the data flow (consumers, residual joins), :mod:`.attention` holds a core and the walks
to its projections, :mod:`.fused` a projection shared out by columns, :mod:`.blocks` the module
tree's containers and the spans of a flat forward, :mod:`.ops` the aten ops they name.
:mod:`.roles` runs the rules in their order and gives every record and parameter its component
and block (:func:`~.roles.graph_breakdown`).
"""
