"""The public surface is what we mean to export: no more, no less (httpx's test of the
same name).

Checks, each stated as the rule it enforces:

1. ``aiostreams.__all__`` is exactly the list below, and every name in it exists;
2. every exported class and function has a docstring of its own (not inherited, not a
   dataclass's generated signature);
3. every internal package says in its ``__init__`` what it offers users (``__all__``,
   possibly empty);
4. no internal type leaks through the public API: every aiostreams class that appears in
   the type hints of an exported function, or of a public method or property (``__init__``
   included, except for the classes only the DSL makes) of an exported class, is itself
   listed in ``__all__`` of :mod:`aiostreams` or of a documented user module
   (:data:`USER_MODULES`).
"""

from __future__ import annotations

import importlib
import inspect
import sys
import typing
from collections import ChainMap
from collections.abc import Callable, Iterator
from typing import Any

import aiostreams

EXPECTED = {
    # the app and its building blocks
    "App", "AppState", "Settings", "load_settings", "Topic", "Topology", "StoreSpec",
    "Processor", "ProcessorContext", "PunctuationType", "Record", "TopicPartition", "Headers",
    # in and out, lifecycle
    "AppProducer", "AppConsumer", "Resource", "ResourceClosedError", "run_event_loop",
    # read-only views of a running app (app.status())
    "AppStatus", "TaskStatus", "WorkerStatus", "StandbyStatus",
    # the DSL
    "Stream", "Table", "TumblingWindows", "HoppingWindows", "SessionWindows", "JoinWindows",
    "SlidingWindows", "GlobalTable",
    "Windowed", "TimeWindowedSerde", "SessionWindowedSerde", "kv_store", "window_store",
    "until_window_closes", "until_time_limit", "Versioned", "VersionedRecord", "versioned_store",
    # execution policy
    "Ordering", "Retry", "OnError",
    # the services a pipeline calls (app.service)
    "DeclaredService", "Adaptive", "RateLimit", "CircuitBreaker", "Memo", "Overloaded",
    "ServiceContract",
    # serdes
    "Serde", "serde_for", "BytesSerde", "StrSerde", "IntSerde", "LongSerde", "FloatSerde",
    "JsonSerde", "PydanticSerde",
    # errors
    "AiostreamsError", "ConfigError", "TopologyError", "CoPartitioningError",
    "TransportError", "BrokerUnavailableError", "UnknownTopicError", "SerializationError",
    "DeserializationError", "ProcessingError", "TaskFailedError", "UncommittedStopError",
    "__version__",
}


def test_all_lists_exactly_the_public_api() -> None:
    assert set(aiostreams.__all__) == EXPECTED


def test_every_exported_name_exists() -> None:
    for name in aiostreams.__all__:
        assert hasattr(aiostreams, name), name


INTERNAL_PACKAGES = ["engine", "topology", "transport", "state", "sinks", "runtime", "commands",
                     "localkafka"]

USER_MODULES = [
    "aiostreams", "aiostreams.windows", "aiostreams.ops.status", "aiostreams.testing",
    "aiostreams.dsl", "aiostreams.topology.topology", "aiostreams.transport",
    "aiostreams.state", "aiostreams.sinks", "aiostreams.localkafka", "aiostreams.commands",
    "aiostreams.ops.queries", "aiostreams.ops.inspection", "aiostreams.services",
    "aiostreams.replay",
]
"""Modules users import: the package and the documented modules whose ``__all__`` names
what users hold (window specs, status views, test tools, the classes the DSL returns, a
built topology's parts, transports, stores, the Spark sinks, the local broker, the
interactive-query views and their errors, the declared services' settings)."""


MADE_BY_THE_DSL = {aiostreams.Stream, aiostreams.Table}
"""Users get these from ``app.stream``/``app.table`` and never construct them: their
``__init__`` takes the builder's internals (a table's value getter and old-values flag)."""


def exported() -> Iterator[tuple[str, Any]]:
    for name in aiostreams.__all__:
        if name != "__version__":
            yield name, getattr(aiostreams, name)


def own_doc(obj: Any) -> str | None:
    if inspect.isclass(obj):
        doc = vars(obj).get("__doc__")
        return None if doc is None or doc.startswith(f"{obj.__name__}(") else doc
    return getattr(obj, "__doc__", None)


