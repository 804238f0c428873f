"""What the DLedger member raises and the clock its timers read."""

from __future__ import annotations

import time

from .protocol import DLedgerCode

__all__ = ["AppendError", "now_ms"]


def now_ms() -> float:
    """Monotonic milliseconds (the member's timers)."""
    return time.monotonic() * 1000.0


class AppendError(Exception):
    """An append refused or failed (``code``: a :class:`DLedgerCode`)."""

    def __init__(self, code: DLedgerCode, message: str = "") -> None:
        super().__init__(f"{code.name} ({int(code)}){': ' + message if message else ''}")
        self.code = code
