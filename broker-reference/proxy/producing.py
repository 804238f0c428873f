"""SendMessage and EndTransaction of the proxy: 5.x messages to SEND_MESSAGE_V2 of the broker
owning the chosen queue, and commits/rollbacks to END_TRANSACTION; transaction checks the brokers
send to the proxy go to a producer's Telemetry stream as RecoverOrphanedTransactionCommand."""

from __future__ import annotations

import logging
import re
import time
from typing import Any

from rocketmq_sdk.client.mq_client_api import MQClientAPI
from rocketmq_sdk.exceptions import FrameError, MQBrokerError, RemotingError
from rocketmq_sdk.grpc import v2
from rocketmq_sdk.grpc.convert import from_v2, set_timestamp_ms, to_v2
from rocketmq_sdk.producer.prepare import SendHeaderTemplate
from rocketmq_sdk.protocol.bodies import HeartbeatData
from rocketmq_sdk.protocol.codes import (
    DEFAULT_TOPIC,
    V5_0_0_SNAPSHOT,
    MessageSysFlag,
    RequestCode,
    ResponseCode,
)
from rocketmq_sdk.protocol.codes import MessageConst as MC
from rocketmq_sdk.protocol.headers import (
    CheckTransactionStateRequestHeader,
    EndTransactionRequestHeader,
)
from rocketmq_sdk.protocol.message_codec import decode_message, encode_properties
from rocketmq_sdk.protocol.msgid import decode_offset_msg_id
from rocketmq_sdk.remoting import Channel, RemotingCommand

from .checks import check_message, topic_name
from .routes import AUTO_CREATE_QUEUE_NUMS, RouteCache
from .sessions import Sessions
from .status import ProxyError, from_remoting, status

log = logging.getLogger("rocketmq_broker.proxy")

#: producer group of plain sends through the proxy (5.x producers have no group)
PRODUCER_GROUP = "GRPC_PROXY_PRODUCER"
#: producer group of a topic's transactional messages: the group the broker asks about them
TX_GROUP_PREFIX = "GRPC_PROXY_TX_"
#: most messages one SendMessage may carry (each is one broker request)
MAX_MESSAGES_PER_REQUEST = 1000
#: the header's ``sysFlag`` of a half message and ``defaultTopicQueueNums``, as the header carries them
_TX_SYS_FLAG = str(int(MessageSysFlag.TRANSACTION_PREPARED_TYPE))
_AUTO_CREATE_QUEUE_NUMS = str(AUTO_CREATE_QUEUE_NUMS)
_TX_ID = re.compile(r"([0-9A-F]{32}|[0-9A-F]{56})-([0-9]{1,19})")


def tx_group(topic: str) -> str:
    return TX_GROUP_PREFIX + topic


def transaction_id(offset_msg_id: str, queue_offset: int) -> str:
    """The 5.x transaction id of a half message: its offset message id (broker address and
    CommitLog offset) and its queue offset in the half topic."""
    return f"{offset_msg_id}-{queue_offset}"


