"""Recognition: what the records and parameters of a counted run are (their components and
blocks, the rule that placed each), read from the data flow above ``count`` and ``models``;
the self-checks of that meaning."""
