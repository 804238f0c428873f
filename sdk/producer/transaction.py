"""Transactional messages (Java ``TransactionMQProducer``, docs/protocol.md §5.9).

``send_message_in_transaction`` sends a half message (``TRAN_MSG=true``, ``PGROUP``, sysFlag
``0x4``), runs the listener's local transaction, then tells the broker the outcome with a oneway
END_TRANSACTION. A broker that never heard the outcome asks later with CHECK_TRANSACTION_STATE;
those checks are answered on a bounded thread pool with ``check_local_transaction``.
"""

from __future__ import annotations

import concurrent.futures
import enum
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, Unpack, runtime_checkable

from ..config_types import ProducerSettings
from ..exceptions import ClientStateError, IllegalArgumentError, MQClientError
from ..protocol.codes import MessageConst as MC
from ..protocol.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader
from ..protocol.message import Message, MessageExt, SendResult, SendStatus
from ..protocol.msgid import decode_offset_msg_id
from ..trace.hooks import trace_end_transaction
from .namespace import unwrap_namespace
from .producer import Producer
from .tx_decisions import TransactionDecisions

__all__ = ["LocalTransactionState", "TransactionListener", "TransactionProducer", "TransactionSendResult"]

log = logging.getLogger("rocketmq_sdk.producer.transaction")

#: ``MessageSysFlag`` transaction types written into END_TRANSACTION's ``commitOrRollback``.
_NOT_TYPE, _COMMIT_TYPE, _ROLLBACK_TYPE = 0, 8, 12


class LocalTransactionState(enum.Enum):
    """Outcome of a local transaction (Java spelling, ``UNKNOW`` included)."""

    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"

    @property
    def end_type(self) -> int:
        return {"COMMIT_MESSAGE": _COMMIT_TYPE, "ROLLBACK_MESSAGE": _ROLLBACK_TYPE}.get(self.value, _NOT_TYPE)


@runtime_checkable
class TransactionListener(Protocol):
    """What a :class:`TransactionProducer` calls.

    ``execute_local_transaction(msg, arg)`` runs in the sending thread right after the half
    message is stored; ``check_local_transaction(msg)`` runs on the check pool when the broker
    asks about a transaction it has no outcome for (``msg.transaction_id`` identifies it). An
    exception or a None return counts as ``UNKNOW`` (the broker asks again later); as in Java, an
    exception is also reported in END_TRANSACTION's remark (``executeLocalTransactionBranch
    exception: ValueError: text``, ``checkLocalTransactionState Exception: ValueError: text,
    function(file.py:line)``).

    Checks can come for transactions already committed or rolled back: a RocketMQ 5.x broker
    writes the record ending a transaction in batches (every ``transactionOpBatchInterval``,
    3 s), and checks half messages older than ``transactionTimeOut`` it has no record for. The
    producer answers checks of transactions *it* decided (at send or at an earlier check) from
    its own record of recent decisions without calling ``check_local_transaction``; any other
    check (another producer instance of the group, a restart) reaches the listener, which must
    answer from durable state, never "COMMIT by default": a COMMIT for a rolled-back
    transaction delivers it, and consumers must be idempotent (a COMMIT answered twice is
    stored twice on 5.x).
    """

    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState: ...

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState: ...


@dataclass
class TransactionSendResult(SendResult):
    """A ``SendResult`` of the half message plus the local transaction's outcome."""

    local_transaction_state: LocalTransactionState = LocalTransactionState.UNKNOW


def _call_listener(fn: Any, *args: Any) -> tuple[LocalTransactionState, Exception | None]:
    """(state, the exception the listener raised or None); a raise or a None return is UNKNOW."""
    try:
        state = fn(*args)
    except Exception as exc:
        log.exception("transaction listener %s raised; the state is UNKNOW", getattr(fn, "__name__", fn))
        return LocalTransactionState.UNKNOW, exc
    if state is None:
        return LocalTransactionState.UNKNOW, None
    if not isinstance(state, LocalTransactionState):
        log.warning("transaction listener returned %r, not a LocalTransactionState; UNKNOW", state)
        return LocalTransactionState.UNKNOW, None
    return state, None


def _describe(exc: BaseException) -> str:
    """Java ``Throwable.toString()`` for a Python exception: ``ValueError: text`` (module-qualified
    outside builtins; the bare name when the message is empty)."""
    cls = type(exc)
    name = cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    text = str(exc)
    return f"{name}: {text}" if text else name


