"""The Kafka client options an app's settings give: the security protocol, SASL (PLAIN or
SCRAM) and the TLS files turned into one ``ssl.SSLContext``.

Only a ``kafka://`` broker takes options; any other broker (``memory://``) gets none.
A secret (the SASL password) is handed over wrapped and unwrapped by the client only.
TLS files that cannot be loaded are a :class:`~aiostreams.errors.ConfigError` naming the
files, raised when the transport is made, never later on a connection.
"""

from __future__ import annotations

import ssl
from typing import Any

from aiostreams.errors import ConfigError
from aiostreams.settings.config import Settings


def client_options(s: Settings) -> dict[str, Any]:
    """Kafka client options from the settings: how long a client's start waits for a
    broker (``connect_timeout``, capped by ``broker_timeout``), the security protocol,
    SASL (PLAIN or SCRAM), and TLS files turned into one ``ssl.SSLContext``."""
    if not s.broker.startswith("kafka://"):
        return {}
    opts: dict[str, Any] = {"security_protocol": s.security_protocol,
                            "connect_timeout": min(s.connect_timeout, s.broker_timeout)}
    if s.sasl_mechanism:
        opts["sasl_mechanism"] = s.sasl_mechanism
    if s.sasl_username:
        opts["sasl_plain_username"] = s.sasl_username
    if s.sasl_password is not None:
        opts["sasl_plain_password"] = s.sasl_password  # unwrapped by the client only
    if s.security_protocol in ("SSL", "SASL_SSL") or s.ssl_cafile or s.ssl_certfile:
        opts["ssl_context"] = ssl_context(s)
    return opts


def ssl_context(s: Settings) -> ssl.SSLContext:
    """One TLS context from ``ssl_cafile``, ``ssl_certfile``, ``ssl_keyfile`` and
    ``ssl_key_password``."""
    try:
        context = ssl.create_default_context(
            cafile=str(s.ssl_cafile) if s.ssl_cafile else None)
        if s.ssl_certfile:
            password = (s.ssl_key_password.get_secret_value()
                        if s.ssl_key_password is not None else None)
            context.load_cert_chain(str(s.ssl_certfile),
                                    str(s.ssl_keyfile) if s.ssl_keyfile else None,
                                    password)
    except (OSError, ssl.SSLError) as e:
        raise ConfigError(
            f"cannot load the TLS files (ssl_cafile={s.ssl_cafile}, "
            f"ssl_certfile={s.ssl_certfile}, ssl_keyfile={s.ssl_keyfile}): {e}"
        ) from None
    return context
