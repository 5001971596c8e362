"""How the admin shows a name read from Redis (a lock, stock or semaphore name, a job or
worker id): Redis holds whatever was written to it, not only what this app writes, so a name
may be 10 kB long, hold NUL, newlines, braces, a right-to-left override or bytes that are no
UTF-8. Every listing turns such a name into visible, bounded text and a note saying why it
is no valid name, so that one planted row never breaks, hides or disguises the others."""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from typing import Any, NamedTuple

# How many characters of a name a page shows (the rest is said, not shown)
SHOWN_LENGTH = 120
# The longest name a link carries (a job page's, an action's): beyond, URLs get refused
LINKABLE_LENGTH = 2000
# Characters shown as an escape, not as themselves: controls, formats (U+202E right-to-left
# override, zero-width ones), separators other than the space, unassigned and surrogates.
HIDDEN = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}
NOT_TEXT = "\N{REPLACEMENT CHARACTER}"


class ShownName(NamedTuple):
    """A name as pages show it: ``text``, visible and at most ``SHOWN_LENGTH`` characters
    (plus a note of the length); ``name``, the name itself (what a link or an action
    carries); ``problem``, why it is not a valid name ("" when it is); ``linkable``, whether
    a link or form can carry ``name`` intact (printable text of a bounded length): only
    then is it linked or acted on."""

    text: str
    name: str
    problem: str
    linkable: bool

    @property
    def valid(self) -> bool:
        return not self.problem


def _visible(char: str) -> str:
    if char != " " and (unicodedata.category(char) in HIDDEN or char.isspace()):
        return char.encode("unicode_escape").decode("ascii")
    return char


def shown_name(value: Any, check: Callable[[str], Any] | None = None) -> ShownName:
    """``value`` (bytes or str, as read from Redis) as a page shows it. ``check`` is the
    validation a name of its kind passes (e.g. ``names.validate_name``): what it raises
    (TypeError/ValueError) becomes the ``problem``."""
    if isinstance(value, bytes):
        try:
            name = value.decode()
        except UnicodeDecodeError:
            name = value.decode(errors="replace")
    else:
        name = str(value)
    problem = ""
    if NOT_TEXT in name:
        problem = "it holds bytes that are no UTF-8 text (shown as \N{REPLACEMENT CHARACTER})"
    elif check is not None:
        try:
            check(name)
        except (TypeError, ValueError) as exc:
            problem = str(exc)
    text = "".join(_visible(c) for c in name[:SHOWN_LENGTH])
    if len(name) > SHOWN_LENGTH:
        text += f"… ({len(name):,} characters)"
    linkable = name.isprintable() and NOT_TEXT not in name and len(name) <= LINKABLE_LENGTH
    return ShownName(text, name, _bounded(problem), linkable)


def _bounded(problem: str) -> str:
    """A check's message quotes the name: bounded and visible too."""
    shown = "".join(_visible(c) for c in problem[: SHOWN_LENGTH * 2])
    return shown + ("…" if len(problem) > SHOWN_LENGTH * 2 else "")
