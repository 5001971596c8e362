"""Where tests leave what a person may want to look at afterwards (screenshots): the
directory ``REDISLOCK_ARTIFACTS`` names, else ``.artifacts/`` at the project's root. It is
untracked (``.gitignore``): a test run never writes into a tracked file."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def artifacts() -> Path:
    where = Path(os.environ.get("REDISLOCK_ARTIFACTS") or ROOT / ".artifacts")
    where.mkdir(parents=True, exist_ok=True)
    return where
