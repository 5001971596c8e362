"""Admin tables in a real browser at 1,280 and 1,920 px (issue 30): a dotted task path wraps
only right after a dot, never inside a name; headers and ids are shown whole, on one line,
never cut or ellipsized; the tables fit the window. Measured in Chromium from the rendered
text: each character's box (``Range.getClientRects``) says on which line it fell.

The live server and the browser are ``test_admin_browser``'s fixtures."""

from __future__ import annotations

import time
from typing import Any

import pytest

from django_redislock import get_queue
from django_redislock.queue.worker.schedule import Scheduler
from django_redislock.queue.worker.schedule_state import entry_named, run_entry_now
from tests.support.fixtures import Backend

from .test_admin_browser import log_in, page, server  # noqa: F401 (fixtures)

try:
    from playwright.sync_api import Page
except ImportError:  # the ``page`` fixture fails, saying what to install
    Page = Any  # type: ignore[misc,assignment]

pytestmark = [pytest.mark.processes, pytest.mark.timeout(120)]

WIDTHS = (1280, 1920)
# As long as real ones get: a deep package, long module and function names.
PATHS = (
    "shop.fulfilment.warehouse_integrations.tasks.reconcile_inventory_snapshot_for_region",
    "analytics.reports.quarterly.revenue_by_channel_and_region.generate_pdf_export",
    "notifications.channels.transactional_email.tasks.send_order_confirmation_email",
)
JOB_IDS = (
    "order-fulfilment:2026-11-28:region-eu-west-1:batch-000042",
    "invoice-pdf:customer-0000918273:2026-Q4-final-revision",
    "9f1c2b7e4d5a48c6b3e2a1f0c9d8e7b6",
)
SCHEDULE = {
    "reconcile-inventory-snapshot-eu-west": {"task": PATHS[0], "every": 60, "args": [1]},
    "quarterly-revenue-report": {"task": PATHS[1], "cron": "0 3 1 */3 *"},
    "order-confirmations": {"task": PATHS[2], "every": 300, "kwargs": {"batch": 500}},
}

# What the page shows, measured: per dotted path, its text and the characters a line ended
# after; per header or id, whether it is cut (its box narrower than its text, or an
# ellipsis); whether a table reaches past the window.
MEASURE = """
() => {
  const lines = (element) => {
    const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
    const chars = [];
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (let i = 0; i < node.data.length; i++) {
        const range = document.createRange();
        range.setStart(node, i);
        range.setEnd(node, i + 1);
        const rects = range.getClientRects();
        if (rects.length) chars.push([node.data[i], rects[0].top]);
      }
    }
    const endedAfter = [];
    for (let i = 1; i < chars.length; i++) {
      if (chars[i][1] > chars[i - 1][1] + 2) endedAfter.push(chars[i - 1][0]);
    }
    return {text: chars.map((c) => c[0]).join(''), endedAfter};
  };
  const cut = (element) => {
    for (let e = element; e && e.tagName !== 'TABLE'; e = e.parentElement) {
      const style = getComputedStyle(e);
      if (e.scrollWidth > e.clientWidth + 1 && style.overflowX !== 'visible') return true;
      if (style.textOverflow === 'ellipsis' && e.scrollWidth > e.clientWidth) return true;
      if (e.tagName === 'TD' || e.tagName === 'TH') {
        if (e.scrollWidth > e.clientWidth + 1) return true;
        break;
      }
    }
    const range = document.createRange();
    range.selectNodeContents(element);
    const tops = [...range.getClientRects()].filter((r) => r.width > 0).map((r) => r.top);
    return tops.length > 0 && Math.max(...tops) - Math.min(...tops) > 8;  // on one line
  };
  const whole = [...document.querySelectorAll(
    'table.listing thead th, table.listing tbody th[scope=row] .whole')];
  return {
    paths: [...document.querySelectorAll('table.listing .path')].map(lines),
    cut: whole.filter(cut).map((e) => e.textContent.trim()),
    wholeCount: whole.length,
    wider: [...document.querySelectorAll('table.listing')].some(
      (t) => t.getBoundingClientRect().right > document.documentElement.clientWidth + 1),
    pageWider: document.documentElement.scrollWidth > document.documentElement.clientWidth,
  };
}
"""


def measured(browser: Page, width: int, where: str) -> dict[str, Any]:
    browser.set_viewport_size({"width": width, "height": 900})
    browser.goto(where)
    browser.wait_for_selector("table.listing")
    result: dict[str, Any] = browser.evaluate(MEASURE)
    return result


def test_paths_wrap_after_dots_and_headers_and_ids_are_whole(
    redis_backend: Backend,
    server: str,  # noqa: F811 (a fixture)
    page: Page,  # noqa: F811
    settings: Any,
    django_user_model: Any,
) -> None:
    settings.REDISLOCK = {**settings.REDISLOCK, "SCHEDULE": SCHEDULE}
    queue = get_queue()
    for n, (job_id, path) in enumerate(zip(JOB_IDS, PATHS, strict=True)):
        args = [n, "eu-west-1", {"warehouses": list(range(40))}]
        queue.enqueue(path, args, job_id=job_id, delay=3600)
    queue.pause(PATHS[2])
    Scheduler().run_pending(time.time() - 60)
    Scheduler().run_pending(time.time())
    run_entry_now(entry_named("order-confirmations"))
    log_in(page, server, django_user_model)
    admin = f"{server}/admin/django_redislock/dashboard/"
    pages = {
        "jobs": f"{admin}queues/default/scheduled/?refresh=off",
        "queues": f"{admin}?refresh=off",
        "schedule": f"{admin}schedule/?refresh=off",
    }
    wrapped = 0
    for width in WIDTHS:
        for name, where in pages.items():
            seen = measured(page, width, where)
            what = f"{name} page at {width} px"
            assert seen["wholeCount"] > 0, what
            assert seen["cut"] == [], f"{what}: cut or wrapped: {seen['cut']}"
            assert not seen["pageWider"], f"{what}: the page scrolls sideways"
            if width == 1920:  # (at 1,280 a table may scroll in its box: nothing is cut)
                assert not seen["wider"], f"{what}: a table is wider than the window"
            shown = {path["text"] for path in seen["paths"]}
            expected = {PATHS[2]} if name == "queues" else set(PATHS)
            assert expected <= shown, f"{what}: {shown}"  # whole: no ellipsis, no cut
            for path in seen["paths"]:
                assert set(path["endedAfter"]) <= {"."}, f"{what}: {path}"
                wrapped += bool(path["endedAfter"])
    assert wrapped, "no path needed to wrap: the test shows nothing"
