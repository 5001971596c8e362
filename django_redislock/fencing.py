"""Fencing tokens in the Django ORM: a write that a stale lock holder cannot make.

A holder whose lock expired (a long GC pause, a stopped VM) may still believe it holds the
lock. Store the fence of the last write on the row and make every write conditional on a
newer fence::

    with Lock(f"points:{user.pk}", fencing=True) as lock:
        account = PointsAccount.objects.get(user=user)
        ...
        accounts = PointsAccount.objects.filter(pk=account.pk, balance__gte=cost)
        if not fenced_update(accounts, lock.fence, balance=F("balance") - cost):
            raise LockNotOwned("a newer holder wrote first, or the balance changed")

The fence refuses a stale holder once a newer one has written. It cannot refuse a stale
holder that writes first, after the newer one has read: so also make the write relative
(``F(...)``) and conditional on what it relies on (``balance__gte=cost``).
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet


def fenced_update(
    queryset: QuerySet[Any], fence: int | None, /, *, field: str = "fence", **values: Any
) -> int:
    """``UPDATE … SET <values>, <field> = fence WHERE <field> < fence`` (or IS NULL).

    Returns the number of rows written; 0 means a holder with a newer fence already wrote
    (or the rows do not exist), so this holder must not act on what it read."""
    if not isinstance(fence, int) or isinstance(fence, bool) or fence < 1:
        raise ValueError(
            f"fence must be a positive int (the lock's .fence with fencing=True), not {fence!r}."
        )
    if field in values:
        raise ValueError(f"{field!r} is set from the fence; do not pass it in values.")
    condition = Q(**{f"{field}__lt": fence}) | Q(**{f"{field}__isnull": True})
    updated: int = queryset.filter(condition).update(**{field: fence}, **values)
    return updated
