"""One module per sub-command; each has ``add_parser(subparsers)`` and sets ``run``."""
