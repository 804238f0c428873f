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


async def wait_event(event: asyncio.Event, timeout_s: float) -> bool:
    """Wait until ``event`` is set (True) or ``timeout_s`` seconds have passed (False).

    A cancel of the waiting task always propagates (``CancelledError``), also one that comes in
    the step the event is set: ``asyncio.wait_for`` on Python 3.11 returns the result then and
    swallows the cancel (gh-86296), so a service loop went on and the ``stop()`` awaiting it hung.
    """
    try:
        async with asyncio.timeout(timeout_s):
            await event.wait()
    except TimeoutError:
        return False
    return True