class Producing:
    """Send and transaction handlers (run on the proxy's loop).

    Args:
        api: remoting request helpers (the proxy's connections to name servers and brokers).
        routes: the route cache.
        sessions: the known clients.
        max_body: largest accepted message body, bytes.
        timeout_ms: broker request timeout, ms.
    """

    def __init__(self, api: MQClientAPI, routes: RouteCache, sessions: Sessions, client_id: str,
                 max_body: int = 4 * 1024 * 1024, timeout_ms: float = 3000.0) -> None:
        self.api = api
        self.routes = routes
        self.sessions = sessions
        self.client_id = client_id
        self.max_body = max_body
        self.timeout_ms = timeout_ms
        #: transaction producer groups announced to the brokers (so their checks come here)
        self.tx_groups: set[str] = set()
        self._announced: dict[str, frozenset[str]] = {}
        self._versions: dict[str, int] = {}  # broker address -> its version (heartbeat answers)
        api.remoting.register_processor(RequestCode.CHECK_TRANSACTION_STATE, self._on_check)

    # -- SendMessage ------------------------------------------------------------------------
    async def send(self, req: Any, context: Any = None) -> Any:
        """SendMessage: each message to the broker owning the queue chosen for it (``context``,
        the call's, is not read: the service's method table calls this directly)."""
        messages = req.messages
        if not messages:
            raise ProxyError(v2.BAD_REQUEST, "no message in the request")
        if len(messages) > MAX_MESSAGES_PER_REQUEST:
            raise ProxyError(v2.BAD_REQUEST, f"{len(messages)} messages in one request, more than "
                                             f"{MAX_MESSAGES_PER_REQUEST}")
        first = messages[0].topic
        if len(messages) > 1 and any(m.topic.resource_namespace != first.resource_namespace
                                     or m.topic.name != first.name for m in messages):
            raise ProxyError(v2.BAD_REQUEST, "the messages of one request must have the same topic")
        topic = topic_name(first)
        now = int(time.time() * 1000)
        bodies = [check_message(m, self.max_body, now) for m in messages]
        route = await self.routes.get(topic)
        resp = v2.SendMessageResponse()
        first_error = None
        for m, body in zip(messages, bodies, strict=True):
            entry = resp.entries.add()
            es = entry.status
            try:
                entry.message_id, entry.transaction_id, entry.offset, entry.recall_handle = \
                    await self._send_one(topic, route, m, body, now)
                es.code, es.message = v2.OK, "OK"
            except ProxyError as exc:
                es.code, es.message = exc.code, exc.message
                if first_error is None:
                    first_error = es
        rs = resp.status
        if first_error is None:
            rs.code, rs.message = v2.OK, "OK"
        else:
            rs.code, rs.message = first_error.code, first_error.message
        return resp

    async def _send_one(self, topic: str, route, m: Any, body: bytes, now: int) -> tuple[str, str, int, str]:
        sp = m.system_properties
        wq = self.routes.select(route, sp.message_group if sp.HasField("message_group") else None)
        timers = False
        if sp.HasField("delivery_timestamp"):  # a 5.x broker's timer wheel delivers at the time asked
            if wq.addr not in self._versions:
                await self.heartbeat(wq.addr)
            timers = self._versions.get(wq.addr, 0) >= V5_0_0_SNAPSHOT
        props = from_v2(m, now_ms=now, timers=timers)
        transactional = sp.message_type == v2.TRANSACTION
        group = PRODUCER_GROUP
        sys_flag = "0"
        if transactional:
            group = tx_group(topic)
            props[MC.PRODUCER_GROUP] = group
            sys_flag = _TX_SYS_FLAG
            if group not in self.tx_groups:
                self.tx_groups.add(group)
        props[MC.WAIT_STORE_MSG_OK] = "true"
        if transactional and self._announced.get(wq.addr) != frozenset(self.tx_groups):
            await self.heartbeat(wq.addr)
        born = now
        if sp.HasField("born_timestamp") and sp.born_timestamp.seconds > 0:
            born = sp.born_timestamp.seconds * 1000 + sp.born_timestamp.nanos // 1_000_000
        # the V2 header as the SDK's producers write it (no dataclass, no per-field conversion)
        header = SendHeaderTemplate.fields(group, topic, DEFAULT_TOPIC, _AUTO_CREATE_QUEUE_NUMS, False,
                                           str(wq.queue_id), sys_flag, str(born), "0", encode_properties(props),
                                           wq.broker_name)
        try:
            result = await self.api.send_message(wq.addr, wq.mq, header, body, sp.message_id,
                                                 self.timeout_ms)
        except MQBrokerError as exc:
            if exc.code == ResponseCode.TOPIC_NOT_EXIST:
                self.routes.forget(topic)
            raise ProxyError(from_remoting(exc.code), exc.remark or str(exc)) from None
        except RemotingError as exc:
            self.routes.forget(topic)
            raise ProxyError(v2.PROXY_TIMEOUT, f"broker {wq.broker_name} did not answer: {exc}") from None
        if route.auto_create:
            self.routes.forget(topic)  # created by this send: its own route from now on
        tx_id = transaction_id(result.offset_msg_id, result.queue_offset) if transactional else ""
        return sp.message_id, tx_id, result.queue_offset, result.recall_handle or ""  # a timer message's

    async def heartbeat(self, addr: str) -> None:
        """Announce the transaction producer groups to the broker at ``addr`` (HEART_BEAT), so
        that its transaction checks of those groups come to this proxy; learn its version."""
        groups = frozenset(self.tx_groups)
        try:
            self._versions[addr] = await self.api.send_heartbeat(addr, HeartbeatData(self.client_id, sorted(groups)))
            self._announced[addr] = groups
        except (MQBrokerError, RemotingError) as exc:
            log.warning("heartbeat to broker %s failed: %s", addr, exc)

    async def heartbeat_all(self) -> None:
        """:meth:`heartbeat` to every broker seen (every 10 s, as the clients do)."""
        if self.tx_groups:
            for addr in sorted(self.routes.known_brokers):
                await self.heartbeat(addr)

    # -- EndTransaction ---------------------------------------------------------------------
    async def end_transaction(self, req: Any) -> Any:
        topic = topic_name(req.topic)
        match = _TX_ID.fullmatch(req.transaction_id)
        if match is None:
            raise ProxyError(v2.INVALID_TRANSACTION_ID, f"transaction id {req.transaction_id[:100]!r} is not one "
                                                        "this proxy gave")
        if not req.message_id or len(req.message_id) > 128:
            raise ProxyError(v2.ILLEGAL_MESSAGE_ID, "message id is empty or too long")
        kind = {v2.COMMIT: MessageSysFlag.TRANSACTION_COMMIT_TYPE,
                v2.ROLLBACK: MessageSysFlag.TRANSACTION_ROLLBACK_TYPE}.get(req.resolution)
        if kind is None:
            return v2.EndTransactionResponse(status=status())  # UNKNOWN: decided later (a check asks again)
        host, port, commit_log_offset = decode_offset_msg_id(match.group(1))
        addr = f"{host}:{port}"
        if addr not in self.routes.known_brokers:
            await self.routes.get(topic, refresh=True)
            if addr not in self.routes.known_brokers:
                raise ProxyError(v2.INVALID_TRANSACTION_ID, "the transaction id names no broker of this cluster")
        header = EndTransactionRequestHeader(
            producer_group=tx_group(topic), tran_state_table_offset=int(match.group(2)),
            commit_log_offset=commit_log_offset, commit_or_rollback=kind,
            from_transaction_check=req.source == v2.SOURCE_SERVER_CHECK, msg_id=req.message_id,
            transaction_id=req.message_id)
        cmd = RemotingCommand.request(RequestCode.END_TRANSACTION, header.to_ext_fields())
        try:
            answer = await self.api.remoting.invoke(addr, cmd, self.timeout_ms)
        except RemotingError as exc:
            raise ProxyError(v2.PROXY_TIMEOUT, f"broker {addr} did not answer: {exc}") from None
        if answer.code != ResponseCode.SUCCESS:
            raise ProxyError(from_remoting(answer.code), answer.remark or "end transaction failed")
        return v2.EndTransactionResponse(status=status())

    # -- transaction checks from the brokers --------------------------------------------------
    def _on_check(self, ch: Channel, cmd: RemotingCommand) -> None:
        """CHECK_TRANSACTION_STATE (oneway) from a broker: ask a producer of the message's topic
        over its Telemetry stream (no producer connected: the broker asks again later)."""
        h = CheckTransactionStateRequestHeader.from_ext_fields(cmd.ext_fields)
        try:
            msg, _ = decode_message(cmd.body, 0)
        except FrameError as exc:
            log.warning("transaction check from %s with an unreadable message: %s", ch.remote_addr, exc)
            return None
        producer = self.sessions.producer_for(msg.topic)
        if producer is None or producer.outbox is None:
            log.info("transaction check of %s: no 5.x producer of %s is connected", h.msg_id, msg.topic)
            return None
        props = dict(msg.properties)
        m = to_v2(msg.topic, msg.body, props)
        m.system_properties.message_type = v2.TRANSACTION
        set_timestamp_ms(m.system_properties.born_timestamp, msg.born_timestamp)
        m.system_properties.born_host = msg.born_host
        tx = transaction_id(h.offset_msg_id or msg.offset_msg_id, h.tran_state_table_offset or 0)
        cmd5 = v2.TelemetryCommand()
        cmd5.recover_orphaned_transaction_command.message.CopyFrom(m)
        cmd5.recover_orphaned_transaction_command.transaction_id = tx
        producer.outbox.put_nowait(cmd5)
        return None
