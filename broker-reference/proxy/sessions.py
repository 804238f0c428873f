"""The 5.x clients the proxy knows (by ``x-mq-client-id``): their type, group, settings, published
topics and, while their Telemetry stream is open, its outbox (commands to push to the client)."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from rocketmq_sdk.grpc import v2

log = logging.getLogger("rocketmq_broker.proxy")

#: a client whose last heartbeat or telemetry message is older than this is forgotten, s
SESSION_EXPIRY_S = 120.0
#: cap on the clients remembered at once (the oldest is forgotten beyond it)
MAX_SESSIONS = 10_000


@dataclass(slots=True)
class Session:
    """One client.

    Attributes:
        client_id: its ``x-mq-client-id``.
        client_type: ``v2.ClientType`` value (from its settings or heartbeat).
        group: consumer group, None for producers.
        topics: topics it publishes to (``Settings.publishing.topics``) or subscribes to.
        outbox: commands for its open Telemetry stream (None while none is open).
        last_seen: ``time.monotonic()`` of its last request.
    """

    client_id: str
    client_type: int = v2.CLIENT_TYPE_UNSPECIFIED
    group: str | None = None
    topics: set[str] = field(default_factory=set)
    settings: Any = None
    outbox: asyncio.Queue | None = None
    last_seen: float = field(default_factory=time.monotonic)


class Sessions:
    """Clients by id (used on the proxy's loop only)."""

    def __init__(self) -> None:
        self._by_id: dict[str, Session] = {}

    def __len__(self) -> int:
        return len(self._by_id)

    def get(self, client_id: str) -> Session | None:
        return self._by_id.get(client_id)

    def touch(self, client_id: str) -> Session:
        """The session of ``client_id`` (created if new), marked as seen now."""
        s = self._by_id.get(client_id)
        if s is None:
            if len(self._by_id) >= MAX_SESSIONS:
                self.expire()
                if len(self._by_id) >= MAX_SESSIONS:
                    self._by_id.pop(next(iter(self._by_id)))
            s = self._by_id[client_id] = Session(client_id)
        s.last_seen = time.monotonic()
        return s

    def remove(self, client_id: str) -> None:
        s = self._by_id.pop(client_id, None)
        if s is not None and s.outbox is not None:
            s.outbox.put_nowait(None)  # ends its Telemetry stream

    def expire(self) -> None:
        """Forget clients silent for longer than :data:`SESSION_EXPIRY_S` with no open stream."""
        deadline = time.monotonic() - SESSION_EXPIRY_S
        for cid in [cid for cid, s in self._by_id.items() if s.outbox is None and s.last_seen < deadline]:
            del self._by_id[cid]

    def producer_for(self, topic: str) -> Session | None:
        """A producer with an open Telemetry stream that publishes ``topic`` (else any producer
        with an open stream), most recently seen first: who resolves an orphaned transaction."""
        live = [s for s in self._by_id.values() if s.outbox is not None and s.client_type == v2.PRODUCER]
        live.sort(key=lambda s: s.last_seen, reverse=True)
        for s in live:
            if topic in s.topics:
                return s
        return live[0] if live else None
