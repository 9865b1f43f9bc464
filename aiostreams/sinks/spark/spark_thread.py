"""The one thread where aiostreams does blocking Spark and pyarrow work.

Everything that blocks in the Spark bridge (starting the SparkSession, building Arrow tables,
writing Parquet, fsync, reading the commit log) runs on a single process-wide thread named
``aiostreams-spark-0``, never on the event loop. One thread, because the SparkSession is one
per process and its py4j gateway gains nothing from concurrent callers here, and because it
makes the jobs of one sink run strictly in submission order (FIFO).

Bounded: per Parquet sink, the queue holds the Arrow conversions of the rows it buffers
(one job per ``convert_rows``, so at most ``batch_rows / convert_rows`` + 1) and one write
(the worker awaits each flush before it commits again), plus sink start/stop.

Cancellation (:func:`run_on_spark_thread`): a job, once submitted, always runs to completion,
even if the coroutine awaiting it is cancelled; the cancelled caller gets ``CancelledError``
at once and the job's result or exception is dropped (its exception is still retrieved, so
nothing is logged as "never retrieved"). Callers that need the outcome of an abandoned job
(the Parquet sink does) record it from inside the job.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["THREAD_NAME_PREFIX", "call_on_spark_thread", "on_spark_thread",
           "run_on_spark_thread", "submit_to_spark_thread"]

T = TypeVar("T")

THREAD_NAME_PREFIX = "aiostreams-spark"

_lock = threading.Lock()
_executor: concurrent.futures.ThreadPoolExecutor | None = None


def _get_executor() -> concurrent.futures.ThreadPoolExecutor:
    global _executor
    with _lock:
        if _executor is None:
            _executor = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix=THREAD_NAME_PREFIX)
        return _executor


def on_spark_thread() -> bool:
    """Whether the caller runs on the Spark thread."""
    return threading.current_thread().name.startswith(THREAD_NAME_PREFIX)


async def run_on_spark_thread(fn: Callable[..., T], *args: Any) -> T:
    """Run ``fn(*args)`` on the Spark thread and await its result, without blocking the
    event loop. Cancelling the await does not cancel the job: see the module docstring."""
    return await asyncio.shield(asyncio.wrap_future(submit_to_spark_thread(fn, *args)))


def submit_to_spark_thread(fn: Callable[..., T], *args: Any
                           ) -> concurrent.futures.Future[T]:
    """Queue ``fn(*args)`` on the Spark thread and return at once; its future holds the
    result (an exception nobody asks for is not logged)."""
    job = _get_executor().submit(fn, *args)
    job.add_done_callback(_retrieve)
    return job


def call_on_spark_thread(fn: Callable[..., T], *args: Any) -> T:
    """Run ``fn(*args)`` on the Spark thread and block until it returns (for synchronous
    callers: fixtures, the CLI, atexit). Runs inline when already on the Spark thread."""
    if on_spark_thread():
        return fn(*args)
    return _get_executor().submit(functools.partial(fn, *args)).result()


def _retrieve(job: concurrent.futures.Future[Any]) -> None:
    if not job.cancelled():
        job.exception()
