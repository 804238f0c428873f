"""The asyncio face of the clients: ``async with``, ``astart()`` / ``ashutdown()``.

Every client keeps its own I/O loop thread (routes, heartbeats, pulls); what this adds is a way
to drive the lifecycle from the application's loop without blocking it. ``start()`` and
``shutdown()`` wait for network round trips (routes, unregistering, persisting offsets), so the
async forms run them in a worker thread (``asyncio.to_thread``) and the application's loop keeps
serving other tasks meanwhile::

    async with Producer("g", "127.0.0.1:9876") as producer:
        result = await producer.asend(Message("orders", b"..."))

Push consumers started this way run ``async def`` listeners on the application's loop (see
``PushConsumer.astart``); lite-pull consumers add ``apoll`` / ``acommit`` / ``async for``.
"""

from __future__ import annotations

import asyncio
from typing import Any, Self

__all__ = ["AsyncLifecycle"]


class AsyncLifecycle:
    """Mixin of the clients with ``start()`` / ``shutdown()``."""

    def start(self) -> None:  # pragma: no cover - provided by the client class
        raise NotImplementedError

    def shutdown(self) -> None:  # pragma: no cover - provided by the client class
        raise NotImplementedError

    def __enter__(self) -> Self:
        """``with client:`` starts it and shuts it down at the end of the block."""
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()

    async def astart(self) -> None:
        """``start()`` without blocking the running loop (it runs in a worker thread).

        Raises:
            the errors of ``start()``.
        """
        await asyncio.to_thread(self.start)

    async def ashutdown(self) -> None:
        """``shutdown()`` without blocking the running loop (it runs in a worker thread)."""
        await asyncio.to_thread(self.shutdown)

    async def __aenter__(self) -> Self:
        await self.astart()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.ashutdown()
