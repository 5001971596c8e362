"""The documentation site (docs/, Sphinx) builds with warnings as errors, documents every
public name and every system check, and its internal links all land on a page and anchor
that exist. The build goes to a temporary directory: nothing is written into docs/."""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from django.dispatch import Signal

import django_redislock
from django_redislock import exceptions, signals, tasks, test, workflows

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PACKAGE = ROOT / "django_redislock"
CHECK_ID = re.compile(r"django_redislock\.([CEIW]\d{3})\b")
# The pages the README links to, by these paths.
PAGES = [
    "index",
    "tutorial",
    "howto/flash-sale",
    "howto/points-redemption",
    "howto/unpaid-orders",
    "howto/workflows",
    "howto/worker",
    "howto/sentinel-cluster",
    "howto/testing",
    "reference/settings",
    "reference/locks",
    "reference/views",
    "reference/semaphores-stock",
    "reference/ratelimit",
    "reference/queue",
    "reference/tasks",
    "reference/schedule",
    "reference/workflows",
    "reference/admin",
    "reference/metrics",
    "reference/commands",
    "reference/checks",
    "internals",
    "benchmarks",
]


def _tree(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*")}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The HTML site, built once for the module from a clean output directory (an
    incremental build would not repeat the warnings of pages it did not read again)."""
    out = tmp_path_factory.mktemp("docs_html")
    before = _tree(DOCS)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", DOCS, out],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"sphinx -W failed:\n{done.stderr}\n{done.stdout}"
    assert _tree(DOCS) == before, "the build wrote into docs/"
    return out


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name == "id" and value:
                self.ids.add(value)
            elif name == "href" and value and tag == "a":
                self.links.append(value)


def _pages(out: Path) -> dict[Path, _Page]:
    pages = {}
    for html in out.rglob("*.html"):
        page = _Page()
        page.feed(html.read_text(encoding="utf-8"))
        pages[html.resolve()] = page
    return pages


@pytest.mark.timeout(900)
def test_the_docs_build_with_warnings_as_errors(built: Path) -> None:
    for page in PAGES:
        assert (built / f"{page}.html").is_file(), page


def _documented_ids(built: Path) -> set[str]:
    ids: set[str] = set()
    for page in _pages(built).values():
        ids |= page.ids
    return ids


def _public_names() -> list[str]:
    names = [f"django_redislock.{name}" for name in django_redislock.__all__]
    for module in (test, tasks, workflows):
        names += [f"{module.__name__}.{name}" for name in module.__all__]
    names += [
        f"signals.{name}" for name, value in vars(signals).items() if isinstance(value, Signal)
    ]
    names += [
        f"exceptions.{name}"
        for name, value in vars(exceptions).items()
        if inspect.isclass(value)
        and issubclass(value, BaseException)
        and value.__module__ == exceptions.__name__
    ]
    return [n if n.startswith("django_redislock.") else f"django_redislock.{n}" for n in names]


@pytest.mark.timeout(900)
def test_every_public_name_is_in_the_reference(built: Path) -> None:
    documented = _documented_ids(built)
    missing = [name for name in _public_names() if name not in documented]
    assert not missing, f"not documented by autodoc: {missing}"


def test_every_check_id_is_in_the_checks_page() -> None:
    ids = set()
    for source in PACKAGE.rglob("*.py"):
        ids |= set(CHECK_ID.findall(source.read_text(encoding="utf-8")))
    assert {"E001", "W001"} <= ids  # the scan finds them
    page = (DOCS / "reference" / "checks.rst").read_text(encoding="utf-8")
    missing = sorted(i for i in ids if f"``django_redislock.{i}``" not in page)
    assert not missing, f"check ids missing from docs/reference/checks.rst: {missing}"


@pytest.mark.timeout(900)
def test_internal_links_land_on_a_page_and_an_anchor(built: Path) -> None:
    pages = _pages(built)
    broken = []
    for path, page in pages.items():
        for link in page.links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or link.startswith("mailto:"):
                continue
            target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            if target.is_dir():
                target = target / "index.html"
            if not target.exists() or (
                parts.fragment
                and target.suffix == ".html"
                and unquote(parts.fragment) not in pages[target].ids
            ):
                broken.append(f"{path.relative_to(built)}: {link}")
    assert not broken, "broken internal links:\n" + "\n".join(sorted(broken))
