"""Running servers until a signal: shared by the console commands and ``python -m rocketmq_broker dev``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Awaitable, Callable

import click
from rocketmq_sdk.exceptions import IllegalArgumentError
from rocketmq_sdk.remoting.loop import EVENT_LOOP_CHOICES, event_loop_kind, new_event_loop

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


#: the ``--event-loop`` option of the console commands
event_loop_option = click.option(
    "--event-loop", type=click.Choice(EVENT_LOOP_CHOICES), default="auto", show_default=True,
    help="Event loop: auto (uvloop when installed, else asyncio), asyncio or uvloop; "
         "$ROCKETMQ_EVENT_LOOP overrides it.")


def run_until_signal(start: Callable[[], Awaitable[None]], stop: Callable[[], Awaitable[None]],
                     event_loop: str = "auto") -> None:
    """:func:`serve_until_signal` on a new loop of implementation ``event_loop`` (blocks).

    Raises:
        click.UsageError: an unknown ``event_loop`` or ``"uvloop"`` without uvloop installed.
    """
    try:
        loop = new_event_loop(event_loop)
    except IllegalArgumentError as exc:
        raise click.UsageError(str(exc)) from None
    log.info("event loop: %s", event_loop_kind(loop))
    with asyncio.Runner(loop_factory=lambda: loop) as runner:
        runner.run(serve_until_signal(start, stop))
