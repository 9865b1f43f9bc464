"""aiostreams: asyncio-native stream processing on Apache Kafka.

Out-of-order execution, in-order semantics: processors may ``await`` slow I/O with thousands
of records in flight, yet outputs, state and committed offsets are exactly those of a
one-record-at-a-time run.
"""

from aiostreams import moved  # noqa: F401 (installs the finder of the paths that moved in 0.4)
from aiostreams.app import App, run_event_loop
from aiostreams.clients import AppConsumer, AppProducer
from aiostreams.dsl.builder import Stream, Table
from aiostreams.dsl.global_table import GlobalTable
from aiostreams.errors import (
    AiostreamsError,
    BrokerUnavailableError,
    ConfigError,
    CoPartitioningError,
    DeserializationError,
    ProcessingError,
    SerializationError,
    TaskFailedError,
    TopologyError,
    TransportError,
    UncommittedStopError,
    UnknownTopicError,
)
from aiostreams.lifecycle.resources import Resource, ResourceClosedError
from aiostreams.lifecycle.state import AppState
from aiostreams.ops.status import AppStatus, StandbyStatus, TaskStatus, WorkerStatus
from aiostreams.policies import OnError, Ordering, Retry
from aiostreams.serde import (
    BytesSerde,
    FloatSerde,
    IntSerde,
    JsonSerde,
    LongSerde,
    PydanticSerde,
    Serde,
    StrSerde,
    serde_for,
)
from aiostreams.services import (
    Adaptive,
    CircuitBreaker,
    DeclaredService,
    Memo,
    Overloaded,
    RateLimit,
    ServiceContract,
)
from aiostreams.settings.config import Settings, load_settings
from aiostreams.state import kv_store, window_store
from aiostreams.state.versioned import Versioned, VersionedRecord, versioned_store
from aiostreams.topic import Topic
from aiostreams.topology.processor import Processor, ProcessorContext, PunctuationType
from aiostreams.topology.topology import StoreSpec, Topology
from aiostreams.types import Headers, Record, TopicPartition
from aiostreams.windows import (
    HoppingWindows,
    JoinWindows,
    SessionWindowedSerde,
    SessionWindows,
    SlidingWindows,
    TimeWindowedSerde,
    TumblingWindows,
    Windowed,
    until_time_limit,
    until_window_closes,
)

__version__ = "0.1.0"

__all__ = [
    "Adaptive",
    "AiostreamsError",
    "App",
    "AppConsumer",
    "AppProducer",
    "AppState",
    "AppStatus",
    "BrokerUnavailableError",
    "BytesSerde",
    "CircuitBreaker",
    "CoPartitioningError",
    "ConfigError",
    "DeclaredService",
    "DeserializationError",
    "FloatSerde",
    "GlobalTable",
    "Headers",
    "HoppingWindows",
    "IntSerde",
    "JoinWindows",
    "JsonSerde",
    "LongSerde",
    "Memo",
    "OnError",
    "Ordering",
    "Overloaded",
    "ProcessingError",
    "Processor",
    "ProcessorContext",
    "PunctuationType",
    "PydanticSerde",
    "RateLimit",
    "Record",
    "Resource",
    "ResourceClosedError",
    "Retry",
    "Serde",
    "SerializationError",
    "ServiceContract",
    "SessionWindowedSerde",
    "SessionWindows",
    "Settings",
    "SlidingWindows",
    "StandbyStatus",
    "StoreSpec",
    "StrSerde",
    "Stream",
    "Table",
    "TaskFailedError",
    "TaskStatus",
    "TimeWindowedSerde",
    "Topic",
    "TopicPartition",
    "Topology",
    "TopologyError",
    "TransportError",
    "TumblingWindows",
    "UncommittedStopError",
    "UnknownTopicError",
    "Versioned",
    "VersionedRecord",
    "Windowed",
    "WorkerStatus",
    "__version__",
    "kv_store",
    "load_settings",
    "run_event_loop",
    "serde_for",
    "until_time_limit",
    "until_window_closes",
    "versioned_store",
    "window_store",
]
