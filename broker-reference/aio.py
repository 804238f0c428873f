"""asyncio helpers shared by the store's HA services and the broker."""

from __future__ import annotations

import asyncio
import contextlib


async def cancel_and_wait(task: asyncio.Task | None) -> None:
    """Cancel ``task`` (None: nothing) and wait until it has ended, whatever it raised."""
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
