"""What an app's settings give the engine: the :class:`TaskSettings` every task runs with,
the :class:`WorkerConfig` of its worker, and its tracing.

Durations: settings in milliseconds (``commit_interval_ms``, ``max_task_idle_ms``,
``repartition_purge_interval_ms``, named as Kafka Streams names them) become float seconds
here; the engine sees seconds only. Invariant: ``on_error='dead_letter'`` has a
``dead_letter_topic``, else :class:`~aiostreams.errors.ConfigError` before anything starts.
Tracing imports ``opentelemetry`` only when it is on.
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING, Any

from aiostreams.engine.placement_member import PlacementConfig, PlacementSettings
from aiostreams.engine.task import TaskSettings
from aiostreams.engine.worker import WorkerConfig
from aiostreams.errors import ConfigError
from aiostreams.policies import OnError, Ordering, Retry
from aiostreams.runtime.origin import OriginMarks, OriginMode
from aiostreams.settings.config import Settings
from aiostreams.topology.topology import Topology

if TYPE_CHECKING:
    from aiostreams.engine.tracing import Tracing


def task_settings(s: Settings, retry: Retry | None, tracing: Tracing | None,
                  topology: Topology | None = None) -> TaskSettings:
    """The settings of every task; ``retry`` (the app's ``retry=``) overrides the
    ``retry_*`` settings. ``topology``: the app's, for its origin marks (which topics it
    reads back)."""
    policy = retry or Retry(attempts=s.retry_attempts, backoff=s.retry_backoff,
                            max_backoff=s.retry_max_backoff)
    on_error = OnError.parse(s.effective_on_error)
    if on_error is OnError.DEAD_LETTER and not s.dead_letter_topic:
        raise ConfigError("on_error='dead_letter' needs dead_letter_topic to be set")
    return TaskSettings(
        max_in_flight=s.max_in_flight,
        max_concurrency=s.max_concurrency,
        max_task_buffer_bytes=s.max_task_buffer_bytes,
        ordering=Ordering.parse(s.ordering),
        max_task_idle=s.max_task_idle_ms / 1000.0,
        max_buffered_per_partition=s.max_buffered_per_partition,
        retry=policy,
        on_error=on_error,
        dead_letter_topic=s.dead_letter_topic,
        processing_timeout=s.processing_timeout,
        max_record_bytes=s.max_record_bytes,
        tracing=tracing,
        lineage=s.lineage,
        cache_max_bytes=s.cache_max_bytes,
        origins=origin_marks(s, topology),
    )


def origin_marks(s: Settings, topology: Topology | None) -> OriginMarks | None:
    """Which outputs carry the origin header (:mod:`aiostreams.runtime.origin`): every one
    with ``origin_headers`` (a replay), those to the topics the app reads back (its sinks
    write them, its sources read them) when it records service answers, else none."""
    if s.origin_headers:
        mode = OriginMode.REPLAY
    elif s.record_services_dir is not None:
        mode = OriginMode.RECORD
    else:
        return None
    subs = topology.build() if topology is not None else []
    reads = {t for sub in subs for t in sub.source_topics}
    writes = {t for sub in subs for t in sub.sink_topics}
    return OriginMarks(mode).reading(reads & writes)


def worker_config(app_id: str, s: Settings, topology: Topology,
                  task: TaskSettings) -> WorkerConfig:
    """The configuration of the worker of app ``app_id`` (its consumer group)."""
    return WorkerConfig(
        app_id=app_id,
        task=task,
        commit_interval=s.commit_interval_ms / 1000.0,
        purge_interval=s.repartition_purge_interval_ms / 1000.0,
        poll_timeout=s.poll_timeout,
        max_poll_records=s.max_poll_records,
        drain_timeout=s.drain_timeout,
        broker_timeout=s.broker_timeout,
        exactly_once=s.processing_guarantee == "exactly_once",
        default_partitions=s.default_partitions,
        group_instance_id=s.group_instance_id,
        static_membership=s.static_membership,
        client_id=s.client_id or app_id,
        state_dir=s.state_dir,
        node_retry=topology.node_retries,
        stuck_record_warning=s.stuck_record_warning,
        offset_out_of_range=s.offset_out_of_range,
        client_watchdog_interval=s.client_watchdog_interval,
        client_stall_timeout=s.client_stall_timeout,
        corrupt_fetch_limit=s.corrupt_fetch_limit,
        placement=placement_config(s),
    )


def placement_config(s: Settings) -> PlacementConfig | None:
    """The worker's state-aware placement, when it keeps standbys (else None: the range
    assignment). Raises :class:`ConfigError` for standbys without persistent stores."""
    if s.num_standby_replicas == 0:
        return None
    if s.state_dir is None:
        raise ConfigError(
            f"num_standby_replicas={s.num_standby_replicas} needs persistent stores: set "
            "state_dir (a standby's copy lives in its files), or num_standby_replicas=0")
    return PlacementConfig(
        host=s.host_id or socket.gethostname(), worker_index=0,
        settings=PlacementSettings(num_standby_replicas=s.num_standby_replicas,
                                   acceptable_recovery_lag=s.acceptable_recovery_lag,
                                   max_warmup_replicas=s.max_warmup_replicas),
        probing_rebalance_interval=s.probing_rebalance_interval)


def load_tracing(enabled: bool, provider: Any) -> Tracing | None:
    """The app's tracing (``tracing=True``, or a ``tracer_provider``), else None - and then
    ``opentelemetry`` is never imported."""
    if not enabled and provider is None:
        return None
    try:
        from aiostreams.engine.tracing import Tracing
    except ImportError as e:
        raise ConfigError(f"tracing=True needs OpenTelemetry ({e}): pip install "
                          "'aiostreams[otel]', or leave tracing off") from None
    return Tracing(provider)