def test_every_export_has_a_docstring_of_its_own() -> None:
    assert [name for name, obj in exported() if not (own_doc(obj) or "").strip()] == []


def test_no_package_shows_a_public_name_it_does_not_list() -> None:
    """httpx's rule: what a package offers is its ``__all__``; any other public attribute
    (an import its code uses, a helper) is a name users would start to rely on."""
    unlisted = {}
    for package in ["aiostreams", *(f"aiostreams.{p}" for p in INTERNAL_PACKAGES),
                    "aiostreams.dsl", "aiostreams.ops", "aiostreams.testing",
                    "aiostreams.settings", "aiostreams.lifecycle", "aiostreams.services"]:
        module = importlib.import_module(package)
        extra = [n for n in vars(module) if not n.startswith("_")
                 and n not in module.__all__ and not inspect.ismodule(getattr(module, n))]
        if extra:
            unlisted[package] = extra
    assert unlisted == {}


def test_every_internal_package_declares_what_it_offers_users() -> None:
    missing = [p for p in INTERNAL_PACKAGES
               if not hasattr(importlib.import_module(f"aiostreams.{p}"), "__all__")]
    assert missing == []


def user_facing() -> set[int]:
    ids: set[int] = set()
    for name in USER_MODULES:
        module = importlib.import_module(name)
        ids.update(id(getattr(module, n)) for n in module.__all__)
    return ids


def every_aiostreams_name() -> dict[str, Any]:
    """Names of every loaded aiostreams module, for hints written under TYPE_CHECKING."""
    names: dict[str, Any] = {}
    for module_name, module in sorted(sys.modules.items()):
        if module_name.startswith("aiostreams"):
            for key, value in vars(module).items():
                if inspect.isclass(value):
                    names.setdefault(key, value)
    return names


def public_callables(obj: Any) -> Iterator[tuple[str, Callable[..., Any]]]:
    if not inspect.isclass(obj):
        if inspect.isfunction(obj):  # not a type alias such as Headers
            yield obj.__name__, obj
        return
    for name in dir(obj):
        if name.startswith("_") and (name != "__init__" or obj in MADE_BY_THE_DSL):
            continue
        member = inspect.getattr_static(obj, name)
        if isinstance(member, property) and member.fget is not None:
            member = member.fget
        elif isinstance(member, staticmethod | classmethod):
            member = member.__func__
        if inspect.isfunction(member) and member.__module__.startswith("aiostreams"):
            yield f"{obj.__name__}.{name}", member


def classes_in(hint: Any) -> Iterator[type]:
    if isinstance(hint, type) and typing.get_origin(hint) is None:
        yield hint
    for arg in typing.get_args(hint):
        yield from classes_in(arg if not isinstance(arg, list) else tuple(arg))
    origin = typing.get_origin(hint)
    if isinstance(origin, type):
        yield origin


def internal_types_in_public_signatures() -> dict[str, list[str]]:
    allowed = user_facing()
    names = every_aiostreams_name()
    leaks: dict[str, list[str]] = {}
    for _, obj in exported():
        for where, fn in public_callables(obj):
            hints = typing.get_type_hints(fn, localns=ChainMap(fn.__globals__, names))
            for hint in hints.values():
                for cls in classes_in(hint):
                    if cls.__module__.startswith("aiostreams") and id(cls) not in allowed:
                        leaks.setdefault(f"{cls.__module__}.{cls.__qualname__}",
                                         []).append(where)
    return leaks


def test_no_internal_type_in_a_public_signature() -> None:
    assert internal_types_in_public_signatures() == {}


def test_the_leak_check_sees_an_internal_return_type() -> None:
    from aiostreams.engine.task_state import TaskSettings

    def task_settings() -> TaskSettings:
        """An exported function returning an engine type."""
        raise NotImplementedError

    aiostreams.__all__.append("task_settings")
    aiostreams.task_settings = task_settings  # type: ignore[attr-defined]
    try:
        assert internal_types_in_public_signatures() == {
            f"{TaskSettings.__module__}.{TaskSettings.__qualname__}": ["task_settings"]}
    finally:
        aiostreams.__all__.remove("task_settings")
        del aiostreams.task_settings  # type: ignore[attr-defined]
