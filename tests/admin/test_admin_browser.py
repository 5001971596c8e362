"""The admin pages in a real browser: Playwright drives the system Chromium against a live
Django server, a real redis-server, a lock held and awaited by other processes and a
``manage.py run_queue_worker`` process. Each run takes the README's screenshot (the locks
tab), one of a job in full and one of dead jobs checked for a bulk retry: into the tests'
artifacts (``.artifacts/``, untracked), or into ``docs/`` to refresh them
(``REDISLOCK_SCREENSHOTS=docs``); a test run never rewrites tracked files by itself.

Nothing skips: without Chromium or Playwright the tests fail and say how to install them
(``scripts/setup.sh`` does both, Chromium from apt when run as root)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.contrib.admin.models import CHANGE, DELETION, LogEntry
from django.contrib.staticfiles.handlers import StaticFilesHandler
from django.test.testcases import LiveServerThread

from django_redislock import Lock, get_queue, get_redis
from tests.support.artifacts import artifacts
from tests.support.fixtures import Backend, Processes

from ..tasks import DONE

try:
    from playwright.sync_api import Locator, Page, ViewportSize, expect, sync_playwright
except ImportError as missing:  # the ``page`` fixture fails with it, saying what to do
    PLAYWRIGHT_MISSING: ImportError | None = missing
else:
    PLAYWRIGHT_MISSING = None

pytestmark = [pytest.mark.processes, pytest.mark.timeout(90)]

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOT = "admin.png"  # the README's
JOB_SCREENSHOT = "admin-job.png"  # a finished job in full
DEAD_SCREENSHOT = "admin-dead.png"  # dead jobs, checked for a bulk retry
VIEWPORT: ViewportSize = {"width": 1280, "height": 800}
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
# Long enough for another process to act and for the pages' own 5 s auto-refresh to show it.
WAIT_MS = 20_000
PASSWORD = "correct horse battery staple"
# A worker of this queue heartbeats every second, so the Workers page is soon up to date.
QUEUES = {"default": {"LEASE": 3}}
LOCK = "flash-sale:42"
JOB = "close:1042"


# --- the server, the browser and the other processes ---------------------------------------


@pytest.fixture(scope="module")
def shots() -> Path:
    """Where screenshots go: ``REDISLOCK_SCREENSHOTS`` (``docs`` refreshes the README's,
    relative to the project), else the tests' artifacts (never a tracked file)."""
    wanted = os.environ.get("REDISLOCK_SCREENSHOTS")
    if not wanted:
        return artifacts()
    where = ROOT / wanted
    where.mkdir(parents=True, exist_ok=True)
    return where


@pytest.fixture
def server(redis_backend: Backend, settings: Any, transactional_db: None) -> Iterator[str]:
    """A live server of the test settings with the pages' CSS, sharing the test database.

    Not pytest-django's ``live_server``: that one is started once per session with the
    settings of the moment, and ``tests/settings.py`` has no STATIC_URL, without which its
    static files handler fails every request."""
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": QUEUES}
    settings.STATIC_URL = "/static/"
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "localhost"]
    thread = LiveServerThread("localhost", StaticFilesHandler, connections_override={})
    thread.daemon = True
    thread.start()
    thread.is_ready.wait()
    if thread.error:
        raise thread.error
    try:
        yield f"http://localhost:{thread.port}"
    finally:
        thread.terminate()


@pytest.fixture
def page(monkeypatch: pytest.MonkeyPatch) -> Iterator[Page]:
    if PLAYWRIGHT_MISSING is not None:
        pytest.fail(
            f"Playwright is not installed ({PLAYWRIGHT_MISSING}): pip install -e '.[test]' "
            "(scripts/setup.sh does it).",
            pytrace=False,
        )
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.fail(
            "No chromium on PATH: the admin's browser test drives the system Chromium, never "
            "a downloaded one. Install it with `apt-get install chromium` (scripts/setup.sh "
            "does it when run as root).",
            pytrace=False,
        )
    # Playwright's sync API keeps an event loop running on this thread, and Django refuses
    # ORM calls from a thread with a running loop; the test's own queries are plain sync code.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    expect.set_options(timeout=WAIT_MS)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium, headless=True, args=CHROMIUM_ARGS
        )
        try:
            tab = browser.new_context(viewport=VIEWPORT).new_page()
            tab.set_default_timeout(WAIT_MS)
            yield tab
        finally:
            browser.close()


