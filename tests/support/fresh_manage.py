"""``manage.py`` run in a fresh Python process on ``tests.settings``, as from a terminal: its
exit status and its stderr, with nothing imported before it but what Django and the app
import themselves."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import json, os, sys
import django
from django.conf import settings

django.setup()
for name, value in json.loads(os.environ["REDISLOCK_TEST_OVERRIDES"]).items():
    setattr(settings, name, value)  # after setup, as a test's ``settings`` fixture does
from django.core.management import execute_from_command_line

execute_from_command_line(["manage.py", *sys.argv[1:]])
"""


def run_manage(*argv: str, **overrides: Any) -> subprocess.CompletedProcess[str]:
    """``manage.py ARGV`` with each of ``overrides`` (JSON values) set on the settings."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "REDISLOCK_TEST_OVERRIDES": json.dumps(overrides),
    }
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
