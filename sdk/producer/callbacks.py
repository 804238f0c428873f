"""Running a user's ``callback(result, error)`` when a send or request future completes."""

from __future__ import annotations

import concurrent.futures
import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger("rocketmq_sdk.producer")


def run_callback(callback: Callable[[Any, BaseException | None], Any], fut: concurrent.futures.Future,
                 what: str = "send") -> None:
    """Call ``callback(result, None)``, or ``callback(None, error)`` when ``fut`` failed or was
    cancelled (``CancelledError``). What the callback raises is logged, never propagated (it runs
    on the producer's callback pool)."""
    try:
        if fut.cancelled():
            callback(None, concurrent.futures.CancelledError())
        elif (exc := fut.exception()) is not None:
            callback(None, exc)
        else:
            callback(fut.result(), None)
    except Exception:
        log.exception("%s callback %r raised", what, callback)