def hold(name: str, reports: Any, finish: Any) -> None:
    """Another process holding the lock, stuck as far as anyone can tell: it never releases."""
    lock = Lock(name, ttl=60, fencing=True)
    if lock.acquire():
        reports.put(("held", os.getpid(), lock.fence, time.time()))
        finish.wait(60)


def wait_for(name: str, reports: Any, finish: Any) -> None:
    lock = Lock(name, ttl=60, fencing=True)
    acquired = lock.acquire(timeout=40)
    reports.put(("acquired" if acquired else "timed out", os.getpid(), lock.fence, time.time()))
    if acquired:
        finish.wait(60)
        lock.release()


@dataclass
class Contested:
    holder: int
    fence: int
    waiter: int
    reports: Any
    finish: Any


@pytest.fixture
def contested(redis_backend: Backend, processes: Processes) -> Contested:
    """LOCK held by one process and awaited by another, both forked before the browser and
    the server start (a fork would share their pipes and sockets)."""
    reports, finish = processes.queue(), processes.event()
    processes.start(hold, LOCK, reports, finish)
    status, holder, fence, _ = reports.get(timeout=10)
    assert status == "held"
    waiter = processes.start(wait_for, LOCK, reports, finish)
    assert waiter.pid
    return Contested(holder, fence, waiter.pid, reports, finish)


class WorkerProcess:
    """``manage.py run_queue_worker`` in a process of its own, on the configured Redis."""

    def __init__(self, redislock: dict[str, Any], log: Path) -> None:
        self.log = log
        code = (
            "import django, json, os; django.setup(); from django.conf import settings;"
            "settings.REDISLOCK = json.loads(os.environ['REDISLOCK_TEST_SETTINGS']);"
            "from django.core.management import execute_from_command_line;"
            "execute_from_command_line(['manage.py', 'run_queue_worker', '--queue', 'default'])"
        )
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "REDISLOCK_TEST_SETTINGS": json.dumps(redislock),
            "PYTHONUNBUFFERED": "1",
        }
        with log.open("w") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-c", code],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        self.pid = self.process.pid

    def stop(self) -> int:
        """SIGTERM (a graceful drain); SIGKILL when it does not exit in time."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def output(self) -> str:
        return self.log.read_text()


@pytest.fixture
def worker(redis_backend: Backend, settings: Any, tmp_path: Path) -> Iterator[WorkerProcess]:
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": QUEUES}
    process = WorkerProcess(settings.REDISLOCK, tmp_path / "worker.log")
    try:
        yield process
    finally:
        process.stop()


# --- what a user does and sees -----------------------------------------------------------


def log_in(page: Page, server: str, django_user_model: Any) -> None:
    """Through the admin's login form, as a superuser made here; a wrong password first."""
    django_user_model.objects.create_superuser("operator", "operator@example.com", PASSWORD)
    page.goto(f"{server}/admin/")
    expect(page).to_have_url(re.compile(r"/admin/login/\?next=/admin/$"))
    page.get_by_label("Username").fill("operator")
    page.get_by_label("Password").fill("not the password")
    page.get_by_role("button", name="Log in").click()
    expect(page.locator(".errornote")).to_contain_text("Please enter the correct username")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Site administration")).to_be_visible()
    page.get_by_role("link", name="Dashboard", exact=True).click()
    expect(page.get_by_role("heading", name="Queues")).to_be_visible()


def tab(page: Page, name: str) -> Locator:
    return page.locator(".redislock-tabs").get_by_role("link", name=name, exact=True)


