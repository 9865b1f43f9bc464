"""Interactive queries over HTTP, on the metrics server (:mod:`aiostreams.ops.queries` in
process).

Routes (registered by :func:`add_store_routes`):

- ``GET /stores/{name}/{key}``: the value of ``key`` in store ``name`` as JSON,
  ``{"store", "key", "partition", "value"}``. The key is the path segment (URL-decoded)
  read by the store's key serde: text for a string serde, a number for the number serdes,
  JSON for the JSON and pydantic serdes (a string key in a JSON store is quoted:
  ``/stores/totals/%22alice%22``). For a window store the answer is the key's windows,
  ``"windows": [{"start", "value"}]``, limited by ``?from=SECONDS&to=SECONDS``.
  404: no such store, or the key has no value (for a window store: no window, within
  the bounds when given, as Kafka Streams' ``fetch`` yields nothing); 400: the key (or a
  bound) cannot be read, the message says why; 503 (with ``Retry-After``): the app or the
  owning task is not running yet, or no worker owns the key's partition (a rebalance).
- ``GET /stores/{name}``: the partitions of ``name`` this worker answers for (its running
  tasks), ``{"store", "partitions"}``: what peers ask to find a key's owner.

Several workers (``aiostreams run --workers N``): each worker's server knows its own
partitions and the URLs of its peers. A key another worker owns gets a **307 redirect** to
that worker's URL for the same request (``?hop=1`` added). Why redirect rather than proxy:
the answer then comes straight from the owner, with no second request held open in a
worker that does not own the data, no peer failure to translate into this worker's
answer, and the owner's URL visible to the client (``curl -L``, ``httpx``'s
``follow_redirects``, browsers follow it). A request that already hopped once and still
lands on a non-owner (assignments moved meanwhile) gets 503 instead of a second redirect,
so redirects cannot loop.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import Sequence
from typing import Any

import aiohttp
from aiohttp import web
from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from aiostreams.errors import DeserializationError
from aiostreams.ops.inspection import OperatedApp as App
from aiostreams.ops.queries import (
    KeyNotLocalError,
    ReadOnlyStore,
    StoreNotReadyError,
    UnknownStoreError,
    local_stores,
)
from aiostreams.serde import BytesSerde, FloatSerde, IntSerde, LongSerde, Serde
from aiostreams.state.base import StoreKind

log = logging.getLogger("aiostreams.ops.queries")

PEER_TIMEOUT = 2.0
"""Seconds to wait for a peer's partitions when looking for a key's owner."""

RETRY_AFTER = "1"


class BadKeyError(ValueError):
    """A path key (or a bound) that the store's serde cannot read; the message says why."""


def parse_key(store: str, serde: Serde[Any], text: str) -> Any:
    """``text`` (a URL path segment) as a key of ``store``, read by its key ``serde``."""
    if isinstance(serde, IntSerde | LongSerde | FloatSerde):
        kind = float if isinstance(serde, FloatSerde) else int
        try:
            return kind(text)
        except ValueError:
            raise BadKeyError(f"store {store!r} has {kind.__name__} keys ({serde!r}); "
                              f"{text!r} is not one") from None
    if isinstance(serde, BytesSerde):
        return text.encode()
    try:
        return serde.deserialize(store, text.encode())
    except DeserializationError as e:
        hint = (" (a string key of a JSON store is quoted: %22text%22)"
                if "json" in repr(serde).lower() or "pydantic" in repr(serde).lower() else "")
        raise BadKeyError(f"store {store!r} cannot read key {text!r} with {serde!r}: "
                          f"{e.reason}{hint}") from None


def _bound(request: web.Request, name: str, default: float) -> float:
    given = request.query.get(name)
    if given is None:
        return default
    try:
        value = float(given)
    except ValueError:
        raise BadKeyError(f"?{name}= must be a time in seconds, got {given!r}") from None
    if math.isnan(value):
        raise BadKeyError(f"?{name}= must be a time in seconds, got {given!r}")
    return value


def _range_text(since: float, until: float) -> str:
    if math.isinf(since) and math.isinf(until):
        return ""
    return f" starting within [{since}, {until}]"


