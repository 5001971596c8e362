from __future__ import annotations

import pytest

from django_redislock import Lock
from django_redislock.fencing import fenced_update
from tests.models import Account

pytestmark = pytest.mark.django_db


def test_a_newer_fence_writes_and_an_older_one_is_refused(backend):
    account = Account.objects.create(balance=100)
    rows = Account.objects.filter(pk=account.pk)
    with Lock("acct", ttl=5, fencing=True) as old:
        old_fence = old.fence
    with Lock("acct", ttl=5, fencing=True) as new:
        new_fence = new.fence
        assert fenced_update(rows, new_fence, balance=90) == 1
    assert fenced_update(rows, old_fence, balance=0) == 0
    account.refresh_from_db()
    assert (account.balance, account.fence) == (90, new_fence)


def test_bad_fence_arguments():
    rows = Account.objects.all()
    for fence in (None, 0, -1, "3", True):
        with pytest.raises(ValueError, match="fence must be a positive int"):
            fenced_update(rows, fence, balance=1)
    with pytest.raises(ValueError, match="set from the fence"):
        fenced_update(rows, 3, fence=4)