def message(page: Page) -> Locator:
    return page.locator(".messagelist")


def png_size(path: Path) -> tuple[int, int]:
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return int.from_bytes(header[16:20], "big"), int.from_bytes(header[20:24], "big")


def test_force_release_hands_a_lock_held_by_another_process_to_its_waiter(
    contested: Contested,
    server: str,
    page: Page,
    processes: Processes,
    django_user_model: Any,
    shots: Path,
) -> None:
    others = [Lock("points:user:7", ttl=45, fencing=True), Lock("close-unpaid:1042", ttl=900)]
    for lock in others:  # company for the screenshot
        assert lock.acquire()
    try:
        log_in(page, server, django_user_model)
        tab(page, "Locks").click()
        expect(page.locator(".paginator").first).to_have_text("3 locks held")
        row = page.locator("#locks tbody tr").filter(has=page.locator("th", has_text=LOCK))
        owner, _, ttl_left, fence, waiters = (row.locator("td").nth(i) for i in range(5))
        expect(owner).to_have_text(f"{socket.gethostname()} (pid {contested.holder})")
        expect(ttl_left).to_have_text(re.compile(r"^([1-5]\d s|1 min)$"))  # of its 60 s
        expect(fence).to_have_text(str(contested.fence))
        expect(waiters).to_have_text("1")  # the other process, queued on the lock
        page.screenshot(path=shots / SCREENSHOT)

        row.get_by_role("link", name="Force release").click()
        expect(page.locator("#content-main")).to_contain_text(
            f"Force-release lock “{LOCK}”, held by {socket.gethostname()} (pid {contested.holder})"
        )
        expect(page.locator("#content-main")).to_contain_text("1 waiting, the first gets it")
        released_at = time.time()
        page.get_by_role("button", name="Yes, force release").click()

        expect(message(page)).to_have_text(f"Lock “{LOCK}” was force-released.")
        status, pid, new_fence, acquired_at = contested.reports.get(timeout=10)
        assert (status, pid) == ("acquired", contested.waiter)
        # Woken by the release itself, long before the holder's 60 s TTL would have run out.
        assert released_at < acquired_at < released_at + 5
        assert new_fence > contested.fence
        expect(owner).to_have_text(f"{socket.gethostname()} (pid {contested.waiter})")
        expect(fence).to_have_text(str(new_fence))
        expect(waiters).to_have_text("0")

        entry = LogEntry.objects.get()
        assert (entry.user.get_username(), entry.action_flag, entry.object_repr) == (
            "operator",
            DELETION,
            f"lock {LOCK}",
        )
        page.goto(f"{server}/admin/")
        expect(page.locator("#recent-actions-module")).to_contain_text(f"lock {LOCK}")
    finally:
        for lock in others:
            if lock.owned():
                lock.release()
    assert png_size(shots / SCREENSHOT) == (VIEWPORT["width"], VIEWPORT["height"])
    contested.finish.set()
    processes.join_all(10)


