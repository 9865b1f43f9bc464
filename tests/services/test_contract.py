"""A service's contract: what its answers mean, and what the step's Retry makes of them."""

from __future__ import annotations

import pytest

from aiostreams import Retry, ServiceContract
from aiostreams.policies import mark_retryable
from aiostreams.services import Overloaded, Verdict
from aiostreams.services.contract import DEFAULT_CONTRACT, read_headers


class HttpError(Exception):
    def __init__(self, status: int, headers: dict[str, str] | None = None) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.headers = headers or {}


class Response:
    """A returned response, as httpx's (``status_code``, ``headers``)."""

    def __init__(self, status_code: int, headers: dict[str, str] | None = None) -> None:
        self.status_code = status_code
        self.headers = headers or {}


class TransientError(Exception):
    pass


@pytest.mark.parametrize(("answer", "verdict"), [
    (HttpError(429), Verdict.SLOW_DOWN), (HttpError(503), Verdict.SLOW_DOWN),
    (Overloaded("s"), Verdict.SLOW_DOWN), (TimeoutError(), Verdict.TIMEOUT),
    (HttpError(500), Verdict.TRANSIENT), (HttpError(502), Verdict.TRANSIENT),
    (HttpError(408), Verdict.TRANSIENT), (ConnectionResetError(), Verdict.TRANSIENT),
    (HttpError(404), Verdict.PERMANENT), (HttpError(400), Verdict.PERMANENT),
    (ValueError("the user's own"), Verdict.UNCLASSIFIED),
])
def test_the_default_contract_reads_statuses_and_exception_types(
        answer: BaseException, verdict: Verdict) -> None:
    assert DEFAULT_CONTRACT.judge(answer) is verdict


def test_a_returned_429_response_is_a_slow_down_and_a_returned_404_is_the_users() -> None:
    assert DEFAULT_CONTRACT.judge(None, Response(429)) is Verdict.SLOW_DOWN
    assert DEFAULT_CONTRACT.judge(None, Response(404)) is Verdict.SUCCESS
    assert DEFAULT_CONTRACT.judge(None, {"status": 429}) is Verdict.SUCCESS  # not a response
    reading_off = ServiceContract(read_results=False)
    assert reading_off.judge(None, Response(429)) is Verdict.SUCCESS


def test_a_contract_declares_its_own_meanings() -> None:
    contract = ServiceContract(slow_down_statuses=frozenset({429}),
                               transient_statuses=frozenset({500, 503}),
                               permanent=(KeyError,),
                               slow_down=lambda e: "quota" in str(e))
    assert contract.judge(HttpError(503)) is Verdict.TRANSIENT
    assert contract.judge(KeyError("sku")) is Verdict.PERMANENT
    assert contract.judge(RuntimeError("quota exceeded")) is Verdict.SLOW_DOWN
    assert contract.judge(HttpError(600)) is Verdict.UNCLASSIFIED  # in no set


def test_a_status_given_two_meanings_is_refused() -> None:
    with pytest.raises(ValueError, match="more than one"):
        ServiceContract(transient_statuses=frozenset({429}))


def test_retry_after_is_read_as_seconds_or_an_http_date_and_capped() -> None:
    now = 1_700_000_000.0  # Tue, 14 Nov 2023 22:13:20 GMT
    assert DEFAULT_CONTRACT.hint(HttpError(429, {"retry-after": "3"}), now).retry_after == 3.0
    dated = HttpError(503, {"Retry-After": "Tue, 14 Nov 2023 22:13:30 GMT"})
    assert DEFAULT_CONTRACT.hint(dated, now).retry_after == pytest.approx(10.0)
    assert DEFAULT_CONTRACT.hint(HttpError(429, {"Retry-After": "86400"}),
                                 now).retry_after == 300.0
    assert DEFAULT_CONTRACT.hint(Overloaded("s", retry_after=1.5), now).retry_after == 1.5


def test_rate_limit_headers_are_read_in_both_styles() -> None:
    now = 1_700_000_000.0
    ietf = read_headers(Response(200, {"RateLimit-Remaining": "7", "RateLimit-Reset": "2",
                                       "RateLimit-Policy": "100;w=10"}), now)
    assert (ietf.remaining, ietf.reset_after, ietf.limit, ietf.window) == (7, 2, 100, 10)
    github = read_headers(Response(200, {"X-RateLimit-Remaining": "0",
                                         "X-RateLimit-Reset": str(int(now) + 30),
                                         "X-RateLimit-Limit": "60"}), now)
    assert (github.remaining, github.reset_after, github.limit) == (0, 30, 60)
    assert read_headers("plain result", now).empty


def test_the_contract_not_retry_on_decides_for_the_services_errors() -> None:
    retry = Retry(attempts=3, retry_on=(TransientError,))
    server_error, not_found, own = HttpError(500), HttpError(404), ValueError("bad")
    mark_retryable(server_error, True)   # what the service marks a transient answer
    mark_retryable(not_found, False)     # ... and a permanent one
    mark_retryable(own, None)            # unclassified: retry_on decides
    assert retry.should_retry(server_error, 1) and not retry.should_retry(server_error, 3)
    assert not retry.should_retry(not_found, 1)
    assert not retry.should_retry(own, 1) and retry.should_retry(TransientError(), 1)
