"""This producer's own recent transaction decisions, to answer the broker's checks of them.

A RocketMQ 5.x broker writes the record that ends a transaction in batches
(``transactionOpBatchInterval``, 3 s), so it may send CHECK_TRANSACTION_STATE for a transaction
this producer already committed or rolled back; a checker answering COMMIT then makes the broker
store the message again (../shared/docs/rocketmq5-remoting.md §7). The producer keeps each
COMMIT/ROLLBACK it sent (at send time or in answer to a check) and answers a later check of the
same transaction with it, without asking ``check_local_transaction``.
"""

from __future__ import annotations

import enum
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

#: a ``LocalTransactionState`` (not imported: transaction.py imports this module)
State = TypeVar("State", bound=enum.Enum)

__all__ = ["TransactionDecisions"]


class TransactionDecisions(Generic[State]):
    """A bounded, expiring map transaction id → decided ``LocalTransactionState``.

    Args:
        max_entries: decisions kept (oldest dropped first); 10000 by default.
        ttl_s: how long a decision is kept, seconds (600 by default: far beyond the broker's
            op-record batching window).
        clock: monotonic clock, seconds (tests).

    Thread-safe: written by the sending threads, read by the check pool.
    """

    def __init__(self, max_entries: int = 10000, ttl_s: float = 600.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_entries = max(1, max_entries)
        self.ttl_s = ttl_s
        self._clock = clock
        self._lock = threading.Lock()
        self._table: OrderedDict[str, tuple[float, State]] = OrderedDict()

    def record(self, transaction_id: str | None, state: State) -> None:
        """Remember ``state`` for ``transaction_id`` when it is a decision (COMMIT/ROLLBACK)."""
        if not transaction_id or state.value == "UNKNOW":
            return
        with self._lock:
            self._table[transaction_id] = (self._clock() + self.ttl_s, state)
            self._table.move_to_end(transaction_id)
            while len(self._table) > self.max_entries:
                self._table.popitem(last=False)

    def get(self, transaction_id: str | None) -> State | None:
        """The recorded decision, or None (never decided here, expired or dropped)."""
        if not transaction_id:
            return None
        now = self._clock()
        with self._lock:
            while self._table:
                oldest = next(iter(self._table.values()))
                if oldest[0] > now:
                    break
                self._table.popitem(last=False)
            entry = self._table.get(transaction_id)
        return entry[1] if entry is not None else None

    def __len__(self) -> int:
        self.get("\0")  # drop expired entries
        with self._lock:
            return len(self._table)
