"""Running servers until a signal: shared by the console commands and ``python -m rocketmq_broker dev``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Awaitable, Callable

log = logging.getLogger("rocketmq_broker")


def setup_logging(level: str = "INFO") -> None:
    logging.basicConfig(stream=sys.stderr, level=getattr(logging, level.upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def announce(kind: str, addr: str) -> None:
    """Print ``KIND host:port`` on stdout (flushed): a stable line parents and users can read."""
    print(f"{kind} {addr}", flush=True)


async def serve_until_signal(start: Callable[[], Awaitable[None]], stop: Callable[[], Awaitable[None]]) -> None:
    """Run ``start()``, wait for SIGINT/SIGTERM (or stdin EOF is ignored), then ``stop()``."""
    loop = asyncio.get_running_loop()
    done = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, done.set)
    await start()
    print("READY", flush=True)
    await done.wait()
    log.info("shutting down")
    await stop()
