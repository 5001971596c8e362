"""``manage.py flash_sale_demo``: the same flash sale three ways: unguarded, behind
``@redis_locked`` (a queue of one) and by reservation (``Stock``); then buyers who resend
their order after a timeout, with and without ``@redis_idempotent``."""

from __future__ import annotations

import contextlib
import signal
import sys
import time
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

from django_redislock import get_queue
from django_redislock.exceptions import JobNotFound, ReservationError
from django_redislock.queue.jobs import JobState
from shop.demo import Server, hammer, resend
from shop.models import Order, Product
from shop.tasks import close_job_id, unpaid_seconds

# (label, URL suffix) of the three ways to sell
ENDPOINTS = (("unguarded", "buy-unguarded"), ("mutex", "buy"), ("reserved", "buy-reserved"))
# (label, URL suffix) of an order placed without and with an Idempotency-Key guard
RESENT = (("unguarded", "order-unguarded"), ("idempotent", "order"))
ORDERS_EACH = 5  # orders each buyer places in the resend rows
PATIENCE = 0.02  # seconds a buyer waits for its first answer (the charge takes 0.05)


class Command(BaseCommand):
    help = (
        "Serve the shop from several processes and send concurrent buyers at an unguarded, "
        "a mutex-guarded and a reservation buy endpoint; print what each sold, and how fast."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--stock", type=int, default=100, help="items on sale (100)")
        parser.add_argument("--buyers", type=int, default=8, help="buyer processes (8)")
        parser.add_argument("--attempts", type=int, default=250, help="buys per buyer (250)")
        parser.add_argument("--workers", type=int, default=4, help="server processes (4)")

    def handle(self, *args: Any, **options: Any) -> None:
        for name in ("stock", "buyers", "attempts", "workers"):
            if options[name] < 1:
                self.stderr.write(f"--{name} must be at least 1.")
                sys.exit(2)
        # A stop request unwinds the `with` below, which stops the server processes.
        previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        try:
            self.run(options)
        finally:
            signal.signal(signal.SIGTERM, previous)

    def run(self, options: dict[str, Any]) -> list[Any]:
        """Sell the stock each way; rows of (label, stock left, orders, Run)."""
        call_command("migrate", verbosity=0)
        self.stdout.write(
            f"Redis: {getattr(settings, 'REDIS_URL', 'as configured')}\n"
            f"{options['buyers']} buyers x {options['attempts']} attempts against a stock of "
            f"{options['stock']}, served by {options['workers']} processes.\n"
        )
        rows = []
        with Server().start(options["workers"]) as server:
            for label, endpoint in ENDPOINTS:
                product = fresh_product(f"Flash sale ({label})")
                product.put_on_sale(options["stock"])
                self.stdout.write(f"{label:>9}: ", ending="")
                run = hammer(
                    server.port,
                    f"/products/{product.pk}/{endpoint}/",
                    buyers=options["buyers"],
                    attempts=options["attempts"],
                    on_progress=Progress(self.stdout),
                )
                product.refresh_from_db()
                orders = product.orders.count()
                rows.append((label, product.stock, orders, run))
            resent = [self.resent(server.port, label, endpoint, options["buyers"])
                      for label, endpoint in RESENT]  # fmt: skip
        self.stdout.write("\n" + self.table(options["stock"], rows))
        self.stdout.write(self.resent_table(resent))
        scheduled = scheduled_closes(Order.objects.filter(product__name__startswith="Flash sale"))
        self.stdout.write(
            f"Each order also got a close-if-unpaid job, due {unpaid_seconds():.0f} s after it "
            f"was made: {scheduled} are scheduled in the queue. "
            "`python manage.py run_queue_worker` works them (and the periodic sweep)."
        )
        return rows

    def resent(self, port: int, label: str, endpoint: str, buyers: int) -> tuple[Any, ...]:
        """Orders placed by buyers who give up waiting and send the same request again;
        (label, orders meant, requests sent, orders made)."""
        product = fresh_product(f"Resent orders ({label})")
        self.stdout.write(f"{'resent ' + label:>18}: ", ending="")
        sent = resend(port, f"/products/{product.pk}/{endpoint}/", buyers=buyers,
                      keys=ORDERS_EACH, patience=PATIENCE)  # fmt: skip
        made = product.orders.count()
        self.stdout.write(f"{sent} requests")
        return label, buyers * ORDERS_EACH, sent, made

    def resent_table(self, rows: list[Any]) -> str:
        head = ("resent", "meant", "requests", "orders", "charged twice")
        lines = ["  ".join(f"{h:>13}" for h in head)]
        for label, meant, sent, made in rows:
            lines.append("  ".join(f"{c:>13}" for c in (label, meant, sent, made, made - meant)))
        verdicts = [f"{label}: {made} orders for {meant} meant" for label, meant, _, made in rows]
        legend = (f"Each buyer placed {ORDERS_EACH} orders, each with its Idempotency-Key, gave "
                  f"up waiting after {PATIENCE * 1000:.0f} ms and sent it again.")  # fmt: skip
        return "\n".join(["", *lines, legend, "", "; ".join(verdicts) + "."]) + "\n"

    def table(self, stock: int, rows: list[Any]) -> str:
        head = ("endpoint", "stock", "left", "orders", "oversold", "busy", "busy+left",
                "sold out", "errors", "orders/s", "p99 ms")  # fmt: skip
        lines = ["  ".join(f"{h:>9}" for h in head)]
        for label, left, orders, run in rows:
            statuses = run.statuses
            busy, sold_out = statuses[409], statuses[410]
            errors = run.requests - busy - sold_out - statuses[201]
            cells = (label, stock, left, orders, max(0, orders - stock), busy,
                     run.busy_while_left, sold_out, errors, round(run.orders_per_second),
                     f"{run.latency(0.99) * 1000:.0f}")  # fmt: skip
            lines.append("  ".join(f"{c:>9}" for c in cells))
        verdicts = []
        for label, left, orders, _ in rows:
            exact = " (exact)" if orders == stock and left == 0 else ""
            oversold = " (oversold)" if orders > stock else ""
            verdicts.append(f"{label}: {orders} orders, {left} left{exact}{oversold}")
        (_, _, _, mutex), (_, _, _, reserved) = rows[1], rows[2]
        if mutex.orders_per_second:
            speed = reserved.orders_per_second / mutex.orders_per_second
            verdicts.append(f"reservations sold {speed:.1f}x as fast as the mutex")
        legend = ("busy: 409 answers (the lock's timeout ran out); busy+left: those sent before "
                  "the last item sold; orders/s: orders until the last one.")  # fmt: skip
        vary = ("The timings (orders/s, p99, the ratio) vary from run to run with the machine "
                "and its load; the counts of the guarded endpoints do not.")  # fmt: skip
        return "\n".join([*lines, legend, "", "; ".join(verdicts) + ".", vary]) + "\n"


def fresh_product(name: str) -> Product:
    """The product ``name``, without the orders an earlier run left, nor their close jobs and
    reserved units (the embedded Redis keeps its data between runs): a run reports only
    what it did itself."""
    queue = get_queue()
    product = Product.objects.get_or_create(name=name)[0]
    old = Order.objects.filter(product=product)
    for order_id, reservation in old.values_list("pk", "reservation").iterator():
        queue.delete(close_job_id(order_id))
        if reservation:
            with contextlib.suppress(ReservationError):  # expired or already released
                product.units.release(reservation)
    old.delete()
    return product


def scheduled_closes(orders: Any) -> int:
    """How many of ``orders`` have their close job scheduled in the queue."""
    queue = get_queue()
    count = 0
    for order_id in orders.values_list("pk", flat=True).iterator():
        with contextlib.suppress(JobNotFound):
            count += queue.get(close_job_id(order_id)).state == JobState.SCHEDULED
    return count


class Progress:
    """A one-line progress bar (a line per quarter when the output is not a terminal)."""

    def __init__(self, out: Any, width: int = 30) -> None:
        self.out, self.width = out, width
        self.tty = hasattr(out, "isatty") and out.isatty()
        self.began = time.monotonic()
        self.shown = -1
        self.ended = False

    def __call__(self, done: int, total: int) -> None:
        if self.tty:
            filled = self.width * done // total
            rate = done / max(time.monotonic() - self.began, 1e-6)
            bar = "#" * filled + "." * (self.width - filled)
            self.out.write(f"\r[{bar}] {done}/{total} {rate:6.0f} req/s", ending="")
            self.out.flush()
        elif done * 4 // total > self.shown:
            self.shown = done * 4 // total
            self.out.write(f"{100 * self.shown // 4}%{' ' if self.shown < 4 else ''}", ending="")
            self.out.flush()
        if done == total and not self.ended:  # (told twice at the end)
            self.ended = True
            self.out.write("")
