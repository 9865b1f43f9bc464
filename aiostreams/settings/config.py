"""Settings: one pydantic model, filled from code, ``AIOSTREAMS_*`` environment variables
and a TOML file (in that order of precedence: code wins).

Unknown keys and bad values are rejected with a message naming the key, in every source:
an ``AIOSTREAMS_*`` environment variable that is neither a setting nor one of the
project's tool variables (:data:`TOOL_VARIABLES`) is an error too, so a misspelled
``AIOSTREAMS_MAX_INFLIGHT=5`` is not silently ignored. Keys that users
will search for under Kafka Streams' names keep them (``commit_interval_ms``,
``max_task_idle_ms``); other durations are float seconds.
"""

from __future__ import annotations

import difflib
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from aiostreams.errors import ConfigError


class Settings(BaseSettings):
    """An app's settings: keyword arguments of ``App(...)``, a config file and
    ``AIOSTREAMS_*`` environment variables (see :func:`load_settings` for precedence)."""

    model_config = SettingsConfigDict(
        env_prefix="AIOSTREAMS_", extra="forbid", validate_assignment=True, frozen=False
    )

    broker: str = Field("memory://", description="memory://[name] or kafka://host:port[,...]")
    processing_guarantee: Literal["at_least_once", "exactly_once"] = Field(
        "at_least_once", description=(
            "exactly_once: each commit is one Kafka transaction (outputs, changelogs, "
            "offsets) and consumers read committed data only"))
    max_in_flight: int = Field(
        20_000, ge=1, description="reorder-buffer slots per task: records issued and not yet "
        "retired (executing, waiting for their key, or finished and waiting behind an older "
        "record). Large, so one slow record does not stall the records behind it; the memory "
        "they hold is bounded by max_task_buffer_bytes")
    max_concurrency: int | None = Field(
        1000, ge=1, description="async records executing at once per task (None: "
        "max_in_flight; never more than it); the rest of the window holds finished records "
        "waiting to retire, and the oldest waiting record runs first, so a retried record is "
        "not queued behind newer work")
    max_task_buffer_bytes: int = Field(
        32 * 1024 * 1024, ge=1, description="memory a task's reorder buffer may hold: issued "
        "inputs until they retire, and the outputs of finished records waiting to retire, "
        "each counted as its key + value + header bytes plus a measured overhead for its "
        "Python objects (544 bytes an input, 160 an output). At the limit the task stops "
        "issuing and pauses fetching for its partitions until retirement brings it below, so "
        "one stuck record holds about this much (plus one record, and the outputs of the "
        "records executing then); fetched records wait in the partition queues, bounded by "
        "max_buffered_per_partition")
    ordering: Literal["key", "partition", "unordered"] = Field(
        "key", description=(
            "which earlier records a record waits for before it executes: same key (default),"
            " same partition (Kafka Streams' behaviour), or none"))
    max_task_idle_ms: float = Field(0.0, ge=0, description="wait for empty partitions (KIP-353)")
    commit_interval_ms: float = Field(
        1000.0, gt=0, description=(
            "how often to flush and commit (Kafka Streams' commit.interval.ms); also on "
            "revocation and shutdown"))
    repartition_purge_interval_ms: float = Field(
        30_000.0, ge=0, description="at most how often committed records are deleted from "
        "the app's repartition topics (which never expire by time); Kafka Streams' "
        "repartition.purge.interval.ms")
    max_buffered_per_partition: int = Field(
        1000, ge=1, description=(
            "records buffered per input partition before fetching from it pauses"))
    max_poll_records: int = Field(
        2000, ge=1, description=(
            "most records one fetch returns"))
    poll_timeout: float = Field(0.1, gt=0, description="seconds one fetch waits for data")
    offset_out_of_range: Literal["earliest", "latest", "fail"] = Field(
        "earliest", description="when an input partition's committed offset (or position) "
        "is outside its log - records deleted before they were read (retention, "
        "delete-records), or a log truncated or created again - resume at the log's start "
        "(earliest), at its end (latest), each with a WARNING and the counter "
        "aiostreams_source_offset_resets_total; or stop the app with an error naming the "
        "partition, the offsets and the records lost, committing nothing past the gap "
        "(fail). A partition with no committed offset starts at the beginning either way")
    drain_timeout: float = Field(30.0, ge=0, description="seconds to let in-flight work finish")
    broker_timeout: float = Field(
        120.0, gt=0, description="seconds of continuous broker trouble a running worker "
        "rides out (retrying) before it stops with the error; also caps connect_timeout")
    connect_timeout: float = Field(
        30.0, gt=0, description="seconds a Kafka client keeps trying to reach a broker when "
        "it starts (app start, app.send, app.producer(), the CLI tools) before "
        "BrokerUnavailableError; at most broker_timeout")
    on_error: Literal["fail", "skip", "dead_letter"] | None = Field(
        None, description="after the last attempt; default: dead_letter when a dead-letter "
        "topic is set, else fail")
    dead_letter_topic: str | None = Field(
        None, description=(
            "where records that failed for good go (with headers saying why); None: no dead-"
            "letter topic"))
    retry_attempts: int = Field(
        1, ge=1, description=(
            "executions per record, the first included (1: no retry)"))
    retry_backoff: float = Field(
        0.1, ge=0, description=(
            "seconds before the first retry; grows exponentially per retry, randomised by "
            "jitter"))
    retry_max_backoff: float = Field(
        30.0, ge=0, description=(
            "most seconds between two attempts"))
    processing_timeout: float | None = Field(
        300.0, gt=0, description="seconds one attempt of an async step may take before it "
        "fails (retry / dead-letter / fail path); None: unbounded. 300 s is Kafka's "
        "max.poll.interval.ms and aiohttp's default total timeout: a call still pending "
        "after that is stuck, not slow, and would otherwise stop its partition for good. "
        "Sync steps cannot be interrupted and are not bounded; Retry.timeout, when "
        "shorter, wins")
    stuck_record_warning: float | None = Field(
        60.0, gt=0, description="seconds a task's oldest unretired record may hold its "
        "partition's commit before a warning names it and /health reports the app "
        "degraded (HTTP 503); None: never")
    client_watchdog_interval: float | None = Field(
        1.0, gt=0, description="seconds between two looks at the Kafka client's own "
        "background tasks (fetcher, group coordination, heartbeat, sender): one that died, "
        "or a fetcher without a response for client_stall_timeout while the broker answers, "
        "is logged as an error, reported on /health (degraded) and the client rebuilt; "
        "None: never look (a dead client then hangs the worker silently)")
    client_stall_timeout: float | None = Field(
        60.0, gt=0, description="seconds a partition the consumer should be fetching may go "
        "without a fetch response, while the broker answers a probe on a connection of its "
        "own, before the watchdog rebuilds the consumer; None: only dead tasks count. Keep "
        "it above request_timeout (40 s): a slow link is not a stall")
    corrupt_fetch_limit: int = Field(
        5, ge=1, description="fetches in a row of one partition the client cannot parse "
        "(CRC mismatch, malformed response), each retried on a fresh connection, or "
        "rebuilds in a row of a consumer that died before fetching a record, after which "
        "the worker stops with an error naming the partition")
    default_partitions: int = Field(1, ge=1, description="for topics aiostreams creates")
    max_record_bytes: int = Field(
        1_000_000, ge=8192, description="largest key + value a sink may produce; a bigger "
        "result fails its record (retry / dead-letter path) instead of the producer. A dead "
        "letter (key, value and headers) is cut to fit it, so keep it below the producer's "
        "max_request_size and the broker's message.max.bytes (both about 1 MiB by default)")
    tracing: bool = Field(
        False, description="OpenTelemetry spans per record (queue wait, permit wait, calls, "
        "head-of-line wait, commit) to the global TracerProvider, or App(tracer_provider=); "
        "needs the otel extra: pip install 'aiostreams[otel]'. See the observability guide")
    lineage: bool = Field(
        False, description="an aiostreams-lineage header on every output naming the input "
        "record it came from (topic:partition:offset; for aggregates and joins the record "
        "that triggered it), so `aiostreams explain` can walk an output back through "
        "repartition topics to its source records. Off: no header is added. See the "
        "lineage guide")
    cache_max_bytes: int = Field(
        0, ge=0, description="the record cache of each materialized DSL aggregate in each "
        "task (Kafka Streams' statestore.cache.max.bytes, KIP-63; its default is 10 MB): "
        "updates of a key are held and only the newest is written to the store and sent "
        "downstream at the next commit, or when the cache passes this many bytes. Final "
        "values are the same; intermediate updates are fewer. 0 (the default): off, every "
        "update goes downstream. See the state guide's 'Record cache'")
    record_services_dir: Path | None = Field(
        None, description="record each answer the app's steps get from its services "
        "(app.service), keyed by the input record and call, to segment files in this "
        "directory, for `aiostreams replay` and `aiostreams explain` (off by default; "
        "see the replay guide). Answers are pickled: read only recordings you made")
    origin_headers: bool = Field(
        False, description="an aiostreams.replay.origin header on every output, naming the "
        "source record it came from (topic/partition/offset, and a path through the topics "
        "the app reads back). `aiostreams replay` sets it on the app it replays, whose diff "
        "matches outputs by it; with record_services_dir set, the records written to those "
        "topics carry it anyway (see the replay guide)")
    record_services_max_bytes: int = Field(
        256 * 1024 * 1024, ge=8192, description="cap on the recording's size on disk: past "
        "it the oldest segments (an eighth of the cap each) are deleted, so the recording "
        "holds the latest answers")
    gc_tuning: bool = Field(
        True, description="at start, freeze start-up objects out of the cyclic GC and raise "
        "its first threshold (thousands of records in flight otherwise trigger full scans)")
    state_dir: Path | None = Field(
        None, description=(
            "directory of the persistent (SQLite) stores and checkpoints, one subdirectory "
            "per task; required by persistent stores"))
    num_standby_replicas: int = Field(
        0, ge=0, description=(
            "how many other hosts keep a standby copy of each task's stores, followed from "
            "its changelog (Kafka Streams' num.standby.replicas); needs state_dir. With 0 "
            "(default) none; a change rolls (restart the workers one at a time)"))
    acceptable_recovery_lag: int = Field(
        10_000, ge=0, description=(
            "changelog records a member may lack and still count as caught up on a task: "
            "only such a member takes a task over to balance the group"))
    max_warmup_replicas: int = Field(
        2, ge=1, description=(
            "extra standbys the group keeps at once to warm up hosts a task should move to"))
    probing_rebalance_interval: float = Field(
        600.0, gt=0, description=(
            "seconds after which a member that warms tasks up rejoins, so the group can "
            "move them once warm (Kafka Streams' probing.rebalance.interval.ms, in seconds)"))
    host_id: str | None = Field(
        None, description=(
            "the host this app runs on, for placing standbys on other hosts than their "
            "active task (default: the machine's host name; the workers of "
            "`aiostreams run --workers N` share it)"))
    group_instance_id: str | None = Field(
        None, description=(
            "static group membership (KIP-345): a restart within the session timeout keeps "
            "the partitions; by default derived per worker from state_dir (see "
            "static_membership)"))
    static_membership: bool = Field(
        True, description=(
            "with a Kafka broker, a state_dir and no group_instance_id: each worker joins "
            "with an instance id derived from the state directory, stable across restarts, "
            "so a restart within the session timeout causes no rebalance and no restore; "
            "a stopped worker's partitions then wait for it up to the session timeout. "
            "False: dynamic membership. See the scaling guide"))
    client_id: str | None = Field(
        None, description=(
            "the Kafka client id of the app's clients (default: the app's name)"))
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        "PLAINTEXT", description=(
            "how to reach the brokers (Kafka's security.protocol)"))
    sasl_mechanism: str | None = Field(
        None, description=(
            "SASL mechanism, e.g. PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"))
    sasl_username: str | None = Field(
        None, description=(
            "SASL user name"))
    sasl_password: SecretStr | None = Field(
        None, description=(
            "SASL password (never printed)"))
    ssl_cafile: Path | None = Field(
        None, description=(
            "CA bundle that signs the brokers' certificates"))
    ssl_certfile: Path | None = Field(
        None, description=(
            "client certificate (mutual TLS)"))
    ssl_keyfile: Path | None = Field(
        None, description=(
            "client certificate's private key"))
    ssl_key_password: SecretStr | None = Field(
        None, description=(
            "password of the private key (never printed)"))

    @field_validator("broker")
    @classmethod
    def _broker_scheme(cls, value: str) -> str:
        if not (value.startswith("memory://") or value.startswith("kafka://")):
            raise ValueError("use memory://[name] or kafka://host:port[,host:port...]")
        if value.startswith("kafka://"):
            _check_kafka_servers(value)
        return value

    @property
    def effective_on_error(self) -> str:
        if self.on_error is not None:
            return self.on_error
        return "dead_letter" if self.dead_letter_topic else "fail"


