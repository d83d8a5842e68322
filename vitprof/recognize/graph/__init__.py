"""The graph recognizer: components and blocks read from the data flow of a counted forward.

It is the one recognizer that decides (the tables, facts about the classes they detect, are
compared with it); it reads the :class:`~vitprof.count.trace.Trace` of the
run itself, never a name. :mod:`.flow` answers questions about the data flow (consumers, residual
joins), :mod:`.attention` finds the attention cores and their projections, :mod:`.fused` finds the
projections computing q/k/v and something else at once, :mod:`.blocks` groups the cores into blocks,
:mod:`.roles` gives every record and parameter its component and block
(:func:`~.roles.graph_breakdown`), running the rules of :mod:`vitprof.recognize.rules`.
"""
