"""The listener that stops the demo's live streaming query once it has read every row sent."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from pyspark.sql.streaming import StreamingQueryListener

log = logging.getLogger("flights_demo.stream")


class RowCounter(StreamingQueryListener):
    """A ``StreamingQueryListener`` that counts the messages of the committed micro-batches (Spark
    reports a batch's progress after its sink committed it) and tells :meth:`wait` when they
    reach ``target`` rows or a query ends."""

    def __init__(self, target: int | None = None) -> None:
        self.target = target  # None: not known yet (set_target), wait() keeps waiting
        self._rows: dict[tuple[str, int], int] = {}  # (run id, batch id) -> rows
        self._changed = threading.Condition()
        self.first_batch_at: float | None = None
        """``time.monotonic()`` at the start of the first micro-batch that read messages."""

    def onQueryStarted(self, event: Any) -> None:  # noqa: N802 - Spark's names
        pass

    def onQueryProgress(self, event: Any) -> None:  # noqa: N802
        p = event.progress
        log.info("micro-batch %d: %d messages, %d ms (%s)", p.batchId, p.numInputRows,
                 p.durationMs.get("triggerExecution", 0), ", ".join(f"{k} {v}" for k, v in p.durationMs.items()))
        with self._changed:
            if p.numInputRows and self.first_batch_at is None:  # when that micro-batch started
                self.first_batch_at = time.monotonic() - p.durationMs.get("triggerExecution", 0) / 1000
            self._rows[(str(p.runId), p.batchId)] = p.numInputRows
            self._changed.notify_all()

    def onQueryIdle(self, event: Any) -> None:  # noqa: N802
        pass

    def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
        with self._changed:
            self._changed.notify_all()

    def set_target(self, target: int) -> None:
        """The row count to stop at, when it was not known at the query's start."""
        with self._changed:
            self.target = target
            self._changed.notify_all()

    def rows(self) -> int:
        with self._changed:
            return sum(self._rows.values())

    def batch_rows(self) -> list[int]:
        with self._changed:
            return [n for n in self._rows.values() if n]

    def wait(self, query: Any, timeout_s: float) -> bool:
        """Wait until ``target`` rows are committed (True; the query is stopped by the caller),
        the query ends (its failure is raised; False otherwise) or ``timeout_s`` passes (False)."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while self.target is None or sum(self._rows.values()) < self.target:
                if not query.isActive:
                    query.awaitTermination()  # raises the query's failure
                    return False
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                # a query that ends between the check and the wait is noticed at the next wake-up
                self._changed.wait(min(remaining, 1.0))
        return True