def _describe_with_frame(exc: BaseException) -> str:
    """Java ``RemotingHelper.exceptionSimpleDesc``: the description plus the innermost frame
    (``function(file.py:line)``)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return _describe(exc)
    code = tb.tb_frame.f_code
    return f"{_describe(exc)}, {code.co_name}({os.path.basename(code.co_filename)}:{tb.tb_lineno})"


def send_half_message(send: Callable[[Message], SendResult], msg: Message, group: str | None) -> SendResult:
    """Send ``msg`` as the half message of a transaction with ``send`` (remoting or gRPC): no
    delay level (as Java), ``TRAN_MSG=true``, ``PGROUP`` = ``group`` when given.

    Raises:
        IllegalArgumentError, ClientStateError: as ``send``.
        MQClientError: the half message could not be sent (the cause is chained).
    """
    if msg.delay_time_level:
        msg.clear_property(MC.DELAY_TIME_LEVEL)
    msg.put_property(MC.TRANSACTION_PREPARED, "true")
    if group is not None:
        msg.put_property(MC.PRODUCER_GROUP, group)
    try:
        return send(msg)
    except (IllegalArgumentError, ClientStateError):
        raise
    except Exception as exc:
        raise MQClientError(f"sending the half message of a transaction failed: {exc}") from exc


class TransactionProducer(Producer):
    """A producer of transactional messages.

    Args:
        group: producer group; the broker sends its checks to a live producer of this group.
        namesrv_addr: name server list ``"host:port;host:port"``.
        listener: the :class:`TransactionListener`.
        check_thread_pool_size: threads answering CHECK_TRANSACTION_STATE (1, as Java's
            ``checkThreadPoolMinSize``/``MaxSize``).
        check_request_hold_max: checks waiting for a thread before new ones are dropped
            (2000; a dropped check is simply asked again by the broker).
        decision_record_size / decision_record_ttl_s: how many of this producer's own
            COMMIT/ROLLBACK decisions are kept to answer checks of them (10000, for 600 s).
        **config: any ``ProducerConfig`` setting.

    Raises:
        IllegalArgumentError: no listener, or a bad setting.
    """

    def __init__(self, group: str, namesrv_addr: str | None = None, *, listener: TransactionListener,
                 check_thread_pool_size: int = 1, check_request_hold_max: int = 2000,
                 decision_record_size: int = 10000, decision_record_ttl_s: float = 600.0,
                 **config: Unpack[ProducerSettings]) -> None:
        if listener is None or not isinstance(listener, TransactionListener):
            raise IllegalArgumentError("a TransactionListener (execute_local_transaction, "
                                       "check_local_transaction) is required")
        super().__init__(group, namesrv_addr, **config)
        self.listener = listener
        self._check_pool_size = max(1, check_thread_pool_size)
        self._check_slots = threading.BoundedSemaphore(max(1, check_request_hold_max) + self._check_pool_size)
        self._check_pool: concurrent.futures.ThreadPoolExecutor | None = None
        self.decisions: TransactionDecisions[LocalTransactionState] = TransactionDecisions(
            decision_record_size, decision_record_ttl_s)

    def start(self) -> None:
        """Start the producer and its check thread pool (see :meth:`Producer.start`)."""
        self._check_pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=self._check_pool_size, thread_name_prefix=f"rocketmq-tx-check-{self.group}")
        try:
            super().start()
        except BaseException:
            self._check_pool.shutdown(wait=False)
            raise

    def shutdown(self) -> None:
        """Shut the producer down, then the check pool (running checks finish)."""
        super().shutdown()
        if self._check_pool is not None:
            self._check_pool.shutdown(wait=True, cancel_futures=True)

    # -------------------------------------------------------------- sending

    def send_message_in_transaction(self, msg: Message, arg: Any = None, *,
                                    timeout_ms: float | None = None) -> TransactionSendResult:
        """Send ``msg`` as a half message, run ``listener.execute_local_transaction(msg, arg)``
        and end the transaction (commit, rollback, or leave it UNKNOW for a later check).

        A delay level is removed (transactional messages cannot be delayed, as Java). A half
        message not stored SEND_OK (flush/slave timeouts) is rolled back without running the
        local transaction.

        Returns:
            the half message's ``SendResult`` with ``local_transaction_state``.

        Raises:
            IllegalArgumentError, ClientStateError, TopicNotExistError: as ``send``.
            MQClientError: the half message could not be sent (the cause is chained).
        """
        result = send_half_message(lambda m: self.send(m, timeout_ms=timeout_ms), msg, self.group)
        error = None
        if result.send_status is SendStatus.SEND_OK:
            msg.transaction_id = msg.get_property(MC.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            if result.transaction_id:
                msg.put_user_property(MC.TRANSACTION_ID_LITERAL, result.transaction_id)
            state, error = _call_listener(self.listener.execute_local_transaction, msg, arg)
        else:
            state = LocalTransactionState.ROLLBACK_MESSAGE
        if state is not LocalTransactionState.COMMIT_MESSAGE:
            log.info("transaction %s: local state %s", result.msg_id, state.value)
        # as Java's endTransaction: a raising listener is reported in the request's remark
        remark = None if error is None else f"executeLocalTransactionBranch exception: {_describe(error)}"
        self.decisions.record(msg.transaction_id, state)
        try:
            self._end_transaction(result, state, remark, msg)
        except Exception:
            log.warning("END_TRANSACTION of %s (%s) failed; the broker will check it", result.msg_id,
                        state.value, exc_info=True)
        return TransactionSendResult(**{f: getattr(result, f) for f in SendResult.__dataclass_fields__},
                                     local_transaction_state=state)

    def _end_transaction(self, result: SendResult, state: LocalTransactionState, remark: str | None = None,
                         msg: Message | None = None) -> None:
        inst = self._running()
        commit_log_offset = decode_offset_msg_id(result.offset_msg_id)[2] if result.offset_msg_id else 0
        mq = result.message_queue
        # as Java 4.9.8: transactionId only when the send response had one (4.9 brokers never set
        # it), bname = the broker of the half message
        header = EndTransactionRequestHeader(
            producer_group=self.group, tran_state_table_offset=result.queue_offset,
            commit_log_offset=commit_log_offset, commit_or_rollback=state.end_type, from_transaction_check=False,
            msg_id=result.msg_id, transaction_id=result.transaction_id, bname=mq.broker_name)

        async def end() -> None:
            addr = await self._master_addr(inst, mq, mq.topic)
            if msg is not None:
                self._trace_end(msg, result.msg_id, addr, state, False)
            await inst.api.end_transaction_oneway(addr, header, remark=remark)

        inst.run(end(), self.config.send_msg_timeout / 1000.0)

    def _trace_end(self, msg: Message, msg_id: str, addr: str | None, state: LocalTransactionState,
                   from_check: bool) -> None:
        """The message trace's ``EndTransaction`` record (with ``enable_msg_trace``)."""
        if self._msg_trace is not None:
            ns = self.config.namespace
            trace_end_transaction(self._msg_trace, msg, unwrap_namespace(ns, self.group),
                                  unwrap_namespace(ns, msg.topic), msg_id, addr, state.value, from_check)

    # -------------------------------------------------------------- broker checks (I/O loop)

    def check_transaction_state(self, addr: str, msg: MessageExt, header: CheckTransactionStateRequestHeader) -> None:
        """Called on the I/O loop for a CHECK_TRANSACTION_STATE from ``addr``; queues the check
        on the bounded pool (drops it with a warning when the pool is saturated)."""
        pool = self._check_pool
        if pool is None or self._instance is None:
            log.warning("transaction check for %s ignored: producer %s is not running", header.msg_id, self.group)
            return
        if not self._check_slots.acquire(blocking=False):
            log.warning("transaction check for %s dropped: too many checks waiting", header.msg_id)
            return
        try:
            pool.submit(self._run_check, addr, msg, header)
        except RuntimeError:  # pool shut down
            self._check_slots.release()

    def _run_check(self, addr: str, msg: MessageExt, header: CheckTransactionStateRequestHeader) -> None:
        try:
            uniq = msg.get_property(MC.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or header.msg_id
            decided = self.decisions.get(uniq) or self.decisions.get(header.transaction_id)
            if decided is not None:  # our own decision: the broker has not written its op record yet
                log.info("transaction check of %s answered %s from this producer's decision", uniq, decided.value)
                state, remark = decided, None
            else:
                state, error = _call_listener(self.listener.check_local_transaction, msg)
                remark = None if error is None else f"checkLocalTransactionState Exception: {_describe_with_frame(error)}"
                self.decisions.record(uniq, state)
            end = EndTransactionRequestHeader(
                producer_group=self.group, tran_state_table_offset=header.tran_state_table_offset,
                commit_log_offset=header.commit_log_offset, commit_or_rollback=state.end_type,
                from_transaction_check=True, msg_id=uniq, transaction_id=header.transaction_id)
            inst = self._inst()
            self._trace_end(msg, uniq or "", addr, state, True)
            inst.run(inst.api.end_transaction_oneway(addr, end, remark=remark), self.config.send_msg_timeout / 1000.0)
        except Exception:
            log.warning("answering the transaction check of %s failed", header.msg_id, exc_info=True)
        finally:
            self._check_slots.release()
