"""The scenarios that are not contender runs on the broker's topics, as rows of the same
table: the engine against its limits (issue 23 item 3, :mod:`benchmarks.engine`), restore
speed against Kafka Streams (item 6, :mod:`benchmarks.restore`) and P1 http's physical
limit (a bare aiohttp client against the same server, :mod:`benchmarks.peers.http_limit`).

Each result becomes :class:`~benchmarks.peers.scenarios.Row` s, one per measured case, whose
rate is that case's records/s (``figures`` hold the ratios the module computed itself);
a failure is a row with its ``error``, as a contender's is.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from benchmarks import restore as restore_bench
from benchmarks.peers.contenders import REPO, Contender
from benchmarks.peers.options import ContenderOptions
from benchmarks.peers.runner import RunResult
from benchmarks.peers.scenarios import IN_FLIGHT, Bench, Row

ENGINE_ASYNC = "Engine async"
ENGINE_SYNC = "Engine sync"
API_FLOOR_ASYNC = "processor API's floor (b*)"
API_FLOOR_SYNC = "processor API's floor (a*)"
RESTORE = "Restore"
HTTP_LIMIT = "bare aiohttp client (no Kafka)"
KAFKA_STREAMS = "kafka streams"


def _row(bench: Bench, scenario: str, label: str, module: str, rate: float,
         error: str | None = None, **figures: float) -> Row:
    """A row whose result is ``rate`` records/s (one second of ``rate`` records)."""
    options = ContenderOptions(bootstrap=bench.bootstrap, src="", dst="", group="",
                               partitions=1)
    timed = round(rate)
    result = RunResult(label, options, timed, 1.0 if timed else 0.0, timed, 0.0, error=error)
    row = Row(scenario, Contender(label, module, claims_key_order=False), result, None,
              figures=dict(figures), standalone=True)
    bench.rows.append(row)
    return row


async def _json_of(*args: str, timeout: float) -> dict[str, Any]:
    """The last line of ``python args...``'s stdout, as JSON; RuntimeError naming the
    command and its stderr's tail if it fails."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, *args, cwd=REPO, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise RuntimeError(f"python {' '.join(args)} took over {timeout:.0f} s") from None
    if process.returncode != 0:
        tail = " / ".join(err.decode(errors="replace").strip().splitlines()[-5:])
        raise RuntimeError(f"python {' '.join(args)} exited with {process.returncode}: {tail}")
    result: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return result


async def engine(bench: Bench) -> None:
    """``python -m benchmarks.engine`` in a process of its own (nothing else in its event
    loop), at ``Sizes.engine_*``: (b), (b''), (b''') and the processor API's floor (b*) as
    ``Engine async`` rows, (a), (a') and (a*) as ``Engine sync`` rows."""
    s = bench.sizes
    bench.say(f"engine: python -m benchmarks.engine on {s.engine_records:,} / "
              f"{s.engine_async_records:,} records, {s.engine_rounds} rounds ...")
    try:
        r = await _json_of("-m", "benchmarks.engine", "--records", str(s.engine_records),
                           "--async-records", str(s.engine_async_records),
                           "--in-flight", str(IN_FLIGHT), "--rounds", str(s.engine_rounds),
                           timeout=1800)
    except (RuntimeError, ValueError) as e:
        for scenario in (ENGINE_ASYNC, ENGINE_SYNC):
            _row(bench, scenario, "aiostreams", "benchmarks.engine", 0.0, error=str(e))
        bench.say(f"  error: {e}")
        return
    _row(bench, ENGINE_ASYNC, "aiostreams", "benchmarks.engine", r["b_async_engine"],
         b_ratio_median=r["b_ratio_median"], b_api_ratio_median=r["b_api_ratio_median"],
         b_ratio_api_median=r["b_ratio_api_median"], cpu_ratio_median=r["cpu_ratio_median"],
         rounds=len(r["async_rounds"]))
    _row(bench, ENGINE_ASYNC, "bare asyncio (b'')", "benchmarks.engine",
         r["b2_asyncio_floor"])
    _row(bench, ENGINE_ASYNC, "hand-rolled async loop (b''')", "benchmarks.engine",
         r["b3_hand_rolled_async"])
    _row(bench, ENGINE_ASYNC, API_FLOOR_ASYNC, "benchmarks.engine", r["b_api_floor"])
    _row(bench, ENGINE_SYNC, "aiostreams", "benchmarks.engine", r["a_sync_engine"])
    _row(bench, ENGINE_SYNC, "hand-rolled loop (a')", "benchmarks.engine",
         r["a1_hand_rolled"])
    _row(bench, ENGINE_SYNC, API_FLOOR_SYNC, "benchmarks.engine", r["a_api_floor"])
    bench.say(f"  (b)/(b'') median {r['b_ratio_median']:.2f}, (a)/(a') "
              f"{r['a_sync_engine'] / r['a1_hand_rolled']:.2f}")


