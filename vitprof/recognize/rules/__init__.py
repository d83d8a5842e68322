"""The recognition rules as objects holding their code, by what they do: :mod:`.cores` find
attention cores and place their records, :mod:`.blocks` group records into blocks,
:mod:`.flow_checks` answer the data flow's questions (which parameter weights a product, which
add is a join), :mod:`.records` and :mod:`.positions` place records, :mod:`.params` place
parameters. :mod:`.registry` lists them all in the order they decide (the precedence);
:class:`~.base.RuleSet` says which are on."""
