"""The declared services' figures as Prometheus metric families, and as a status-line part.

Read at scrape (or redraw) time from each service's live object on the app's loop
(:attr:`DeclaredService.current`); a service the app has not called yet has no series.
Every family carries the labels ``app`` and ``service``:

- ``aiostreams_service_limit`` / ``_in_flight`` / ``_waiting_for_permit`` (gauges): the
  concurrency limit now (it moves when adaptive), calls out, records waiting for a permit;
- ``aiostreams_service_learned_rate`` / ``_rate_ceiling`` (gauges, calls/s): the pace the
  service's slow-downs and headers taught (0: not paced, nothing learned yet), and the
  rate it last accepted when refusing (0: none yet);
- ``aiostreams_service_held`` (gauge): records held now - after a slow-down answer or by
  an open breaker - in place, spending no attempt; ``_paused_seconds`` (gauge): seconds
  until dispatch resumes after a ``Retry-After`` or a backoff (0: not paused);
- ``aiostreams_service_breaker_state`` (gauge, label ``state``): 1 for the current state;
  ``_breaker_opened`` (counter): times it opened;
- ``aiostreams_service_slow_downs`` (counter): slow-down answers (429/503, ``Overloaded``:
  the same as ``_calls{outcome="overloaded"}``, for dashboards that want the 429s alone);
- ``aiostreams_service_held_total`` / ``_hold_expired`` / ``_permanent_errors``
  (counters): calls held at least once, held calls failed for passing ``max_hold``,
  answers the contract called permanent (not retried);
- ``aiostreams_service_calls`` (counter, label ``outcome``): calls made, by how they ended
  (success, overloaded = 429/503, timeout, error) - the errors by kind;
- ``aiostreams_service_latency_seconds`` (histogram): from dispatch to answer;
- ``aiostreams_service_calls_saved`` (counter, label ``by``): records answered without a
  call of their own (``coalescing``, ``memo``);
- ``aiostreams_service_held_by_breaker`` / ``_retries_refused`` (counters): calls failed in an
  outage and held, retries the retry budget held (refused at first ask, let out
  once it refilled).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from aiostreams.services.breaker import BreakerState
from aiostreams.services.declared import DeclaredService
from aiostreams.services.outcome import Outcome
from aiostreams.services.service import Service
from aiostreams.services.stats import LATENCY_BUCKETS

__all__ = ["service_metrics", "service_status"]

_LABELS = ["app", "service"]


def _live(services: Mapping[str, DeclaredService]) -> list[tuple[str, Service]]:
    return [(name, d.current) for name, d in sorted(services.items()) if d.current is not None]


def service_metrics(app: str, services: Mapping[str, DeclaredService]) -> Iterable[Metric]:
    """One family per figure, one sample per live service (see the module docstring)."""
    live = _live(services)
    if not live:
        return
    gauges: dict[str, tuple[str, Callable[[Service], float]]] = {
        "limit": ("The service's concurrency limit now (moves when adaptive).",
                  lambda s: s.limit),
        "in_flight": ("Calls to the service out now.", lambda s: s.in_flight),
        "waiting_for_permit": ("Records waiting for a permit (pause, learned rate, breaker, "
                               "concurrency place or token): not executing, their timeouts "
                               "not running.", lambda s: s.waiting),
        "learned_rate": ("Calls/s the service's dispatch is paced at, learned from its "
                         "slow-downs and rate-limit headers (0: not paced).",
                         lambda s: s.learned.pace(s.clock.monotonic()) or 0.0),
        "rate_ceiling": ("Calls/s the service accepted when it last refused calls "
                         "(0: it has not refused any).", lambda s: s.learned.ceiling or 0.0),
        "held": ("Records held now after a slow-down answer or by an open breaker: in "
                 "place, spending no attempt.", lambda s: s.held),
        "paused_seconds": ("Seconds until dispatch resumes after a Retry-After or a "
                           "backoff (0: not paused).",
                           lambda s: max(0.0, s.learned.paused_until - s.clock.monotonic())),
    }
    for metric, (doc, read) in gauges.items():
        family = GaugeMetricFamily(f"aiostreams_service_{metric}", doc, labels=_LABELS)
        for name, service in live:
            family.add_metric([app, name], float(read(service)))
        yield family
    counters: dict[str, tuple[str, Callable[[Service], float]]] = {
        "slow_downs": ("Slow-down answers (429/503, Overloaded): held, never an attempt.",
                       lambda s: s.stats.outcomes[Outcome.OVERLOADED]),
        "held_total": ("Calls held at least once (slow-down or outage).",
                       lambda s: s.stats.held_total),
        "hold_expired": ("Held calls failed to on_error for passing max_hold.",
                         lambda s: s.stats.hold_expired),
        "permanent_errors": ("Answers the service's contract calls permanent (not retried).",
                             lambda s: s.stats.permanent),
        "breaker_opened": ("Times the circuit breaker opened.",
                           lambda s: s.breaker.opened if s.breaker is not None else 0),
    }
    for metric, (doc, read) in counters.items():
        counter = CounterMetricFamily(f"aiostreams_service_{metric}", doc, labels=_LABELS)
        for name, service in live:
            counter.add_metric([app, name], float(read(service)))
        yield counter
    breaker = GaugeMetricFamily("aiostreams_service_breaker_state",
                                "1 for the circuit breaker's current state, else 0.",
                                labels=[*_LABELS, "state"])
    calls = CounterMetricFamily("aiostreams_service_calls",
                                "Calls made to the service, by outcome (overloaded: 429/503).",
                                labels=[*_LABELS, "outcome"])
    latency = HistogramMetricFamily("aiostreams_service_latency_seconds",
                                    "Seconds from a call's dispatch to its answer.",
                                    labels=_LABELS)
    saved = CounterMetricFamily("aiostreams_service_calls_saved",
                                "Records answered without a call of their own, by what "
                                "answered them (coalescing, memo).", labels=[*_LABELS, "by"])
    held = CounterMetricFamily("aiostreams_service_held_by_breaker",
                               "Calls that failed in an outage and were held, not failed.",
                               labels=_LABELS)
    refused = CounterMetricFamily("aiostreams_service_retries_refused",
                                  "Retries the service's retry budget held until it refilled.",
                                  labels=_LABELS)
    for name, service in live:
        stats = service.stats
        for state in BreakerState:
            breaker.add_metric([app, name, state.value],
                               1.0 if service.breaker_state is state else 0.0)
        for outcome in Outcome:
            calls.add_metric([app, name, outcome.value], stats.outcomes[outcome])
        cumulative, buckets = 0, []
        for bound, count in zip([*LATENCY_BUCKETS, float("inf")], stats.latency_counts,
                                strict=True):
            cumulative += count
            buckets.append(("+Inf" if bound == float("inf") else repr(bound), cumulative))
        latency.add_metric([app, name], buckets, stats.latency_sum)
        saved.add_metric([app, name, "coalescing"], stats.saved_by_coalescing)
        saved.add_metric([app, name, "memo"], stats.saved_by_memo)
        held.add_metric([app, name], stats.held_by_breaker)
        refused.add_metric([app, name], stats.retries_refused)
    yield from (breaker, calls, latency, saved, held, refused)


def service_status(services: Mapping[str, DeclaredService]) -> str:
    """The services' part of the status line, e.g. ``customers: limit 48 · out 40 ·
    waiting 3 · held 0 · p99 25ms · rate 15.0/s · 429s 12 · errors 2 · breaker closed ·
    saved 120`` ('' without any; ``rate`` only once one is learned)."""
    parts = []
    for name, service in _live(services):
        stats = service.stats
        slow_downs = stats.outcomes[Outcome.OVERLOADED]
        errors = stats.calls - stats.outcomes[Outcome.SUCCESS] - slow_downs
        p99 = stats.latency_quantile(0.99)
        p99_text = f"{p99 * 1000:.0f}ms" if p99 != float("inf") else ">10s"
        pace = service.learned.pace(service.clock.monotonic())
        rate = f" · rate {pace:,.1f}/s" if pace is not None else ""
        parts.append(f"{name}: limit {service.limit:,} · out {service.in_flight:,} · "
                     f"waiting {service.waiting:,} · held {service.held:,} · "
                     f"p99 {p99_text}{rate} · 429s {slow_downs:,} · errors {errors:,} · "
                     f"breaker {service.breaker_state.value} · saved "
                     f"{stats.saved_by_coalescing + stats.saved_by_memo:,}")
    return " | ".join(parts)
