"""The unit tier's guard: no network connection and no program but this interpreter (tests/unit/conftest.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

# Programs a unit test may start: this interpreter, and the console scripts installed beside it
# (our own CLI, ruff), which run this interpreter too.
ALLOWED_PROGRAM_DIR = Path(sys.executable).parent


class ServerUseInUnitTier(AssertionError):
    """A unit test reached for a server or a program outside this interpreter."""


def allowed_program(argv: Any) -> bool:
    first = argv if isinstance(argv, (str, bytes, os.PathLike)) else next(iter(argv), "")
    program = Path(os.fsdecode(first))
    if program.name == Path(sys.executable).name or str(program) == sys.executable:
        return True
    return program.parent == ALLOWED_PROGRAM_DIR
