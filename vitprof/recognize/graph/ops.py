"""The aten ops the data-flow questions name: statistics and roots of a norm, divisions, the
adds of a residual or a bias, softmax. A leaf module: the flow and the rules it asks
(:mod:`vitprof.recognize.rules.flow_checks`) read it alike."""

MOMENTS = ("aten.mean", "aten.var", "aten.var_mean", "aten.std", "aten.std_mean")
ROOTS = ("aten.rsqrt", "aten.sqrt")
DIVIDES = ("aten.div", "aten.div_")
ADDS = ("aten.add", "aten.add_")  # the ops of a residual add
SOFTMAX = ("aten._softmax", "aten.softmax", "aten._safe_softmax")
