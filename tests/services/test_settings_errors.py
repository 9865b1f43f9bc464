"""Every settings object of the services raises ConfigError for a bad value, as App's
settings and Retry do, so one ``except ConfigError`` catches a misconfigured app (and it
is still a ValueError)."""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aiostreams import (
    Adaptive,
    App,
    CircuitBreaker,
    ConfigError,
    Memo,
    Overloaded,
    RateLimit,
    ServiceContract,
)
from aiostreams.services.budget import RetryBudget
from aiostreams.services.limit import FixedLimit

SERVICES = Path(__file__).resolve().parents[2] / "aiostreams" / "services"


def declare(**settings: Any) -> Any:
    return App("settings-errors", broker="memory://").service("svc", **settings)


BAD: dict[str, Callable[[], Any]] = {
    "Adaptive min > max": lambda: Adaptive(min=10, initial=10, max=5),
    "Adaptive backoff": lambda: Adaptive(backoff=1.5),
    "Adaptive algorithm": lambda: Adaptive(algorithm="vegas"),  # type: ignore[arg-type]
    "RateLimit calls": lambda: RateLimit(0, per=1.0),
    "RateLimit burst": lambda: RateLimit(5, per=1.0, burst=0),
    "CircuitBreaker ratio": lambda: CircuitBreaker(failure_ratio=0.0),
    "Memo ttl": lambda: Memo(ttl=-1.0),
    "ServiceContract overlap": lambda: ServiceContract(transient_statuses=frozenset({429})),
    "ServiceContract max_retry_after": lambda: ServiceContract(max_retry_after=0.0),
    "Overloaded retry_after": lambda: Overloaded(retry_after=-1.0),
    "RetryBudget ratio": lambda: RetryBudget(-0.5),
    "FixedLimit": lambda: FixedLimit(0),
    "service timeout": lambda: declare(timeout=-1.0),
    "service concurrency": lambda: declare(concurrency=0),
    "service retry_budget": lambda: declare(retry_budget=-1.0),
}


@pytest.mark.parametrize("make", BAD.values(), ids=list(BAD))
def test_a_bad_service_setting_raises_config_error(make: Callable[[], Any]) -> None:
    with pytest.raises(ConfigError):
        make()


def test_the_services_package_raises_no_plain_value_error() -> None:
    """A new settings class keeps the rule: no ``raise ValueError(...)`` in services/."""
    plain = []
    for path in sorted(SERVICES.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) \
                    and isinstance(node.exc.func, ast.Name) and node.exc.func.id == "ValueError":
                plain.append(f"{path.name}:{node.lineno}")
    assert plain == [], f"raise ConfigError (aiostreams.errors) instead of ValueError at {plain}"
