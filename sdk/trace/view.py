"""Reading a message's trace back (mqadmin ``queryMsgTraceById``, dashboard ``MessageTraceView``).

:func:`query_trace` finds the trace messages indexed under a msgId in the trace topic and keeps
the records of that msgId; :func:`build_trace_graph` turns them into the dashboard's graph: the
producer node (``Pub``), transaction nodes (``EndTransaction``) and, per consumer group, one node
per delivery (``SubBefore`` and ``SubAfter`` paired by ``requestId``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ..protocol.message import MessageExt
from ..protocol.msgid import decode_uniq_id
from .codec import TRACE_TOPIC_DEFAULT, TraceRecord, TraceType, decode_trace_text


class MessageQuery(Protocol):
    """What :func:`query_trace` needs: an ``AdminClient``'s ``query_message_by_key``."""

    def query_message_by_key(self, topic: str, key: str, *, max_num: int = ...) -> Sequence[MessageExt]: ...


__all__ = ["ConsumeNode", "MessageQuery", "TraceGraph", "build_trace_graph", "client_host_of_request",
           "query_trace", "records_in_order"]

#: within one millisecond the records of a message happen in this order
_TYPE_ORDER = {TraceType.Pub: 0, TraceType.EndTransaction: 1, TraceType.SubBefore: 2, TraceType.SubAfter: 3}

UNKNOWN_GROUP = "%UNKNOWN_GROUP%"


def query_trace(admin: MessageQuery, msg_id: str, trace_topic: str = TRACE_TOPIC_DEFAULT,
                max_num: int = 64) -> list[TraceRecord]:
    """The trace records of ``msg_id`` (the ``UNIQ_KEY``) in ``trace_topic``, oldest trace
    message first, in record order (QUERY_MESSAGE with key = msgId, as ``queryMsgTraceById``).

    Raises:
        TopicNotExistError: the trace topic has no route (nothing was ever traced to it).
        RemotingError: network failure or timeout.
    """
    out: list[TraceRecord] = []
    for m in admin.query_message_by_key(trace_topic, msg_id, max_num=max_num):
        text = m.body.decode("utf-8", errors="replace")
        out.extend(r for r in decode_trace_text(text) if r.msg_id == msg_id)
    return out


def records_in_order(records: list[TraceRecord]) -> list[TraceRecord]:
    """``records`` by time; records of the same millisecond in the order they happen (send,
    transaction end, delivery begin, delivery end), as the dashboard lists them."""
    return sorted(records, key=lambda r: (r.time_stamp, _TYPE_ORDER.get(r.type, 9)))


def client_host_of_request(request_id: str | None) -> str | None:
    """The IP address of the consumer that handled a delivery: a ``SubBefore``/``SubAfter``
    ``requestId`` is a unique id made in the consumer's process, whose first bytes are its IP
    (Java ``MessageClientIDSetter``). None when the id is not such an id."""
    if not request_id:
        return None
    try:
        return decode_uniq_id(request_id)[0]
    except ValueError:
        return None


@dataclass
class ConsumeNode:
    """One delivery to a consumer group: begin/end in ms, ``cost_time`` ms (−1 unknown),
    ``status`` ``SUCCESS``/``FAILED``/``UNKNOWN``; ``client_host`` the consumer's IP (from the
    request id, see :func:`client_host_of_request`)."""

    group: str
    request_id: str | None
    begin: int
    end: int
    cost_time: int
    retry_times: int
    status: str
    context_code: int | None = None
    client_host: str | None = None


@dataclass
class TraceGraph:
    """A message's trace: ``producer`` (the ``Pub`` record or None), ``transactions``
    (``EndTransaction`` records), ``consumers`` (group -> deliveries, in time order)."""

    msg_id: str
    producer: TraceRecord | None = None
    transactions: list[TraceRecord] = field(default_factory=list)
    consumers: dict[str, list[ConsumeNode]] = field(default_factory=dict)

    def span(self) -> tuple[int, int]:
        """(first, last) time in ms over every node, (0, 0) without nodes."""
        times: list[int] = []
        if self.producer is not None:
            times += [self.producer.time_stamp, self.producer.time_stamp + max(self.producer.cost_time, 0)]
        times += [t.time_stamp for t in self.transactions]
        for nodes in self.consumers.values():
            for n in nodes:
                times += [n.begin, n.end]
        times = [t for t in times if t > 0]
        return (min(times), max(times)) if times else (0, 0)


def build_trace_graph(msg_id: str, records: list[TraceRecord]) -> TraceGraph:
    """The dashboard's graph of ``records`` (``buildMessageTraceGraph``)."""
    graph = TraceGraph(msg_id)
    befores: dict[str | None, TraceRecord] = {}
    afters: dict[str | None, TraceRecord] = {}
    order: list[str | None] = []
    for r in records:
        if r.type is TraceType.Pub and graph.producer is None:
            graph.producer = r
        elif r.type is TraceType.EndTransaction:
            graph.transactions.append(r)
        elif r.type in (TraceType.SubBefore, TraceType.SubAfter):
            table = befores if r.type is TraceType.SubBefore else afters
            if r.request_id not in befores and r.request_id not in afters:
                order.append(r.request_id)
            table[r.request_id] = r
    for rid in order:
        before, after = befores.get(rid), afters.get(rid)
        group = (before.group_name if before else None) or (after.group_name if after else None) or UNKNOWN_GROUP
        begin = before.time_stamp if before else (after.time_stamp - max(after.cost_time, 0) if after else 0)
        cost = after.cost_time if after else -1
        if after is not None:
            end = after.time_stamp or (begin + max(cost, 0))
            status = "SUCCESS" if after.success else "FAILED"
        else:
            end, status = begin, "UNKNOWN"
        graph.consumers.setdefault(group, []).append(ConsumeNode(
            group, rid, begin, end, cost, before.retry_times if before else -1, status,
            after.context_code if after else None, client_host_of_request(rid)))
    for nodes in graph.consumers.values():
        nodes.sort(key=lambda n: n.begin)
    return graph
