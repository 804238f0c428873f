"""Small helpers for processors that answer inline or after awaiting."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")
MaybeAwaitable = T | Awaitable[T]


def then(value: MaybeAwaitable[T], fn: Callable[[T], Any]) -> Any:
    """Apply ``fn`` to a value now, or after awaiting it (keeps the ASYNC_FLUSH path free of tasks)."""
    if inspect.isawaitable(value):
        async def _wait() -> Any:
            return fn(await value)
        return _wait()
    return fn(value)