def _check_kafka_servers(url: str) -> None:
    """Every server of a ``kafka://`` URL has a host and a port, as Kafka's own clients
    require of ``bootstrap.servers``: a missing port is refused, not guessed, so the
    address in every later message is the one that was meant."""
    servers = [server.strip() for server in url.removeprefix("kafka://").strip("/").split(",")]
    for server in servers:
        host, colon, port = server.rpartition(":")
        if not colon and server:
            fixed = ",".join(f"{s}:9092" if ":" not in s else s for s in servers)
            raise ValueError(f"{server!r} in {url!r} has no port: write kafka://{fixed} "
                             "(9092 is Kafka's usual listener port) or the port your "
                             "broker listens on")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"bad broker address {server!r} in {url!r}: expected "
                             "host:port, e.g. kafka://127.0.0.1:9092 or "
                             "kafka://b1:9092,b2:9092")


ENV_PREFIX = "AIOSTREAMS_"
TOOL_VARIABLES: dict[str, str] = {
    "AIOSTREAMS_KAFKA": "host:port of a running Kafka broker for the tests and benchmarks",
    "AIOSTREAMS_CACHE_DIR": "where aiostreams.localkafka keeps the Kafka jars",
    "AIOSTREAMS_KAFKA_VERSION": "which Kafka release aiostreams.localkafka runs (4.4.0, the "
                                "default, or 3.9.1; the test suite's broker too)",
    "AIOSTREAMS_SCHEMA_REGISTRY": "the URL of a running schema registry for the registry "
                                  "tests (python -m aiostreams.localregistry run prints it)",
    "AIOSTREAMS_CHAOS_SEED": "the random seed of the chaos tests",
    "AIOSTREAMS_CHAOS_REPEAT": "how many times the slow tier repeats the fault-injection "
                               "tests (stalled workers, connection resets, dead clients)",
    "AIOSTREAMS_ORACLE_EXAMPLES": "how many examples the Kafka Streams oracle tests draw",
    "AIOSTREAMS_FK_CONVERGE_EXAMPLES": "how many interleavings the foreign-key join "
                                       "convergence test draws",
    "AIOSTREAMS_REPLAY_EXAMPLES": "how many examples the replay determinism test draws",
}
"""``AIOSTREAMS_*`` variables that are not settings: the project's tools read them (add a
new one here, or apps refuse to start where it is set)."""