def test_run_now_starts_a_scheduled_job_that_a_worker_then_runs(
    worker: WorkerProcess, server: str, page: Page, django_user_model: Any, shots: Path
) -> None:
    queue = get_queue()
    queue.enqueue("tests.tasks.record", args=[1042], job_id=JOB, delay=3600)
    log_in(page, server, django_user_model)
    counts = page.locator('#queues tr[data-queue="default"]')
    expect(counts.locator('[data-state="scheduled"]')).to_have_text("1")
    counts.locator('[data-state="scheduled"] a').click()

    row = page.locator(f'#jobs tr[data-job="{JOB}"]')
    expect(row).to_contain_text("tests.tasks.record")
    expect(row).to_contain_text("[1042]")
    expect(row).to_contain_text("in 59 min")
    row.get_by_role("link", name="Run now").click()
    expect(page.locator("#content-main")).to_contain_text(
        f"Run job “{JOB}” (tests.tasks.record) of queue “default” now instead of at"
    )
    page.get_by_role("button", name="Yes, run now").click()
    expect(message(page)).to_have_text(f"Job “{JOB}” of queue “default” was made ready to run now.")
    expect(page.locator("#jobs")).to_contain_text("No scheduled jobs in queue “default”.")

    tab(page, "Workers").click()
    live = page.locator(f'#workers tr[data-worker*=":{worker.pid}:"]')
    expect(live.locator("td").nth(2)).to_have_text("default")
    expect(live.locator("td").nth(7)).to_have_text("1")  # processed, once it heartbeats
    expect(live.locator("td").nth(8)).to_have_text("0")  # failed
    tab(page, "Queues").click()
    for state in ["ready", "scheduled", "running", "dead"]:
        expect(counts.locator(f'[data-state="{state}"]')).to_have_text("0")
    expect(counts.locator('[data-state="done"]')).to_have_text("1")
    counts.locator('[data-state="done"] a').click()
    row = page.locator(f'#jobs tr[data-job="{JOB}"]')
    expect(row.locator("td").nth(1)).to_have_text("1042")  # its result
    row.get_by_role("link", name=JOB).click()
    expect(page.locator('#job [data-field="state"]')).to_have_text("finished")
    expect(page.locator('#job [data-field="result"]')).to_have_text("1042")
    expect(page.locator("#attempts")).to_contain_text("No attempt of this job has failed.")
    page.screenshot(path=shots / JOB_SCREENSHOT, full_page=True)
    tab(page, "Schedule").click()
    expect(page.locator("#schedule")).to_contain_text("No periodic job is configured")

    job = queue.get(JOB)
    assert (job.state, job.result) == ("done", "1042")
    assert [json.loads(d)["n"] for d in get_redis().lrange(DONE, 0, -1)] == [1042]
    entry = LogEntry.objects.get()
    assert (entry.action_flag, entry.object_id) == (CHANGE, f"default:{JOB}")
    assert worker.stop() == 0, worker.output()
    assert "1 done, 0 failed" in worker.output()


def test_dead_jobs_checked_are_retried_in_bulk(
    server: str, page: Page, django_user_model: Any, shots: Path
) -> None:
    queue = get_queue()
    trace = "Traceback (most recent call last):\n" + '  File "shop/tasks.py", line 12\n' * 3
    for n in range(4):
        queue.enqueue("tests.tasks.boom", args=[n], job_id=f"charge:{n}:" + "x" * 150)
        [job] = queue.pop()
        queue.bury(job, RuntimeError("payment provider said no"), trace)
    log_in(page, server, django_user_model)
    page.locator('#queues tr[data-queue="default"] [data-state="dead"] a').click()
    boxes = page.locator('#jobs input[name="job"]')
    expect(boxes).to_have_count(4)
    boxes.nth(0).check()
    boxes.nth(2).check()
    # A long id is cut to the table's width: nothing overflows the 1280 px window.
    assert page.evaluate("document.documentElement.scrollWidth") <= VIEWPORT["width"]
    page.screenshot(path=shots / DEAD_SCREENSHOT)
    page.get_by_role("button", name="Retry", exact=True).click()
    expect(page.locator("#content-main")).to_contain_text(
        "Run the 2 dead jobs of queue “default” checked again now"
    )
    page.get_by_role("button", name="Yes, retry").click()
    expect(message(page)).to_have_text("2 dead jobs of queue “default” requeued.")
    boxes = page.locator('#jobs input[name="job"]')
    expect(boxes).to_have_count(2)
    assert queue.counts()["ready"] == 2
    assert LogEntry.objects.get().action_flag == CHANGE
    # The "check all" box (the app's own script, no inline handler) checks and clears them.
    page.locator("#check-all").click()
    assert [boxes.nth(n).is_checked() for n in range(2)] == [True, True]
    page.locator("#check-all").click()
    assert [boxes.nth(n).is_checked() for n in range(2)] == [False, False]
