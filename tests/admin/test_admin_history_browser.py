"""The task history charts in a real browser: jobs run by a ``run_queue_worker`` process on
a real redis-server, then the Tasks page and a task's page in the system Chromium, their
inline SVG charts drawn (non-empty paths). A screenshot of the task page is saved as a test
artifact: into ``REDISLOCK_ARTIFACTS`` when set, else ``.artifacts/`` at the project's root
(untracked), never into a tracked file. Reuses the live server, browser and worker fixtures
of ``test_admin_browser``."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from django_redislock import get_queue, get_redis
from tests.support.artifacts import artifacts

from ..tasks import DONE
from .test_admin_browser import (  # the fixtures, found by pytest under these names
    WorkerProcess,
    log_in,
    page,
    png_size,
    server,
    tab,
    worker,
)

__all__ = ["page", "server", "worker"]

pytestmark = [pytest.mark.processes, pytest.mark.timeout(120)]

TASK = "tests.tasks.record"


def drawn(page: Page, selector: str) -> str:
    """The ``d`` of an SVG path once it has one (the history reaches Redis within a second of
    a run: the page is reloaded until then)."""
    path = page.locator(selector)
    expect(path).to_have_attribute("d", re.compile(r"^M\d"))
    return str(path.get_attribute("d"))


def test_the_task_history_charts_render_after_real_jobs(
    worker: WorkerProcess, server: str, page: Page, django_user_model: Any
) -> None:
    queue = get_queue()
    queue.enqueue_many([{"task": TASK, "args": [n]} for n in range(20)])
    queue.enqueue("tests.tasks.boom")
    log_in(page, server, django_user_model)
    tab(page, "Tasks").click()
    expect(page.get_by_role("heading", name="Tasks")).to_be_visible()
    row = page.locator(f'#tasks tr[data-task="{TASK}"]')
    expect(row.locator('[data-field="runs"]')).to_have_text("20", timeout=30_000)
    assert get_redis().llen(DONE) == 20
    drawn(page, f'#tasks tr[data-task="{TASK}"] svg.sparkline path')
    expect(
        page.locator('#tasks tr[data-task="tests.tasks.boom"] [data-field="failures"]')
    ).to_have_text("1")

    row.get_by_role("link").click()
    expect(
        page.get_by_role("heading", name=re.compile("Task “tests.tasks.record”"))
    ).to_be_visible()
    runs = drawn(page, "#chart-counts path.runs")
    assert runs.count("L") >= 2  # a line over the day, not a lone point
    drawn(page, "#chart-durations path.p50")
    drawn(page, "#chart-durations path.p95")
    rows = page.locator("#task-jobs tbody tr[data-job]")
    expect(rows).to_have_count(20)  # from the task's index of recent jobs
    expect(rows.first.locator("td").first).to_have_text("done")
    shot = artifacts() / "admin-task-history.png"
    page.screenshot(path=str(shot), full_page=True)
    width, height = png_size(shot)
    assert width >= 1280
    assert height > 400
