"""Reading back the results file a benchmark's ``--save-results`` wrote (JSON), for the page
its ``--from-results`` writes again without measuring: a file that is missing, no JSON, or
lacks one of the parts the script reads ends the run in one line (``SCRIPT: error: ...``,
exit code 2), never a traceback. Imports nothing of vitprof (the independent harness uses it).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def read_saved(path: Path, parts: Sequence[str], script: str) -> dict[str, Any]:
    """The results in ``path``, an object holding each of ``parts``; refused in one line on
    stderr naming ``script`` (exit code 2) otherwise."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        _refuse(script, path, str(error).splitlines()[0])
    missing = [part for part in parts if not isinstance(data, dict) or part not in data]
    if missing:
        _refuse(script, path, "no " + ", ".join(f'"{part}"' for part in missing))
    return data


def _refuse(script: str, path: Path, why: str) -> None:
    print(f"{script}: error: {path}: not a results file of --save-results ({why})",
          file=sys.stderr)
    raise SystemExit(2)