def check_environment(environ: Mapping[str, str] | None = None) -> None:
    """Raise :class:`ConfigError` for an ``AIOSTREAMS_*`` variable that is neither a
    setting nor a tool variable, naming the closest setting and listing the known ones."""
    env = os.environ if environ is None else environ
    settings = {f"{ENV_PREFIX}{name.upper()}" for name in Settings.model_fields}
    unknown = sorted(name for name in env
                     if name.upper().startswith(ENV_PREFIX)
                     and name.upper() not in settings and name.upper() not in TOOL_VARIABLES)
    if not unknown:
        return
    parts = []
    for name in unknown:
        close = difflib.get_close_matches(name.upper(), sorted(settings), n=1, cutoff=0.8)
        parts.append(f"{name} (did you mean {close[0]}?)" if close else name)
    raise ConfigError(
        f"unknown environment variable(s) {', '.join(parts)}: aiostreams reads "
        f"{ENV_PREFIX}<SETTING> for these settings: "
        f"{', '.join(sorted(Settings.model_fields))}; and, for its tools, "
        f"{', '.join(sorted(TOOL_VARIABLES))}. Fix or unset the variable.")


def load_settings(
    overrides: dict[str, Any] | None = None, toml_file: str | Path | None = None
) -> Settings:
    """Settings from a TOML file (optional, table ``[aiostreams]`` or top level), then the
    environment, then ``overrides``; raises :class:`ConfigError` naming the bad key (an
    unknown ``AIOSTREAMS_*`` variable included: :func:`check_environment`)."""
    check_environment()
    values: dict[str, Any] = {}
    file_values: dict[str, Any] = {}
    if toml_file is not None:
        path = Path(toml_file)
        try:
            data = tomllib.loads(path.read_text())
        except FileNotFoundError:
            raise ConfigError(f"config file {path} does not exist") from None
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"config file {path} is not valid TOML: {e}") from None
        file_values = dict(data.get("aiostreams", data))
    # precedence: code > environment > file. Settings(**values) lets keyword values beat
    # the environment, so a file value is passed only when the environment is silent.
    in_env = {key for key in Settings.model_fields if f"AIOSTREAMS_{key.upper()}" in os.environ}
    values.update({k: v for k, v in file_values.items() if k not in in_env})
    values.update(overrides or {})
    try:
        return Settings(**values)
    except ValidationError as e:
        raise ConfigError(describe_validation_error(e)) from None


def describe_validation_error(error: ValidationError) -> str:
    parts = []
    for item in error.errors():
        key = ".".join(str(x) for x in item["loc"]) or "settings"
        if item["type"] == "extra_forbidden":
            known = ", ".join(sorted(Settings.model_fields))
            parts.append(f"unknown setting {key!r} (known: {known})")
        else:
            field = Settings.model_fields.get(str(item["loc"][0])) if item["loc"] else None
            secret = field is not None and "SecretStr" in str(field.annotation)
            shown = "***" if secret else repr(item.get("input"))
            parts.append(f"setting {key!r}: {item['msg']} (got {shown})")
    return "invalid configuration: " + "; ".join(parts)
