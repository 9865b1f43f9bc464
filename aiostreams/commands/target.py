"""What a command acts on: an app named ``MODULE:APP``, its settings, and the broker.

Settings a command line gives go through :func:`~aiostreams.settings.config.load_settings`, so a bad
key or value is rejected naming the key. Precedence, highest first: ``--set``/``--broker``,
then what the app's code (and its own config file) set, then ``AIOSTREAMS_*`` environment
variables, then ``--config FILE``.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from aiostreams.app import App
from aiostreams.commands import UsageError
from aiostreams.errors import ConfigError
from aiostreams.settings.config import Settings, load_settings
from aiostreams.transport import transport_for_url
from aiostreams.transport.base import Transport


class AppLoadError(UsageError):
    """``MODULE:APP`` does not name an App (exit code 2)."""


def load_app(spec: str) -> App:
    """Import ``MODULE`` and return its attribute ``APP`` (dots walk attributes:
    ``pkg.mod:holder.app``). The current directory is importable, as with ``python -m``.

    Raises :class:`AppLoadError` with one line naming what was wrong: the spec's shape, a
    module that does not exist, a module that raised while imported, a missing attribute,
    or an attribute that is not an :class:`App`. A :class:`ConfigError` the module raises
    (an ``App(...)`` with a bad setting) propagates as it is."""
    module_name, sep, attr_path = spec.partition(":")
    if not sep or not module_name or not attr_path:
        raise AppLoadError(
            f"expected MODULE:APP (a module and the name of its App, e.g. myproject.app:app), "
            f"got {spec!r}")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name is not None and (module_name == e.name
                                   or module_name.startswith(e.name + ".")):
            raise AppLoadError(
                f"cannot import {module_name!r}: there is no module named {e.name!r} "
                f"(searched the current directory {os.getcwd()} and PYTHONPATH; check the "
                "spelling, or run from the project's directory)") from e
        raise AppLoadError(f"importing {module_name!r} failed: {e}") from e
    except ConfigError:
        raise
    except Exception as e:
        raise AppLoadError(
            f"importing {module_name!r} raised {type(e).__name__}: {e}") from e
    target: Any = module
    walked = module_name
    for part in attr_path.split("."):
        if not hasattr(target, part):
            apps = sorted(n for n, v in vars(target).items() if isinstance(v, App))
            hint = (f"; its App(s): {', '.join(apps)}" if apps
                    else "; it defines no App at top level")
            raise AppLoadError(f"{walked!r} has no attribute {part!r}{hint}")
        target = getattr(target, part)
        walked = f"{walked}:{part}" if walked == module_name else f"{walked}.{part}"
    if not isinstance(target, App):
        raise AppLoadError(
            f"{spec!r} is {_kind(target)}, not an aiostreams App; point MODULE:APP at the "
            "App instance (app = aiostreams.App(...))")
    return target


def _kind(value: object) -> str:
    if isinstance(value, type):
        return f"the class {value.__name__}"
    if callable(value):
        return f"the callable {getattr(value, '__name__', type(value).__name__)}"
    return f"a value of type {type(value).__name__}"


def parse_assignments(items: Sequence[str] | None, what: str = "--set") -> dict[str, str]:
    """``["key=value", ...]`` → ``{"key": "value"}`` (values are validated later, by type)."""
    result: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f"{what} expects KEY=VALUE, got {item!r}")
        result[key] = value
    return result


def command_line_overrides(broker: str | None, sets: Sequence[str] | None) -> dict[str, Any]:
    overrides: dict[str, Any] = dict(parse_assignments(sets))
    if broker is not None:
        overrides["broker"] = broker
    return overrides


def apply_settings(app: App, overrides: dict[str, Any], config_file: str | None) -> None:
    """Replace ``app.settings`` (before it starts) by its settings with the command line's
    on top (see the module docstring for the precedence)."""
    if not overrides and config_file is None:
        return
    current = app.settings
    explicit = {key: getattr(current, key) for key in current.model_fields_set}
    app.settings = load_settings({**explicit, **overrides}, config_file)


def settings_for_tools(overrides: dict[str, Any], config_file: str | None) -> Settings:
    """Settings for a command that needs a broker but no app."""
    return load_settings(overrides, config_file)


def client_transport(settings: Settings, connect_timeout: float) -> Transport:
    """A transport to the settings' broker, with the app's client options (security, SASL)
    and ``connect_timeout`` seconds for a client's ``start`` to reach a broker."""
    if connect_timeout <= 0:
        raise UsageError(f"--connect-timeout must be > 0 seconds, got {connect_timeout}")
    if not settings.broker.startswith("kafka://"):
        return transport_for_url(settings.broker)
    options = _app_client_options(settings)
    options["connect_timeout"] = connect_timeout
    return transport_for_url(settings.broker, **options)


def _app_client_options(settings: Settings) -> dict[str, Any]:
    # The mapping from settings to client options is App's; borrow it rather than copy it.
    holder = App("aiostreams-cli",
                 **{key: getattr(settings, key) for key in settings.model_fields_set})
    return holder._transport_options()


async def probe_broker(settings: Settings, connect_timeout: float) -> None:
    """Connect an admin client and close it: raises BrokerUnavailableError (exit code 3)
    within ``connect_timeout`` seconds when no Kafka broker answers. Nothing to do for
    ``memory://``."""
    if not settings.broker.startswith("kafka://"):
        return
    admin = client_transport(settings, connect_timeout).admin()
    with _quiet("aiokafka"):
        await admin.start()
    await admin.stop()


@contextlib.contextmanager
def _quiet(logger_name: str) -> Iterator[None]:
    """Silence a logger below CRITICAL (unless it logs at DEBUG: ``--debug`` shows all):
    the probe's failure is reported once, as its error; aiokafka would log each attempt."""
    logger = logging.getLogger(logger_name)
    if logger.getEffectiveLevel() <= logging.DEBUG:
        yield
        return
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)
