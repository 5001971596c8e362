"""The one way every paginated admin page reads its page number (``?p=``) and fetches its
rows: whatever the URL says, the page shown is one that exists (the first for what is no
page number, the last for one past the end), and what reaches Redis as an offset is bounded.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from django.http import HttpRequest

PER_PAGE = 50
# The highest page number asked of Redis: its offset, 5e9, fits every integer argument of
# Redis and Lua; a bigger number (10**20, 5,000 digits) is read as "the last page".
MAX_PAGE = 10**8
Row = TypeVar("Row")


def requested_page(request: HttpRequest) -> int:
    """The page number ``?p=`` asks for, from 1 to ``MAX_PAGE``: a number too big to be a
    page is the highest; anything else that is no plain positive number ("-1", "abc",
    "1e9", "") is the first."""
    given = request.GET.get("p", "").strip()
    if not (given.isascii() and given.isdigit()):
        return 1
    # Not int() on the whole text: a 5,000-digit value is refused by Python (ValueError).
    if len(given.lstrip("0")) > len(str(MAX_PAGE)):
        return MAX_PAGE
    return min(max(1, int(given)), MAX_PAGE)


@dataclass(frozen=True)
class Pager:
    number: int
    pages: int
    total: int

    @classmethod
    def of(cls, asked: int, total: int) -> Pager:
        """Page ``asked`` of ``total`` rows, or the last one when ``asked`` is past it."""
        pages = max(1, math.ceil(max(total, 0) / PER_PAGE))
        return cls(min(max(asked, 1), pages), pages, max(total, 0))

    @property
    def offset(self) -> int:
        return (self.number - 1) * PER_PAGE

    @property
    def size(self) -> int:
        """How many rows this page has, by the total."""
        return max(0, min(PER_PAGE, self.total - self.offset))

    @property
    def previous(self) -> int:
        return self.number - 1

    @property
    def next(self) -> int:
        return self.number + 1


def paginate(
    request: HttpRequest,
    fetch: Callable[[int, int], tuple[Sequence[Row], int]],
    total: int | None = None,
) -> tuple[Sequence[Row], Pager]:
    """The rows of the page ``request`` asks for, and its pager. ``fetch(offset, limit)``
    returns those rows and how many there are in all. With ``total`` known beforehand, the
    page asked is clamped to it before anything is fetched; otherwise, when the page asked
    turns out past the last (or the rows shrank meanwhile), the last page is fetched."""
    asked = requested_page(request)
    if total is not None:
        asked = Pager.of(asked, total).number
    rows, total = fetch((asked - 1) * PER_PAGE, PER_PAGE)
    pager = Pager.of(asked, total)
    if pager.number != asked:
        rows, total = fetch(pager.offset, PER_PAGE)
        pager = Pager.of(pager.number, total)
    return rows, pager
