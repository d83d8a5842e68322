"""``python -m vitprof``."""

import sys

from vitprof.cli import main

sys.exit(main())
