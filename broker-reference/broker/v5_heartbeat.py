"""A 5.x broker's HEART_BEAT answer and heartbeat v2 (../shared/docs/rocketmq5-remoting.md §4).

Every answer carries ``IS_SUPPORT_HEART_BEAT_V2=true`` and ``IS_SUB_CHANGE``. A fingerprint of 0 is
heartbeat v1 (``IS_SUB_CHANGE=true``, as 5.3.3 answers it). Otherwise the broker remembers the
last fingerprint per group and answers ``IS_SUB_CHANGE=true`` when it differs; a heartbeat with
``withoutSub=true`` keeps the group's stored subscriptions (and asks for a full heartbeat when it
has none, e.g. after a restart).
"""

from __future__ import annotations

import dataclasses

from rocketmq_sdk.protocol.bodies import ConsumerData, HeartbeatData


class HeartbeatV2:
    """Fingerprints of the groups, and the subscriptions a short heartbeat stands for."""

    def __init__(self) -> None:
        self._fingerprints: dict[str, int] = {}

    def resolve(self, hb: HeartbeatData, stored_subscriptions) -> tuple[list[ConsumerData], dict[str, str]]:
        """(consumer data to register, answer ``extFields``). ``stored_subscriptions(group)``
        returns the group's registered subscriptions (a list) or None for an unknown group."""
        fp = hb.heartbeat_fingerprint or 0
        changed = fp == 0
        consumers = []
        for cd in hb.consumers:
            if fp and hb.without_sub:
                subs = stored_subscriptions(cd.group_name)
                if subs is None or self._fingerprints.get(cd.group_name) != fp:
                    changed = True
                cd = dataclasses.replace(cd, subscriptions=list(subs or ()))
            elif fp:
                if self._fingerprints.get(cd.group_name) != fp:
                    changed = True
                self._fingerprints[cd.group_name] = fp
            consumers.append(cd)
        return consumers, {"IS_SUPPORT_HEART_BEAT_V2": "true", "IS_SUB_CHANGE": str(changed).lower()}