async def restore(bench: Bench) -> None:
    """:func:`benchmarks.restore.measure` on the harness's broker, at
    ``Sizes.restore_*``: aiostreams (SQLite) and Kafka Streams (RocksDB, a JVM of its
    own; the jars as the oracle tests fetch them) restoring the same changelog."""
    s = bench.sizes
    bench.say(f"restore: {s.restore_updates:,} updates of {s.restore_keys:,} keys ...")
    try:
        r = await restore_bench.measure(bench.bootstrap, s.restore_updates, s.restore_keys)
    except Exception as e:  # the JVM, javac, the jars or the broker: reported, not raised
        error = f"{type(e).__name__}: {e}"
        _row(bench, RESTORE, "aiostreams", "benchmarks.restore", 0.0, error=error)
        bench.say(f"  error: {error}")
        return
    _row(bench, RESTORE, "aiostreams", "benchmarks.restore", r["updates_per_s"],
         cpu_ratio=r["cpu_ratio"])
    _row(bench, RESTORE, KAFKA_STREAMS, "benchmarks.restore",
         r["kafka_streams_updates_per_s"])
    bench.say(f"  {r['updates_per_s']:,}/s against Kafka Streams' "
              f"{r['kafka_streams_updates_per_s']:,}/s")


HTTP_LEVELS = (IN_FLIGHT, 200, 50)
"""The bare client's concurrency levels: the contenders' own, then fewer at once (an aiohttp
client spends less CPU per request with fewer; the limit is the pair at its best)."""


async def http_client_rate(bench: Bench, url: str, requests: int) -> dict[str, Any] | str:
    """A bare aiohttp client against ``url`` at each of :data:`HTTP_LEVELS`, in a process
    of its own (:mod:`benchmarks.peers.http_limit`'s JSON, with ``rate``: the best level's
    requests/s); or what went wrong."""
    bench.say(f"P1 http: {HTTP_LIMIT} on {requests:,} requests at "
              f"{', '.join(map(str, HTTP_LEVELS))} at once ...")
    try:
        r = await _json_of("-m", "benchmarks.peers.http_limit", url, "--requests",
                           str(requests), "--in-flight", ",".join(map(str, HTTP_LEVELS)),
                           timeout=600)
        r["rate"] = float(r["requests"] / r["seconds"])
        for key in ("cpu_ceiling", "client_cpu_us", "server_cpu_us", "cores", "sequential_s"):
            r[key] = float(r[key])  # a KeyError, TypeError or ValueError: a broken line
    except (RuntimeError, ValueError, KeyError, TypeError) as e:
        bench.say(f"  error: {e}")
        return str(e)
    bench.say(f"  {r['rate']:,.0f} requests/s at best; CPU per request: client "
              f"{r['client_cpu_us']:.0f} µs, server {r['server_cpu_us']:.0f} µs; ceiling "
              f"{r['cpu_ceiling']:,.0f}/s on {r['cores']:.0f} cores; one at a time "
              f"{r['sequential_s'] * 1e3:.2f} ms a request")
    return r


async def http_limit(bench: Bench, url: str, requests: int,
                     before: dict[str, Any] | str) -> Row:
    """P1 http's limits as a ``P1 http`` row, returned: the better of the bare client's run
    ``before`` the contenders and one now, after them (the machine's load moves between
    the two; a limit is what the client/server pair can do at best); its figures hold
    the CPU ceiling (the greater of the two runs') and the seconds a GET takes one at a
    time (the lesser)."""
    after = await http_client_rate(bench, url, requests)
    # http_client_rate has made every figure a float
    runs = {when: r for when, r in (("before", before), ("after", after))
            if not isinstance(r, str)}
    error = None if runs else f"before: {before}; after: {after}"
    figures = {f"{when} per s": r["rate"] for when, r in runs.items()}
    if runs:
        best = max(runs.values(), key=lambda r: r["cpu_ceiling"])
        figures.update({"cpu ceiling per s": best["cpu_ceiling"],
                        "client cpu us": best["client_cpu_us"],
                        "server cpu us": best["server_cpu_us"], "cores": best["cores"],
                        "sequential s": min(r["sequential_s"] for r in runs.values())})
    row = _row(bench, "P1 http", HTTP_LIMIT, "benchmarks.peers.http_limit",
               max((r["rate"] for r in runs.values()), default=0.0), error=error, **figures)
    row.notes.append("the better of two runs, before and after the P1 http contenders: "
                     + ", ".join("failed" if isinstance(r, str) else f"{r['rate']:,.0f}/s"
                                 for r in (before, after)))
    return row
