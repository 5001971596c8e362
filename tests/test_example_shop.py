"""The example shop, live: served by 4 forked processes on a loopback port, hammered over HTTP
by buyer processes, with the lock on a real redis-server (standalone and Cluster)."""

from __future__ import annotations

import io
import re
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connections
from django.test import Client
from shop.demo import Server, hammer, resend
from shop.models import Order, PointsAccount, Product, Redemption

from tests.support.fixtures import Backend

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def shop(real_backend: Backend) -> Iterator[Server]:
    with Server().start(workers=4) as server:
        yield server


class StockWatch:
    """Reads the stock every few milliseconds while buyers run; remembers the lowest."""

    def __init__(self, product: Product) -> None:
        self.product_id = product.pk
        self.lowest = product.stock
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.watch)
        self.thread.start()

    def watch(self) -> None:
        try:
            while not self.done.wait(0.005):
                stock = Product.objects.get(pk=self.product_id).stock
                self.lowest = min(self.lowest, stock)
        finally:
            connections.close_all()

    def stop(self) -> int:
        self.done.set()
        self.thread.join()
        return self.lowest


def test_guarded_flash_sale_sells_exactly_the_stock(shop: Server) -> None:
    product = Product.objects.create(name="sale", stock=100)
    watch = StockWatch(product)
    run = hammer(shop.port, f"/products/{product.pk}/buy/", buyers=8, attempts=100)
    lowest = watch.stop()
    product.refresh_from_db()
    assert run.requests == 800
    assert set(run.statuses) <= {201, 409, 410}, run.statuses
    assert run.statuses[201] == 100
    assert Order.objects.filter(product=product).count() == 100
    assert product.stock == 0
    assert lowest >= 0


def test_reserved_flash_sale_sells_exactly_the_stock_without_busy_answers(shop: Server) -> None:
    product = Product.objects.create(name="sale")
    product.put_on_sale(100)
    watch = StockWatch(product)
    run = hammer(shop.port, f"/products/{product.pk}/buy-reserved/", buyers=8, attempts=100)
    lowest = watch.stop()
    product.refresh_from_db()
    assert run.statuses == {201: 100, 410: 700}  # no "busy": nobody waits for a lock
    orders = Order.objects.filter(product=product)
    assert orders.count() == 100
    assert len({order.reservation for order in orders}) == 100
    assert product.stock == 0
    assert lowest >= 0
    assert (product.units.available(), product.units.reserved()) == (0, 100)


@pytest.mark.parametrize("real_backend", ["redis"], indirect=True)
def test_control_the_unguarded_twin_oversells(shop: Server) -> None:
    # Proves the set-up can see overselling, so the exact count above means something.
    product = Product.objects.create(name="sale", stock=100)
    run = hammer(shop.port, f"/products/{product.pk}/buy-unguarded/", buyers=8, attempts=50)
    assert Order.objects.filter(product=product).count() > 100
    assert run.statuses[201] > 100


def test_concurrent_redemptions_of_a_full_balance_spend_it_once(shop: Server) -> None:
    user = User.objects.create_user("dora")
    account = PointsAccount.objects.create(user=user, balance=1000)
    client = Client()
    client.force_login(user)
    session = {"sessionid": client.cookies["sessionid"].value}
    run = hammer(
        shop.port, "/points/redeem/", buyers=16, attempts=1, data={"points": 1000}, cookies=session
    )
    account.refresh_from_db()
    # Five a minute pass the rate limit (429 for the other eleven); of those five, the lock
    # and the balance let exactly one spend the points (409 for the others).
    assert run.statuses == {201: 1, 409: 4, 429: 11}, run.statuses
    assert account.balance == 0
    assert Redemption.objects.filter(account=account).count() == 1
    assert Redemption.objects.get(account=account).fence == account.fence > 0


@pytest.mark.parametrize("real_backend", ["redis"], indirect=True)
def test_flash_sale_demo_command_prints_the_table(real_backend: Backend) -> None:
    out = io.StringIO()
    call_command("flash_sale_demo", stock=20, buyers=4, attempts=15, workers=2, stdout=out)
    text = out.getvalue()
    assert "endpoint" in text
    assert "oversold" in text
    assert "mutex: 20 orders, 0 left (exact)" in text
    assert "reserved: 20 orders, 0 left (exact)" in text
    assert "busy+left" in text
    assert "orders/s" in text
    assert "p99 ms" in text
    assert re.search(r"reservations sold \d+\.\dx as fast as the mutex", text)
    assert "vary from run to run" in text
    assert Product.objects.get(name="Flash sale (mutex)").orders.count() == 20
    assert Product.objects.get(name="Flash sale (reserved)").orders.count() == 20
    # 4 buyers x 5 orders, each sent again after a timeout
    assert "idempotent: 20 orders for 20 meant" in text
    assert Product.objects.get(name="Resent orders (idempotent)").orders.count() == 20
    assert Product.objects.get(name="Resent orders (unguarded)").orders.count() > 20


def test_demo_command_rejects_bad_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        call_command("flash_sale_demo", buyers=0)
    assert exit_info.value.code == 2
    assert "--buyers must be at least 1" in capsys.readouterr().err


def test_orders_resent_after_a_timeout_are_made_once_per_key(shop: Server) -> None:
    guarded, unguarded = (Product.objects.create(name=n) for n in ("once", "twice"))
    sent = resend(shop.port, f"/products/{guarded.pk}/order/", buyers=4, keys=3, patience=0.02)
    assert sent > 12  # every first try timed out and was sent again
    assert guarded.orders.count() == 12
    resend(shop.port, f"/products/{unguarded.pk}/order-unguarded/", buyers=4, keys=3, patience=0.02)
    assert unguarded.orders.count() > 12  # the control: resends charge again


def test_a_redemption_resent_with_its_key_spends_the_points_once(shop: Server) -> None:
    user = User.objects.create_user("erin")
    account = PointsAccount.objects.create(user=user, balance=100)
    client = Client()
    client.force_login(user)
    answers = [
        client.post("/points/redeem/", {"points": 30}, HTTP_IDEMPOTENCY_KEY="redeem-1")
        for _ in range(3)
    ]
    assert [a.status_code for a in answers] == [201, 201, 201]
    assert [a.get("Idempotent-Replayed") for a in answers] == [None, "true", "true"]
    account.refresh_from_db()
    assert account.balance == 70
    assert Redemption.objects.filter(account=account).count() == 1


def test_transfers_both_ways_at_once_keep_every_point_and_never_deadlock(shop: Server) -> None:
    users = [User.objects.create_user(name) for name in ("fay", "gus")]
    accounts = [PointsAccount.objects.create(user=user, balance=500) for user in users]
    sessions = []
    for user in users:
        client = Client()
        client.force_login(user)
        sessions.append({"sessionid": client.cookies["sessionid"].value})
    runs: list[Any] = [None, None]

    def transfer(me: int) -> None:
        to = users[1 - me].username
        runs[me] = hammer(
            shop.port,
            "/points/transfer/",
            buyers=4,
            attempts=10,
            data={"points": 7, "to": to},
            cookies=sessions[me],
        )

    threads = [threading.Thread(target=transfer, args=(me,)) for me in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    for run in runs:
        assert set(run.statuses) <= {201, 409}, run.statuses
        assert run.statuses[201] > 0
    for account in accounts:
        account.refresh_from_db()
    moved = [run.statuses[201] * 7 for run in runs]
    assert [a.balance for a in accounts] == [500 - moved[0] + moved[1], 500 - moved[1] + moved[0]]
    assert sum(a.balance for a in accounts) == 1000
