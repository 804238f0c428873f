"""Small helpers for processors that answer inline or after awaiting."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")
MaybeAwaitable = T | Awaitable[T]


def then(value: MaybeAwaitable[T], fn: Callable[[T], Any]) -> Any:
    """Apply ``fn`` to a value now, or after awaiting it (keeps the ASYNC_FLUSH path free of tasks).

    An ``asyncio.Future`` (a SYNC_FLUSH put) is chained with a done callback into a new future of
    ``fn``'s result, without a coroutine or a Task; other awaitables get a coroutine."""
    if isinstance(value, asyncio.Future):
        out = value.get_loop().create_future()

        def done(fut: asyncio.Future) -> None:
            if out.done():
                return
            if fut.cancelled():
                out.cancel()
                return
            exc = fut.exception()
            if exc is not None:
                out.set_exception(exc)
                return
            try:
                out.set_result(fn(fut.result()))
            except Exception as err:  # noqa: BLE001 - delivered to the awaiting side
                out.set_exception(err)

        value.add_done_callback(done)
        return out
    if inspect.isawaitable(value):
        async def _wait() -> Any:
            return fn(await value)
        return _wait()
    return fn(value)
