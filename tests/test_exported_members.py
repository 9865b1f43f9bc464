"""The public surface is what we mean to export: no more, no less."""

from __future__ import annotations

import aiostreams

EXPECTED = {
    # the app and its building blocks
    "App", "AppState", "Settings", "load_settings", "Topic", "Topology", "StoreSpec",
    "Processor", "ProcessorContext", "PunctuationType", "Record", "TopicPartition", "Headers",
    # in and out, lifecycle
    "AppProducer", "AppConsumer", "Resource", "ResourceClosedError", "run_event_loop",
    # read-only views of a running app (app.status())
    "AppStatus", "TaskStatus", "WorkerStatus",
    # the DSL
    "Stream", "Table", "TumblingWindows", "HoppingWindows", "SessionWindows", "JoinWindows",
    "SlidingWindows",
    "Windowed", "TimeWindowedSerde", "SessionWindowedSerde", "kv_store", "window_store",
    "until_window_closes", "until_time_limit",
    # execution policy
    "Ordering", "Retry", "OnError",
    # serdes
    "Serde", "serde_for", "BytesSerde", "StrSerde", "IntSerde", "LongSerde", "FloatSerde",
    "JsonSerde", "PydanticSerde",
    # errors
    "AiostreamsError", "ConfigError", "TopologyError", "CoPartitioningError",
    "TransportError", "BrokerUnavailableError", "UnknownTopicError", "SerializationError",
    "DeserializationError", "ProcessingError", "TaskFailedError",
    "__version__",
}


def test_all_lists_exactly_the_public_api() -> None:
    assert set(aiostreams.__all__) == EXPECTED


def test_every_exported_name_exists() -> None:
    for name in aiostreams.__all__:
        assert hasattr(aiostreams, name), name
