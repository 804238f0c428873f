"""Where the SDK's producers and consumers write Apache RocketMQ trace records.

* :class:`PubTraceSpan` wraps a send's OpenTelemetry publish span (or none): the producer ends
  it with the send's outcome as usual, and a successful answer (``SEND_OK`` or not, Java writes a
  record with ``success`` false for the flush/slave statuses) becomes one ``Pub`` record. No record
  for oneway sends, failed sends or a broker answering ``TRACE_ON=false`` (Java
  ``SendMessageTraceHookImpl``).
* :func:`trace_end_transaction` writes the ``EndTransaction`` record of a transaction's end
  (after the local transaction or a broker check), just before END_TRANSACTION is sent (Java
  ``EndTransactionTraceHookImpl``).
* :func:`traced_consume` runs a listener call between one ``SubBefore`` record per message and one
  ``SubAfter`` per message, sharing a fresh ``requestId`` (Java ``ConsumeMessageTraceHookImpl``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from ..protocol.codes import MessageConst as MC
from ..protocol.message import Message, MessageExt, SendResult, SendStatus
from ..protocol.msgid import create_uniq_id
from .codec import ConsumeReturnType, TraceMessageType, TraceRecord, TraceType
from .dispatcher import TraceDispatcher

__all__ = ["PubTraceSpan", "trace_end_transaction", "traced_consume"]

_SUCCESS_NAMES = frozenset({"CONSUME_SUCCESS", "SUCCESS", "COMMIT"})


def _msg_type(msg: Message) -> int:
    props = msg.properties
    if props.get(MC.DELAY_TIME_LEVEL) or props.get(MC.START_DELIVER_TIME_LITERAL):
        return TraceMessageType.Delay_Msg
    if props.get(MC.TRANSACTION_PREPARED) == "true":
        return TraceMessageType.Trans_Msg_Half
    return TraceMessageType.Normal_Msg


class PubTraceSpan:
    """A send's trace: ends the wrapped publish span and queues the ``Pub`` record.

    Args:
        dispatcher: the producer's trace dispatcher.
        otel_span: the OpenTelemetry publish span, or None.
        msgs: the message, or the messages of a batch.
        group: the producer group without namespace.
        topic: the topic without namespace.
        broker_addr: ``broker_name -> address`` (the record's storeHost).
    """

    __slots__ = ("_dispatcher", "_otel", "_msgs", "_group", "_topic", "_broker_addr", "_t0", "_ended",
                 "body_length")

    def __init__(self, dispatcher: TraceDispatcher, otel_span: Any, msgs: Message | Sequence[Message],
                 group: str, topic: str, broker_addr: Callable[[str], str | None]) -> None:
        self._dispatcher = dispatcher
        self._otel = otel_span
        self._msgs = msgs
        self._group = group
        self._topic = topic
        self._broker_addr = broker_addr
        self._t0 = int(time.time() * 1000)
        self._ended = False
        #: the body length as sent (after compression); the producer sets it.
        self.body_length = 0

    def end(self, result: SendResult | None = None, error: BaseException | None = None) -> None:
        """End the publish span and, for an answered send, queue its ``Pub`` record (idempotent)."""
        if self._ended:
            return
        self._ended = True
        if self._otel is not None:
            self._otel.end(result, error)
        if result is None or error is not None or not result.trace_on:
            return
        if self._topic.startswith(self._dispatcher.trace_topic):
            return
        msgs = self._msgs
        batch = not isinstance(msgs, Message)
        first: Message = msgs if isinstance(msgs, Message) else msgs[0]
        now = int(time.time() * 1000)
        self._dispatcher.append([TraceRecord(
            TraceType.Pub, time_stamp=self._t0, region_id=result.region_id or "DefaultRegion",
            group_name=self._group, topic=self._topic, msg_id=result.msg_id,
            tags=None if batch else first.properties.get(MC.TAGS),
            keys=None if batch else first.properties.get(MC.KEYS),
            store_host=self._broker_addr(result.message_queue.broker_name),
            body_length=self.body_length, cost_time=now - self._t0, msg_type=int(_msg_type(first)),
            offset_msg_id=result.offset_msg_id, success=result.send_status is SendStatus.SEND_OK)])


def _context_code(status: Any, error: BaseException | None, elapsed_ms: int, timeout_min: float) -> int:
    if elapsed_ms >= timeout_min * 60_000:
        return ConsumeReturnType.TIME_OUT
    if error is not None:
        return ConsumeReturnType.EXCEPTION
    if status is None:
        return ConsumeReturnType.RETURNNULL
    if getattr(status, "name", None) in _SUCCESS_NAMES:
        return ConsumeReturnType.SUCCESS
    return ConsumeReturnType.FAILED


def traced_consume(dispatcher: TraceDispatcher, call: Callable[[list[MessageExt], Any], Any],
                   msgs: list[MessageExt], ctx: Any, group: str, consume_timeout_min: float = 15.0) -> Any:
    """``call(msgs, ctx)`` between the ``SubBefore`` and ``SubAfter`` records of its messages.

    Messages whose ``TRACE_ON`` property is ``false`` get no record. ``SubAfter.costTime`` is the
    call's duration divided by the number of traced messages (ms); ``contextCode`` is Java's
    ``ConsumeReturnType`` (TIME_OUT when the call took ``consume_timeout_min`` minutes or more).

    Returns what ``call`` returns; raises what it raises (after writing ``SubAfter``).
    """
    traced = [m for m in msgs if m.properties.get(MC.TRACE_SWITCH) != "false"]
    if not traced:
        return call(msgs, ctx)
    request_id = create_uniq_id()
    t0 = int(time.time() * 1000)
    dispatcher.append([TraceRecord(TraceType.SubBefore, time_stamp=t0,
                                   region_id=m.properties.get(MC.MSG_REGION), group_name=group,
                                   request_id=request_id, msg_id=m.msg_id, retry_times=m.reconsume_times,
                                   keys=m.properties.get(MC.KEYS)) for m in traced])
    status: Any = None
    error: BaseException | None = None
    try:
        status = call(msgs, ctx)
        return status
    except BaseException as exc:
        error = exc
        raise
    finally:
        now = int(time.time() * 1000)
        code = _context_code(status, error, now - t0, consume_timeout_min)
        ok = error is None and getattr(status, "name", None) in _SUCCESS_NAMES
        cost = (now - t0) // len(traced)
        dispatcher.append([TraceRecord(TraceType.SubAfter, request_id=request_id, msg_id=m.msg_id,
                                       cost_time=cost, success=ok, keys=m.properties.get(MC.KEYS),
                                       context_code=int(code), time_stamp=now, group_name=group)
                           for m in traced])


def trace_end_transaction(dispatcher: TraceDispatcher, msg: Message, group: str, topic: str, msg_id: str,
                          store_host: str | None, state: str, from_check: bool) -> None:
    """Queue the ``EndTransaction`` record of ``msg``'s transaction.

    Args:
        group, topic: without namespace.
        msg_id: the half message's ``UNIQ_KEY``.
        store_host: the broker address END_TRANSACTION goes to.
        state: ``COMMIT_MESSAGE``, ``ROLLBACK_MESSAGE`` or ``UNKNOW`` (every state is recorded).
        from_check: the end answers a broker's CHECK_TRANSACTION_STATE.

    ``msgType`` is always 2 (``Trans_msg_Commit``, also for rollback and unknown) and
    ``transactionId`` the message's transaction id (its ``UNIQ_KEY``), as Java writes them.
    """
    props = msg.properties
    dispatcher.append([TraceRecord(
        TraceType.EndTransaction, time_stamp=int(time.time() * 1000),
        region_id=props.get(MC.MSG_REGION) or "DefaultRegion", group_name=group, topic=topic, msg_id=msg_id,
        tags=props.get(MC.TAGS), keys=props.get(MC.KEYS), store_host=store_host,
        msg_type=int(TraceMessageType.Trans_msg_Commit), transaction_id=msg.transaction_id or msg_id,
        transaction_state=state, from_transaction_check=from_check)])
