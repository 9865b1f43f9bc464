"""Windowed totals: sales per store per minute, with late and out-of-order records.

    python examples/windowed_totals.py [--broker kafka://127.0.0.1:9092]

The broker comes from ``--broker``, else from the settings (``AIOSTREAMS_BROKER``, else the
embedded ``memory://``). Tumbling one-minute windows with 10 s of grace, on event time (the
records' timestamps, not the clock): an out-of-order sale within grace still counts in its
window; one that arrives after its window closed is dropped and counted as late.
"""

from __future__ import annotations

import argparse

import aiostreams as ais

T0 = 1_699_999_980.0  # a whole minute (windows align to the epoch), in seconds
SALES = [  # (store, amount, seconds after T0)
    ("north", 10.0, 5), ("south", 4.0, 12), ("north", 5.0, 30), ("north", 7.5, 65),
    ("south", 3.0, 55),   # out of order, but within its window: counts for minute 0
    ("south", 8.0, 90), ("north", 1.0, 125),
    ("north", 99.0, 20),  # minute 0 closed at 60 s + 10 s grace: late, dropped
    ("south", 2.0, 130),
]


async def main_async(broker: str | None) -> tuple[dict[tuple[str, float], float], int]:
    app = ais.App("windowed-totals", broker=broker, commit_interval_ms=100)
    sales = app.topic("sales", key=str, value=float, partitions=1)
    totals = (app.stream(sales).group_by_key()
              .windowed_by(ais.TumblingWindows(60.0, grace=10.0))
              .aggregate(0.0, lambda _store, amount, total: total + amount,
                         materialized="sales-per-minute", value_serde=float))
    latest: dict[tuple[str, float], float] = {}

    def keep(window: ais.Windowed[str], total: float | None) -> None:
        if total is not None:  # a window's total is never deleted here; None is a tombstone
            latest[(window.key, window.start - T0)] = total

    totals.to_stream().foreach(keep)
    async with app.producer() as producer:
        for store, amount, at in SALES:
            await producer.send(sales, store, amount, timestamp=T0 + at)
    async with app:
        await app.wait_until_caught_up(timeout=60)
    return latest, app.late_records.total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--broker", help="default: AIOSTREAMS_BROKER, else memory://")
    args = parser.parse_args()
    latest, late = ais.run_event_loop(main_async(args.broker))
    for (store, start), total in sorted(latest.items()):
        print(f"{store:>6} minute {int(start // 60)}: {total:7.2f}")
    print(f"late records dropped: {late}")


if __name__ == "__main__":
    main()
