"""The flash sale of issue 14, three ways on the same Redis in the same run: unguarded,
behind ``@redis_locked`` (a queue of one) and by reservation (``Stock``), each served by the
example shop in 4 processes and bought from by 16 buyer processes over HTTP.

    PYTHONPATH=$PWD:$PWD/example_project python -m benchmarks.flash_sale [--stock 10000]

Uses ``REDIS_URL`` when set, else starts a ``redis-server`` of its own on a free port; the
shop's database is a throwaway SQLite file. Prints the demo's table and the targets: the
reservation path sells at least 3x as many orders per second as the mutex path, oversells
nothing, and never answers "busy" while stock is left.
"""

from __future__ import annotations

import argparse
import io
import math
import os
import sys
import tempfile

from benchmarks import benchmark_redis


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stock", type=int, default=10_000)
    parser.add_argument("--buyers", type=int, default=16)
    parser.add_argument("--workers", type=int, default=4, help="server processes")
    parser.add_argument("--attempts", type=int, help="buys per buyer (default: 10%% over)")
    args = parser.parse_args()
    attempts = args.attempts or math.ceil(args.stock * 1.1 / args.buyers)

    with benchmark_redis() as url:
        os.environ["REDIS_URL"] = url  # the shop's settings read it
        folder = tempfile.mkdtemp(prefix="flash-sale-")
        os.environ["SHOP_DB"] = os.path.join(folder, "shop.sqlite3")
        sys.path.insert(
            0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "example_project")
        )
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
        import django

        django.setup()
        from shop.management.commands.flash_sale_demo import Command

        command = Command(stdout=io.TextIOWrapper(sys.stdout.buffer, write_through=True))
        rows = command.run(
            {
                "stock": args.stock,
                "buyers": args.buyers,
                "attempts": attempts,
                "workers": args.workers,
            }
        )
        (_, _, _, mutex), (_, _, orders, reserved) = rows[1], rows[2]
        speed = reserved.orders_per_second / max(mutex.orders_per_second, 1e-9)
        print("Targets")
        for name, value, ok in (
            ("reservation orders/s >= 3x mutex", f"{speed:.2f}x", speed >= 3),
            ("reservation oversold == 0", max(0, orders - args.stock), orders <= args.stock),
            (
                "reservation busy while stock left == 0",
                reserved.busy_while_left,
                reserved.busy_while_left == 0,
            ),
        ):
            print(f"  {name:42s} {value!s:>8}  {'ok' if ok else 'FAIL'}")


if __name__ == "__main__":
    main()
