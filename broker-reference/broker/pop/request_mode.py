"""Server-side assignment of 5.x consumers (../shared/docs/rocketmq5-remoting.md §5.12):
SET_MESSAGE_REQUEST_MODE (401) stores a (topic, group)'s consume mode (PULL or POP, and the POP
share-queue number) in ``config/messageRequestMode.json``; GET_ALL_MESSAGE_REQUEST_MODE (402)
returns the table; QUERY_ASSIGNMENT (400) answers a Java push consumer with client rebalance off:
its group's retry topic and PULL-mode topics are allocated among the group's clients (averagely),
a POP-mode topic gets one entry per broker with ``queueId`` -1 (pop every queue), or with
``popShareQueueNum`` N > 0 the client's own allocation plus that of the next N clients."""

from __future__ import annotations

import os
from typing import Any

from rocketmq_sdk.protocol import fastjson
from rocketmq_sdk.protocol.codes import RETRY_GROUP_TOPIC_PREFIX, RequestCode, ResponseCode
from rocketmq_sdk.remoting import Channel, RemotingCommand

from ..config_file import read_json, write_atomically
from ..requests import ACL_NONE, SlaveRule, handles

__all__ = ["MODES", "MessageRequestModes", "RequestModeProcessor"]

MODES = ("PULL", "POP")


class MessageRequestModes:
    """topic → group → ``{"consumerGroup", "mode", "popShareQueueNum", "topic"}`` (5.x
    ``MessageRequestModeManager``), persisted on every change."""

    def __init__(self, config_dir: str) -> None:
        self.path = os.path.join(config_dir, "messageRequestMode.json")
        self.table: dict[str, dict[str, dict[str, Any]]] = {}

    def load(self) -> None:
        d = read_json(self.path) or {}
        self.table = {t: dict(g) for t, g in (d.get("messageRequestModeMap") or {}).items()}

    def set(self, topic: str, group: str, mode: str, pop_share_queue_num: int) -> None:
        self.table.setdefault(topic, {})[group] = {"consumerGroup": group, "mode": mode,
                                                   "popShareQueueNum": pop_share_queue_num, "topic": topic}
        write_atomically(self.path, fastjson.dumps({"messageRequestModeMap": self.table}))

    def get(self, topic: str, group: str) -> dict[str, Any] | None:
        return self.table.get(topic, {}).get(group)


class RequestModeProcessor:
    """Serves 400/401/402 for one broker.

    Args:
        modes: the table.
        broker_name: this broker's name.
        topics: the topic manager (``get(topic)``); consumers: the consumer manager (``groups``).
    """

    def __init__(self, modes: MessageRequestModes, broker_name: str, topics: Any, consumers: Any) -> None:
        self.modes = modes
        self.broker_name = broker_name
        self.topics = topics
        self.consumers = consumers

    @staticmethod
    def _body(cmd: RemotingCommand) -> dict[str, Any] | None:
        try:
            d = fastjson.loads(cmd.body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return None
        return d if isinstance(d, dict) else None

    @handles(RequestCode.SET_MESSAGE_REQUEST_MODE, header=None, writes=True, acl=ACL_NONE,
             on_slave=SlaveRule.ABSENT, v5_only=True)
    def set_mode(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        from rocketmq_sdk.protocol.validators import group_problem, topic_problem
        d = self._body(cmd)
        if d is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, "set message request mode: body is not a JSON object")
        topic, group, mode = str(d.get("topic") or ""), str(d.get("consumerGroup") or ""), str(d.get("mode") or "")
        problem = topic_problem(topic) or group_problem(group)
        if problem is not None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, problem)
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return cmd.response(ResponseCode.NO_PERMISSION, "retry topic is not allowed to set mode")
        if mode not in MODES:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"mode must be one of {', '.join(MODES)}, got {mode[:20]!r}")
        try:
            share = int(d.get("popShareQueueNum") or 0)
        except (TypeError, ValueError):
            return cmd.response(ResponseCode.SYSTEM_ERROR, "popShareQueueNum must be an integer")
        self.modes.set(topic, group, mode, share)
        return cmd.response(ResponseCode.SUCCESS)

    @handles(RequestCode.GET_ALL_MESSAGE_REQUEST_MODE, header=None, writes=False, acl=ACL_NONE,
             on_slave=SlaveRule.ABSENT, v5_only=True)
    def get_all(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, body=fastjson.dumps({"messageRequestModeMap": self.modes.table}
                                                                      ).encode("utf-8"))

    @handles(RequestCode.QUERY_ASSIGNMENT, header=None, writes=False, acl=ACL_NONE, on_slave=SlaveRule.ABSENT,
             v5_only=True)
    def query_assignment(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        d = self._body(cmd)
        if d is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, "query assignment: body is not a JSON object")
        topic, group, client = str(d.get("topic") or ""), str(d.get("consumerGroup") or ""), str(d.get("clientId") or "")
        tc = self.topics.get(topic)
        if tc is None:
            return cmd.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        setting = None if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) else self.modes.get(topic, group)
        mode = setting["mode"] if setting else "PULL"
        g = self.consumers.groups.get(group)
        clients = sorted(g.client_ids()) if g is not None else []
        if client not in clients:
            clients = sorted([*clients, client])
        share = int(setting.get("popShareQueueNum") or 0) if setting else 0
        if mode == "POP" and (share <= 0 or share >= len(clients) - 1):
            qids = [-1]
        else:
            qids = _average(tc.read_queue_nums, clients, client, share if mode == "POP" else 0)
        out = [{"messageQueue": {"brokerName": self.broker_name, "queueId": q, "topic": topic}, "mode": mode}
               for q in qids]
        return cmd.response(ResponseCode.SUCCESS, body=fastjson.dumps({"messageQueueAssignments": out}).encode())


def _average(n: int, clients: list[str], client: str, share: int) -> list[int]:
    """Queue ids of ``client`` (plus the next ``share`` clients') by Java's AVG allocation."""
    out: set[int] = set()
    size = len(clients)
    idx = clients.index(client)
    for k in range(share + 1):
        i = (idx + k) % size
        mod = n % size
        avg = 1 if n <= size else (n // size + 1 if mod > 0 and i < mod else n // size)
        start = i * avg if mod > 0 and i < mod else i * avg + mod
        out.update(range(start, start + max(0, min(avg, n - start))))
    return sorted(out)
