"""Invisibility renewal of ``auto_renew`` receives (the 5.x push consumers' ReceiveMessage,
without an invisible duration), as Apache's proxy keeps a push consumer's messages invisible while
the client holds them: each delivered message is tracked under the receipt handle the client
got; shortly before its invisibility ends (``ahead_ms``) the proxy changes it by another
``invisible_ms`` (CHANGE_MESSAGE_INVISIBLETIME), for at most ``MAX_RENEW_MS``. The client's later
ack / change / DLQ forward names its first handle; the proxy sends the latest one and stops
renewing. A client's NotifyClientTermination, or its session expiring (no request or Telemetry
for 2 min), stops the renewal of its messages (they come back after their invisibility,
at-least-once).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

log = logging.getLogger("rocketmq_broker.proxy")

#: the longest a message is kept invisible for a client that neither acks nor lets go, ms
MAX_RENEW_MS = 3 * 3_600_000


@dataclass(slots=True)
class Held:
    """One message a client holds: its group, broker-side topic, latest handle and deadlines."""

    group: str
    topic: str
    handle: str
    client_id: str
    expires_ms: int
    since_ms: int
    #: done when the renewal in flight (if any) has its answer
    renewing: asyncio.Future[None] | None = None


class Renewals:
    """The held messages of ``auto_renew`` receives and their renewal loop.

    Args:
        change: ``(held, invisible_ms) -> new handle`` (CHANGE_MESSAGE_INVISIBLETIME; raises on a
            refusal, which ends the renewal of that message).
        invisible_ms: invisible duration given and renewed each time, ms (Apache: 60 s).
        ahead_ms: how long before the end of the invisibility it is renewed, ms (Apache: 10 s).
        alive: ``(client id) -> bool``: is the client still known (None: always)? Messages of a
            gone client are no longer renewed.
    """

    def __init__(self, change: Callable[[Held, int], Awaitable[str]], invisible_ms: int = 60_000,
                 ahead_ms: int = 10_000, alive: Callable[[str], bool] | None = None) -> None:
        if not 0 < ahead_ms < invisible_ms:
            raise ValueError(f"renewal ahead time {ahead_ms} ms must be within (0, {invisible_ms}) ms")
        self.change = change
        self.invisible_ms = invisible_ms
        self.ahead_ms = ahead_ms
        self.alive = alive
        self._held: dict[str, Held] = {}

    def track(self, first_handle: str, group: str, topic: str, client_id: str, invisible_ms: int,
              popped_ms: int | None = None) -> None:
        """Keep the message delivered under ``first_handle`` invisible until the client settles it.

        ``popped_ms``: when the broker popped it (epoch ms, the handle's pop time; default now):
        its invisibility ends ``invisible_ms`` after that, however late the proxy tracks it."""
        now = int(time.time() * 1000)
        start = now if popped_ms is None else min(popped_ms, now)
        self._held[first_handle] = Held(group, topic, first_handle, client_id, start + invisible_ms, start)

    def latest(self, handle: str) -> str:
        """The handle to send for a handle a client names (its latest renewal, else itself)."""
        held = self._held.get(handle)
        return held.handle if held is not None else handle

    async def settled(self, handle: str) -> str:
        """:meth:`latest` once a renewal in flight for ``handle`` has its answer: an ack, change
        or DLQ forward sent with the handle before it would leave the renewal's new checkpoint
        alive at the broker, and the settled message would come back."""
        held = self._held.get(handle)
        while held is not None and held.renewing is not None:
            await asyncio.shield(held.renewing)
            held = self._held.get(handle)
        return self.latest(handle)

    def forget(self, handle: str) -> None:
        """The client settled the message (ack, change, DLQ): no more renewals."""
        self._held.pop(handle, None)

    def drop_client(self, client_id: str) -> None:
        """The client went away: its messages come back after their invisibility."""
        for key in [k for k, h in self._held.items() if h.client_id == client_id]:
            del self._held[key]

    def tracked(self) -> int:
        """How many messages are kept invisible now."""
        return len(self._held)

    async def renew_due(self, now_ms: int | None = None) -> int:
        """Renew every held message within ``ahead_ms`` of its end; returns how many."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        renewed = 0
        for key, held in list(self._held.items()):
            if now - held.since_ms > MAX_RENEW_MS:
                log.info("group %s: message of handle %s held for %d ms; no longer renewed", held.group, key[:60],
                         MAX_RENEW_MS)
                self._held.pop(key, None)
                continue
            if held.expires_ms - now > self.ahead_ms:
                continue
            if self.alive is not None and not self.alive(held.client_id):
                self._held.pop(key, None)  # the client is gone: the message comes back after its invisibility
                continue
            try:
                # the broker's new invisibility starts no earlier than the request: count from
                # here, not from the answer (which may come back late)
                asked = int(time.time() * 1000)
                held.renewing = asyncio.get_running_loop().create_future()
                held.handle = await self.change(held, self.invisible_ms)
                held.expires_ms = asked + self.invisible_ms
                renewed += 1
            except Exception as exc:  # noqa: BLE001 - a refused renewal ends it; the message comes back
                log.info("group %s: renewing a held message failed (%s); it becomes visible again", held.group, exc)
                self._held.pop(key, None)
            finally:
                if held.renewing is not None:
                    held.renewing.set_result(None)
                    held.renewing = None
        return renewed

    async def run(self) -> None:
        """Renew due messages until cancelled (every quarter of ``ahead_ms``)."""
        while True:
            await asyncio.sleep(self.ahead_ms / 4000.0)
            try:
                await self.renew_due()
            except Exception:  # noqa: BLE001 - the next round retries
                log.exception("renewal round failed")