def jsonable(value: Any) -> Any:
    """``value`` as JSON data: a pydantic model by its JSON dump, the rest by pydantic's
    encoder (dataclasses, datetimes, bytes as text, ...)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return to_jsonable_python(value, fallback=repr)


def _json(status: int, body: dict[str, Any], **headers: str) -> web.Response:
    return web.Response(status=status, text=json.dumps(body), headers=headers or None,
                        content_type="application/json")


def _error(status: int, message: str, **headers: str) -> web.Response:
    return _json(status, {"error": message}, **headers)


class StoreRoutes:
    """The handlers of one metrics server; ``self_url`` and ``peers`` are base URLs
    (``http://host:port``) of this worker and of every worker of the group (this one may
    be among them: it is skipped)."""

    def __init__(self, app: App, peers: Sequence[str] = (),
                 self_url: str | None = None) -> None:
        self.app = app
        self.peers = tuple(p.rstrip("/") for p in peers)
        self.self_url = self_url.rstrip("/") if self_url else None
        self._views: dict[str, ReadOnlyStore] = {}
        self._session: aiohttp.ClientSession | None = None  # to the peers, made when needed

    async def close(self, _web_app: web.Application | None = None) -> None:
        """Close the connections to the peers (on the server's cleanup). Idempotent."""
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    def _view(self, name: str) -> ReadOnlyStore:
        view = self._views.get(name)
        if view is None:
            view = self._views[name] = self.app.store(name)
        return view

    async def partitions(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        try:
            self._view(name)
        except UnknownStoreError as e:
            return _error(404, str(e))
        mine = [s.partition for s in local_stores(self.app, name) if s.running]
        return _json(200, {"store": name, "partitions": mine})

    async def lookup(self, request: web.Request) -> web.Response:
        name, text = request.match_info["name"], request.match_info["key"]
        try:
            view = self._view(name)
            key = parse_key(name, view.key_serde(), text)
            if view.kind() is StoreKind.WINDOW:
                since = _bound(request, "from", -math.inf)
                until = _bound(request, "to", math.inf)
                windows = await view.fetch(key, since, until)
                if not windows:  # as a key-value store's missing key: 404, not 200 []
                    return _error(404, f"store {name!r} has no window for key {key!r}"
                                  f"{_range_text(since, until)}")
                return _json(200, {
                    "store": name, "key": jsonable(key), "worker": self.self_url,
                    "partition": await view.partition_of(key),
                    "windows": [{"start": s, "value": jsonable(v)} for s, v in windows]})
            value = await view.get(key)
        except UnknownStoreError as e:
            return _error(404, str(e))
        except (BadKeyError, ValueError) as e:
            return _error(400, str(e))
        except StoreNotReadyError as e:
            return _error(503, str(e), **{"Retry-After": RETRY_AFTER})
        except KeyNotLocalError as e:
            return await self._redirect(request, e)
        if value is None:
            return _error(404, f"store {name!r} has no value for key {key!r}")
        return _json(200, {"store": name, "key": jsonable(key), "worker": self.self_url,
                           "partition": await view.partition_of(key),
                           "value": jsonable(value)})

    async def _redirect(self, request: web.Request, e: KeyNotLocalError) -> web.Response:
        hopped = request.query.get("hop") is not None
        owner = None if hopped else await self.owner_of(e.store, e.partition)
        if owner is None:
            why = ("it was redirected here as the owner, which it no longer is"
                   if hopped else "no worker answered for that partition")
            return _error(503, f"{KeyNotLocalError(e.store, e.key, e.partition, e.local)} "
                          f"({why}; retry shortly)", **{"Retry-After": RETRY_AFTER})
        raise web.HTTPTemporaryRedirect(
            f"{owner}{request.rel_url.update_query(hop='1').raw_path_qs}")

    async def owner_of(self, store: str, partition: int) -> str | None:
        """The base URL of the peer whose running tasks hold ``partition`` of ``store``."""
        peers = [p for p in self.peers if p != self.self_url]
        if not peers:
            return None
        if self._session is None:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=PEER_TIMEOUT))
        session = self._session
        answers = await asyncio.gather(*(self._partitions_of(session, peer, store)
                                         for peer in peers))
        for peer, partitions in zip(peers, answers, strict=True):
            if partition in partitions:
                return peer
        return None

    @staticmethod
    async def _partitions_of(session: aiohttp.ClientSession, peer: str,
                             store: str) -> list[int]:
        try:
            async with session.get(f"{peer}/stores/{store}") as response:
                if response.status != 200:
                    return []
                body = await response.json()
                return [int(p) for p in body.get("partitions", [])]
        except (aiohttp.ClientError, TimeoutError, ValueError) as e:
            log.debug("queries: peer %s did not say its partitions: %s", peer, e)
            return []


def add_store_routes(web_app: web.Application, app: App, peers: Sequence[str] = (),
                     self_url: str | None = None) -> StoreRoutes:
    """Register ``/stores/{name}`` and ``/stores/{name}/{key}`` on ``web_app``."""
    routes = StoreRoutes(app, peers, self_url)
    web_app.router.add_get("/stores/{name}", routes.partitions)
    web_app.router.add_get("/stores/{name}/{key}", routes.lookup)
    web_app.on_cleanup.append(routes.close)
    return routes
