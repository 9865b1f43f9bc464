"""The declared services' figures as Prometheus metric families, and as a status-line part.

Read at scrape (or redraw) time from each service's live object on the app's loop
(:attr:`DeclaredService.current`); a service the app has not called yet has no series.
Every family carries the labels ``app`` and ``service``:

- ``aiostreams_service_limit`` / ``_in_flight`` / ``_waiting_for_permit`` (gauges): the
  concurrency limit now (it moves when adaptive), calls out, records waiting for a permit;
- ``aiostreams_service_breaker_state`` (gauge, label ``state``): 1 for the current state;
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

from collections.abc import Iterable, Mapping

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
    gauges = {
        "limit": "The service's concurrency limit now (moves when adaptive).",
        "in_flight": "Calls to the service out now.",
        "waiting_for_permit": "Records waiting for a permit (breaker, concurrency place or "
                              "token): not executing, their timeouts not running.",
    }
    for metric, doc in gauges.items():
        family = GaugeMetricFamily(f"aiostreams_service_{metric}", doc, labels=_LABELS)
        for name, service in live:
            value = {"limit": service.limit, "in_flight": service.in_flight,
                     "waiting_for_permit": service.waiting}[metric]
            family.add_metric([app, name], float(value))
        yield family
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
    waiting 3 · p99 25ms · errors 2 · breaker closed · saved 120`` ('' without any)."""
    parts = []
    for name, service in _live(services):
        stats = service.stats
        errors = stats.calls - stats.outcomes[Outcome.SUCCESS]
        p99 = stats.latency_quantile(0.99)
        p99_text = f"{p99 * 1000:.0f}ms" if p99 != float("inf") else ">10s"
        parts.append(f"{name}: limit {service.limit:,} · out {service.in_flight:,} · "
                     f"waiting {service.waiting:,} · p99 {p99_text} · errors {errors:,} · "
                     f"breaker {service.breaker_state.value} · saved "
                     f"{stats.saved_by_coalescing + stats.saved_by_memo:,}")
    return " | ".join(parts)
