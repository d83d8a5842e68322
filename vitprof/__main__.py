"""``python -m vitprof``."""

import sys

from vitprof.cli.main import main

sys.exit(main())
