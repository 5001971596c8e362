"""Every system-check id is a literal string where its message is made, so a grep for it
finds the code, and the checks reference (docs/reference/checks.rst) lists exactly the ids
the package raises."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import django_redislock

PACKAGE = Path(django_redislock.__file__).parent
README = PACKAGE.parent / "docs" / "reference" / "checks.rst"
MESSAGE_CLASSES = {"CheckMessage", "Critical", "Debug", "Error", "Info", "Warning"}
ID_RE = re.compile(r"django_redislock\.[EW]\d{3}")
# a row of the table (``E004``  ...) or a warning's bullet (- ``W001``: ...)
README_ENTRY_RE = re.compile(r"^(?:- )?``(?:django_redislock\.)?([EW]\d{3})``", re.MULTILINE)


def _message_classes(tree: ast.Module) -> set[str]:
    """The names this module gives django.core.checks' message classes."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "django.core.checks":
            names |= {a.asname or a.name for a in node.names if a.name in MESSAGE_CLASSES}
    return names


def _check_messages() -> Iterator[tuple[str, ast.Call]]:
    """Every check message the package makes, as (where, the call)."""
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        classes = _message_classes(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in classes or (isinstance(func, ast.Attribute) and name in MESSAGE_CLASSES):
                yield f"{path.relative_to(PACKAGE.parent)}:{node.lineno}", node


def _literal_id(call: ast.Call) -> str | None:
    for keyword in call.keywords:
        if keyword.arg == "id" and isinstance(keyword.value, ast.Constant):
            value = keyword.value.value
            return value if isinstance(value, str) and ID_RE.fullmatch(value) else None
    return None


def _readme_ids() -> list[str]:
    return [f"django_redislock.{code}" for code in README_ENTRY_RE.findall(README.read_text())]


def test_every_check_message_has_a_literal_id() -> None:
    messages = list(_check_messages())
    assert len(messages) > 30  # the walk found the checks
    composed = [where for where, call in messages if _literal_id(call) is None]
    assert composed == [], "a check id that is not a literal 'django_redislock.E0nn'"


def test_readme_lists_exactly_the_ids_raised() -> None:
    listed = _readme_ids()
    assert len(listed) == len(set(listed)), "an id listed twice"
    raised = {_literal_id(call) for _, call in _check_messages()}
    assert set(listed) == raised


def test_every_id_the_source_names_is_listed() -> None:
    named = {m for path in PACKAGE.rglob("*.py") for m in ID_RE.findall(path.read_text())}
    assert named - set(_readme_ids()) == set()
