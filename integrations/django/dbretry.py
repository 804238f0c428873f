"""Database calls of the integration's own bookkeeping (outbox marks, the consumed-message
prune), retried with back-off through database errors ("database is locked", a dropped
PostgreSQL connection) instead of killing the relay or the consumer command."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from rocketmq_sdk.retry import ExponentialBackoff, RetryPolicy

__all__ = ["DB_RETRY", "begin_writing", "bounded", "reset_connection", "retry_db", "write_lock"]

log = logging.getLogger("rocketmq_sdk.integrations.django")

T = TypeVar("T")


def _database_error(error: BaseException) -> bool:
    return isinstance(error, DatabaseError)


#: unlimited retries of database errors, 50 ms doubling to 5 s
DB_RETRY = RetryPolicy(None, backoff=ExponentialBackoff(0.05, 5.0), retry_on_error=_database_error)


def bounded(retries: int) -> RetryPolicy:
    """:data:`DB_RETRY` with at most ``retries`` retries (``--once`` runs end)."""
    return DB_RETRY.with_retries(retries)


def reset_connection(using: str = DEFAULT_DB_ALIAS) -> None:
    """Drop the connection of ``using`` after an error (the next query reconnects); never
    inside an ``atomic()`` block, whose owner must roll back first."""
    conn = connections[using]
    if conn.in_atomic_block:
        return
    try:
        conn.close()
    except DatabaseError:
        log.debug("closing the %s connection after an error failed", using, exc_info=True)


def retry_db(attempt: Callable[[], T], what: str, *, policy: RetryPolicy = DB_RETRY, using: str = DEFAULT_DB_ALIAS,
             stop: threading.Event | None = None) -> T:
    """Run ``attempt`` (outside any ``atomic()`` block) until it succeeds; a database error is
    logged (WARNING the first time, then every 10th), the connection reset and the call
    retried after the policy's back-off.

    Args:
        attempt: the database work (one statement or its own ``atomic()`` block).
        what: what it does, for the log (``"marking 3 outbox rows sent"``).
        policy: retries and back-off (default :data:`DB_RETRY`: unlimited, 50 ms → 5 s).
        using: the database alias.
        stop: set to give up early (the last error is raised; a back-off under way, at most
            5 s, is waited out).

    Raises:
        DatabaseError: the last one, once the policy gives up or ``stop`` is set.
        Exception: any other error of ``attempt`` at once.
    """
    failures = 0

    def logged() -> T:
        nonlocal failures
        try:
            result = attempt()
        except DatabaseError as exc:
            failures += 1
            if failures == 1 or failures % 10 == 0:
                log.warning("%s failed (attempt %d), retrying in %.2f s: %s: %s", what, failures,
                            policy.delay_s(failures, exc), type(exc).__name__, exc)
            reset_connection(using)
            raise
        if failures:
            log.info("%s succeeded after %d failed attempt(s)", what, failures)
        return result

    def worth_retrying(exc: BaseException) -> bool:
        return policy.retry_on_error(exc) and not (stop is not None and stop.is_set())

    return RetryPolicy(policy.retries, backoff=policy.backoff, retry_on_error=worth_retrying).call(logged)


_write_locks: dict[str, threading.Lock] = {}
_write_locks_guard = threading.Lock()


def write_lock(using: str = DEFAULT_DB_ALIAS) -> contextlib.AbstractContextManager[Any]:
    """The process-wide lock of SQLite database ``using`` (a no-op context for other databases).

    SQLite takes one writer at a time and fails a writer that waited longer than its
    ``timeout`` (5 s by default) with "database is locked"; a deferred transaction that read
    first fails at once. The integration's own threads (a listener's consume threads, the
    consumer command's prune) therefore write one at a time in a process, waiting on this lock
    without a timeout, so only *other* processes contend for the database's lock.
    """
    if connections[using].vendor != "sqlite":
        return contextlib.nullcontext()
    with _write_locks_guard:
        lock = _write_locks.get(using)
        if lock is None:
            lock = _write_locks[using] = threading.Lock()
    return lock


def begin_writing(table: str, using: str = DEFAULT_DB_ALIAS) -> None:
    """Make the transaction just begun on SQLite database ``using`` a writer at once (no-op on
    other databases).

    A deferred SQLite transaction that reads first cannot wait for the write lock: when another
    process writes meanwhile, its first write fails at once with "database is locked" (the busy
    ``timeout`` applies only to a transaction that has not read). Called as the first statement
    of an ``atomic()`` block, a write that changes no row of ``table`` takes the lock, waiting up
    to the connection's ``timeout`` (what ``transaction_mode: "IMMEDIATE"`` does on Django 5.1+).
    """
    conn = connections[using]
    if conn.vendor != "sqlite":
        return
    name = conn.ops.quote_name(table)
    with conn.cursor() as cursor:
        cursor.execute(f"UPDATE {name} SET id = id WHERE 0")  # noqa: S608 - a model's table name, quoted
