"""Per-broker heartbeat state: RocketMQ 5.x heartbeat v2 and the broker version learnt.

Heartbeat v2 (5.x ``useHeartbeatV2``, ../shared/docs/rocketmq5-remoting.md §4.2): the client sends
its full heartbeat with a ``heartbeatFingerprint`` the first time, when its subscriptions changed,
or when the broker answered ``IS_SUB_CHANGE=true`` / does not announce
``IS_SUPPORT_HEART_BEAT_V2``; otherwise a short heartbeat (``withoutSub=true``, no subscriptions)
that only keeps the channel alive. Every answer's ``version`` tells the broker's version
(409 for 4.9.8, 479 for 5.3.3), kept for :meth:`BrokerHeartbeats.is_v5`.
"""

from __future__ import annotations

import dataclasses

from ..protocol.bodies import HeartbeatData
from ..protocol.codes import V5_0_0_SNAPSHOT
from ..remoting.command import RemotingCommand

__all__ = ["BrokerHeartbeats"]


class BrokerHeartbeats:
    """What the client knows of each broker address from its heartbeat answers."""

    def __init__(self, use_v2: bool = False) -> None:
        self.use_v2 = use_v2
        self.versions: dict[str, int] = {}
        self._acked_fingerprint: dict[str, int] = {}

    def body_for(self, addr: str, data: HeartbeatData) -> tuple[HeartbeatData, bool]:
        """(heartbeat to send to ``addr``, whether it is the full one)."""
        if not self.use_v2:
            return data, True
        fp = data.fingerprint()
        if self._acked_fingerprint.get(addr) != fp:
            return dataclasses.replace(data, heartbeat_fingerprint=fp, without_sub=False), True
        slim = [dataclasses.replace(c, subscriptions=[]) for c in data.consumers]
        return dataclasses.replace(data, consumers=slim, heartbeat_fingerprint=fp, without_sub=True), False

    def on_answer(self, addr: str, sent: HeartbeatData, full: bool, resp: RemotingCommand) -> None:
        """Record the broker's answer to ``sent``."""
        self.versions[addr] = int(resp.version)
        if not self.use_v2:
            return
        ext = resp.ext_fields or {}
        supported = str(ext.get("IS_SUPPORT_HEART_BEAT_V2", "")).lower() == "true"
        changed = str(ext.get("IS_SUB_CHANGE", "")).lower() == "true"
        if not supported or (changed and not full):
            self._acked_fingerprint.pop(addr, None)  # full heartbeat next time
        elif full and sent.heartbeat_fingerprint is not None:
            self._acked_fingerprint[addr] = sent.heartbeat_fingerprint

    def forget(self, addr: str) -> None:
        """A broker address went away: send it a full heartbeat if it comes back."""
        self._acked_fingerprint.pop(addr, None)

    def version(self, addr: str) -> int | None:
        """The ``MQVersion`` ordinal the broker at ``addr`` answered with, None before any answer."""
        return self.versions.get(addr)

    def is_v5(self, addr: str) -> bool | None:
        """True for a 5.x broker, False for an older one, None when not heard from yet."""
        v = self.versions.get(addr)
        return None if v is None else v >= V5_0_0_SNAPSHOT
