"""``GrpcTransactionProducer``: transactional messages over RocketMQ 5's gRPC API, with the
remoting ``TransactionProducer``'s listener (``TransactionListener``) and results.

The half message is a 5.x TRANSACTION message; the local transaction's outcome goes to the proxy
as EndTransaction (source CLIENT); a transaction the proxy finds open later arrives on the
Telemetry stream (RecoverOrphanedTransactionCommand) and is answered with
``check_local_transaction`` on a small thread pool, as EndTransaction (source SERVER_CHECK).
"""

from __future__ import annotations

import concurrent.futures
import logging
from typing import Any, Unpack

from ..config_types import ProducerSettings
from ..exceptions import IllegalArgumentError, MQClientError, RemotingError
from ..grpc import v2
from ..grpc.connection import check
from ..grpc.convert import message_ext
from ..protocol.message import Message, SendResult
from .grpc_producer import GrpcProducer
from .transaction import (
    LocalTransactionState,
    TransactionListener,
    TransactionSendResult,
    _call_listener,
    send_half_message,
)

log = logging.getLogger("rocketmq_sdk.producer")

_RESOLUTION = {LocalTransactionState.COMMIT_MESSAGE: v2.COMMIT, LocalTransactionState.ROLLBACK_MESSAGE: v2.ROLLBACK}


class GrpcTransactionProducer(GrpcProducer):
    """Transactional producer to a 5.x proxy.

    Args:
        group: producer group (not used by 5.x proxies).
        endpoints: the proxy, ``host:port``.
        listener: the :class:`~rocketmq_sdk.producer.transaction.TransactionListener`.
        check_thread_pool_size: threads answering the proxy's checks (1).
        **config: as :class:`~rocketmq_sdk.producer.grpc_producer.GrpcProducer`.
    """

    def __init__(self, group: str, namesrv_addr: str | None = None, *, endpoints: str | None = None,
                 listener: TransactionListener, check_thread_pool_size: int = 1,
                 tls_root_certificates: bytes | None = None, **config: Unpack[ProducerSettings]) -> None:
        super().__init__(group, namesrv_addr, endpoints=endpoints, tls_root_certificates=tls_root_certificates,
                         **config)
        if listener is None:
            raise IllegalArgumentError("a transaction producer needs a TransactionListener")
        self.listener = listener
        self._check_threads = check_thread_pool_size
        self._checks: concurrent.futures.ThreadPoolExecutor | None = None

    def start(self) -> None:
        """As :meth:`GrpcProducer.start`, with the check pool."""
        self._checks = concurrent.futures.ThreadPoolExecutor(self._check_threads,
                                                             thread_name_prefix="rocketmq-grpc-tx-check")
        super().start()

    def shutdown(self) -> None:
        super().shutdown()
        if self._checks is not None:
            self._checks.shutdown(wait=False)

    def send_message_in_transaction(self, msg: Message, arg: Any = None, *,
                                    timeout_ms: float | None = None) -> TransactionSendResult:
        """Send ``msg`` as a half message, run ``listener.execute_local_transaction(msg, arg)``
        and end the transaction (COMMIT, ROLLBACK, or left open for a later check: UNKNOW).

        Raises:
            IllegalArgumentError, ClientStateError: as ``send``.
            MQClientError: the half message could not be sent (the cause is chained).
        """
        result = send_half_message(lambda m: self.send(m, timeout_ms=timeout_ms), msg, None)
        msg.transaction_id = result.transaction_id
        state, _ = _call_listener(self.listener.execute_local_transaction, msg, arg)
        try:
            self._end(msg.topic, result.msg_id, result.transaction_id or "", state, v2.SOURCE_CLIENT)
        except (RemotingError, MQClientError) as exc:
            log.warning("EndTransaction of %s (%s) failed; the broker will check it: %s", result.msg_id,
                        state.value, exc)
        return TransactionSendResult(**{f: getattr(result, f) for f in SendResult.__dataclass_fields__},
                                     local_transaction_state=state)

    def _end(self, topic: str, message_id: str, transaction_id: str, state: LocalTransactionState,
             source: v2.TransactionSource) -> None:
        resolution = _RESOLUTION.get(state)
        if resolution is None:
            return  # UNKNOW: the broker asks again later
        req = v2.EndTransactionRequest(message_id=message_id, transaction_id=transaction_id, resolution=resolution,
                                       source=source)
        req.topic.name = topic
        req.topic.resource_namespace = self.config.namespace or ""
        resp = self._connection().call("EndTransaction", req, self.config.send_msg_timeout / 1000.0)
        check(resp.status, self.endpoints)

    def _on_command(self, cmd: Any) -> None:
        if cmd.WhichOneof("command") == "recover_orphaned_transaction_command":
            pool = self._checks
            if pool is not None:
                pool.submit(self._check, cmd.recover_orphaned_transaction_command)
            return
        super()._on_command(cmd)

    def _check(self, command: Any) -> None:
        msg = message_ext(command.message)
        state, _ = _call_listener(self.listener.check_local_transaction, msg)
        try:
            self._end(msg.topic, msg.msg_id, command.transaction_id, state, v2.SOURCE_SERVER_CHECK)
        except Exception as exc:  # noqa: BLE001 - the broker asks again
            log.warning("answering the transaction check of %s failed: %s", msg.msg_id, exc)
