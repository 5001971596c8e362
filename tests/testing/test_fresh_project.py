"""Acceptance: a fresh project that follows the testing how-to's recipe
(docs/howto/testing.rst) runs a job in its own test suite (``manage.py test``) with no
Redis server anywhere: no ``REDIS_URL``, and no ``redis-server`` on its PATH."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SETTINGS = """
import django
import fakeredis

SECRET_KEY = "fresh"
USE_TZ = True
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth", "django_redislock",
                  "orders"]
if django.VERSION < (6, 0):
    INSTALLED_APPS.insert(0, "django_tasks")  # the Tasks backport (README: Install)
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": "db.sqlite3"}}

# The how-to's test settings, as written there:
CACHES = {
    "default": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": "redis://localhost:6379/0",  # never connected to
        "OPTIONS": {
            "CONNECTION_POOL_KWARGS": {"connection_class": fakeredis.FakeRedisConnection},
        },
    },
}
REDISLOCK = {"CACHE": "default"}
"""

TASKS = """
try:
    from django.tasks import task
except ImportError:  # Django 5.2: the backport
    from django_tasks import task


@task()
def total(prices: list[int]) -> int:
    return sum(prices)
"""

TESTS = """
from django.test import TestCase, override_settings

from django_redislock import Lock, get_queue
from django_redislock.test import isolated_keys, run_jobs


@isolated_keys()
class OrderTests(TestCase):
    def test_a_queued_job_runs(self):
        job = get_queue().enqueue("orders.tasks.total", args=[[3, 4]], delay=900)
        ran = run_jobs(scheduled=True)
        self.assertEqual([(j.id, j.state, j.result) for j in ran.jobs], [(job.id, "done", "7")])
        self.assertEqual(get_queue().get(job.id).result, "7")

    def test_a_lock(self):
        with Lock("order:1", ttl=5) as lock:
            self.assertTrue(lock.owned())

    @override_settings(REDISLOCK={"CACHE": "default", "QUEUES": {"default": {"EAGER": True}}})
    def test_eager_mode(self):
        job = get_queue().enqueue("orders.tasks.total", args=[[1, 2]])
        self.assertEqual((job.state, job.result), ("done", "3"))
"""


def test_a_fresh_project_runs_a_job_in_its_tests_without_redis(tmp_path: Path) -> None:
    (tmp_path / "fresh").mkdir()
    (tmp_path / "fresh" / "__init__.py").write_text("")
    (tmp_path / "fresh" / "settings.py").write_text(SETTINGS)
    (tmp_path / "orders").mkdir()
    (tmp_path / "orders" / "__init__.py").write_text("")
    (tmp_path / "orders" / "tasks.py").write_text(TASKS)
    (tmp_path / "orders" / "tests.py").write_text(TESTS)
    (tmp_path / "manage.py").write_text(
        textwrap.dedent("""
        import os, sys
        from django.core.management import execute_from_command_line
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fresh.settings")
        execute_from_command_line(sys.argv)
        """)
    )
    empty = tmp_path / "bin"  # PATH: nothing, so no redis-server to be found or started
    empty.mkdir()
    env = {"PATH": str(empty), "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)}
    assert "REDIS_URL" not in env
    done = subprocess.run(
        [sys.executable, "manage.py", "test", "orders", "-v", "2"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Ran 3 tests" in done.stderr
    assert "OK" in done.stderr
    assert not os.path.exists(tmp_path / "dump.rdb")  # no server wrote anything here


def test_the_fresh_project_uses_the_readme_recipe_as_written() -> None:
    """The settings and test code above are the README's, not a variant of them: each
    recipe line is in the testing how-to (docs/howto/testing.rst)."""
    section = (ROOT / "docs" / "howto" / "testing.rst").read_text()
    recipe = SETTINGS.split("# The how-to's test settings, as written there:\n", 1)[1]
    readme_lines = {line.strip() for line in section.splitlines()}
    for line in recipe.splitlines():
        assert line.strip() in readme_lines, f"not in the README's recipe: {line!r}"
    for used in ("@isolated_keys()", "run_jobs(scheduled=True)", '"EAGER": True'):
        assert used in section
