"""``MQClientAPI``: typed request helpers over ``RemotingClient`` (Java ``MQClientAPIImpl``).

Every helper is a coroutine for the client instance's event loop. Non-success response codes
become ``MQBrokerError`` (``TopicNotExistError`` for a missing route); network failures raise the
``RemotingError`` family unchanged.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator

from ..exceptions import (
    MQBrokerError,
    RemotingConnectError,
    RemotingError,
    RemotingTimeoutError,
    TopicNotExistError,
    broker_error,
)
from ..protocol import fastjson
from ..protocol.bodies import ConsumerListBody, HeartbeatData, SubscriptionData, TopicRouteData
from ..protocol.codes import RequestCode, ResponseCode, request_name
from ..protocol.headers import (
    ConsumerGroupRequestHeader,
    ConsumerSendMsgBackRequestHeader,
    EndTransactionRequestHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    QueryConsumerOffsetRequestHeader,
    QueueRequestHeader,
    SearchOffsetRequestHeader,
    SendMessageRequestHeader,
    TopicRequestHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from ..protocol.message import MessageQueue, PullResult, PullStatus, SendResult, SendStatus
from ..protocol.message_codec import decode_messages
from ..protocol.recall import RecallMessageRequestHeader
from ..remoting.client import RemotingClient
from ..remoting.command import RemotingCommand
from .blocking import BlockingConnections

__all__ = ["MQClientAPI", "NameServerList"]

log = logging.getLogger("rocketmq_sdk.client.api")

_SUCCESS = ResponseCode.SUCCESS
_SEND_STATUS = {int(c): SendStatus.from_response_code(c) for c in (0, 10, 11, 12)}
_new_request = RemotingCommand.request


class NameServerList:
    """Name server addresses, tried from a random start and then round robin (Java, docs/protocol.md §6.3): the
    last address that answered stays chosen until it fails."""

    def __init__(self, addrs: list[str]) -> None:
        self.addrs = list(addrs)
        self._index = random.randrange(999)
        self.chosen: str | None = None

    def update(self, addrs: list[str]) -> bool:
        """Replace the list (shuffled, as Java does when it changes); True if it changed."""
        if sorted(addrs) == sorted(self.addrs):
            return False
        addrs = list(addrs)
        random.shuffle(addrs)
        self.addrs = addrs
        if self.chosen not in addrs:
            self.chosen = None
        return True

    def candidates(self) -> Iterator[str]:
        """Addresses to try for one request, lazily: the chosen one, then the next ones in round
        robin order (the index only advances for addresses actually tried, as Java's)."""
        tried: set[str] = set()
        if self.chosen in self.addrs:
            tried.add(self.chosen)
            yield self.chosen
        for _ in range(len(self.addrs)):
            if not self.addrs:
                return
            self._index += 1
            addr = self.addrs[self._index % len(self.addrs)]
            if addr not in tried:
                tried.add(addr)
                yield addr


def send_result_from_response(resp: RemotingCommand, addr: str, mq: MessageQueue, uniq_id: str) -> SendResult:
    """Map a send response as Java does (codes 0, 10, 11, 12 → SendResult; others raise)."""
    status = _SEND_STATUS.get(resp.code)  # SendStatus.from_response_code
    if status is None:
        raise broker_error(resp.code, resp.remark, addr)
    get = resp.ext_fields.get
    queue_id = get("queueId")
    return SendResult(
        status, uniq_id, get("msgId", ""),
        mq if queue_id is None or int(queue_id) == mq.queue_id else MessageQueue(mq.topic, mq.broker_name,
                                                                                   int(queue_id)),
        int(get("queueOffset", -1)), get("transactionId"), get("MSG_REGION"), get("TRACE_ON", "true") != "false",
        get("recallHandle"))


def _queue_header(mq: MessageQueue) -> dict[str, str]:
    return QueueRequestHeader(topic=mq.topic, queue_id=mq.queue_id, bname=mq.broker_name).to_ext_fields()


def _check(resp: RemotingCommand, addr: str) -> RemotingCommand:
    if resp.code != _SUCCESS:
        raise broker_error(resp.code, resp.remark, addr)
    return resp


class MQClientAPI:
    """Request helpers.

    Args:
        remoting: the instance's remoting client (one connection per address).
        namesrv_addrs: name server ``host:port`` list.
        timeout_ms: default timeout of requests without their own, ms.
    """

    def __init__(self, remoting: RemotingClient, namesrv_addrs: list[str], timeout_ms: float = 3000.0) -> None:
        self.remoting = remoting
        self.namesrv = NameServerList(namesrv_addrs)
        self.timeout_ms = timeout_ms

    async def _request(self, addr: str, code: int, ext: dict[str, str] | None = None, body: bytes = b"",
                       timeout_ms: float | None = None) -> RemotingCommand:
        """Request ``code`` of ``addr`` and return its SUCCESS answer.

        Raises:
            MQBrokerError: another response code. RemotingError: network failure or timeout.
        """
        cmd = _new_request(code, ext, body)
        return _check(await self.remoting.invoke(addr, cmd, timeout_ms or self.timeout_ms), addr)

    async def _offset(self, addr: str, code: int, ext: dict[str, str], timeout_ms: float | None,
                      missing: int = 0) -> int:
        """The ``offset`` field of the SUCCESS answer to ``code`` (``missing`` when absent)."""
        resp = await self._request(addr, code, ext, timeout_ms=timeout_ms)
        return int(resp.ext_fields.get("offset", missing))

    # -------------------------------------------------------------- name server

    async def invoke_namesrv(self, cmd: RemotingCommand, timeout_ms: float | None = None,
                             operation: str | None = None) -> RemotingCommand:
        """Send ``cmd`` to a name server, trying the next one on a network failure.

        ``operation`` names the request for people ("get route of topic X"); a timeout then says
        "get route of topic X from name server A: no answer within N ms".

        Raises:
            MQBrokerError: no name server address configured (code -1).
            RemotingError: every name server failed (the last error).
        """
        if not self.namesrv.addrs:
            raise MQBrokerError(-1, "no name server address configured (namesrv_addr)")
        last: RemotingError | None = None
        for addr in self.namesrv.candidates():
            try:
                resp = await self.remoting.invoke(addr, cmd, timeout_ms or self.timeout_ms)
            except RemotingError as exc:
                if operation and isinstance(exc, RemotingTimeoutError):
                    exc = RemotingTimeoutError(addr, exc.timeout_ms, request_name(cmd.code),
                                               operation=f"{operation} from name server {addr}")
                elif type(exc) is RemotingConnectError:
                    exc = RemotingConnectError(addr, exc.reason, role="name server")
                log.warning("name server %s failed: %s", addr, exc)
                self.namesrv.chosen = None
                self.remoting.close_connection(addr)
                last = exc
                # a fresh opaque for the next attempt: the failed one may still be answered
                cmd = _new_request(cmd.code, cmd.ext_fields, cmd.body)
                continue
            self.namesrv.chosen = addr
            return resp
        assert last is not None
        raise last

    async def get_topic_route(self, topic: str, timeout_ms: float | None = None) -> TopicRouteData:
        """GET_ROUTEINFO_BY_TOPIC (105).

        Raises:
            TopicNotExistError: the name server knows no route for ``topic`` (17).
            MQBrokerError: another error code.
            RemotingError: no name server answered.
        """
        cmd = _new_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, TopicRequestHeader(topic=topic).to_ext_fields())
        resp = await self.invoke_namesrv(cmd, timeout_ms, f"get route of topic {topic}")
        if resp.code == ResponseCode.TOPIC_NOT_EXIST:
            raise TopicNotExistError(resp.code, resp.remark or f"no route info of topic {topic}")
        _check(resp, self.namesrv.chosen or "")
        if not resp.body:
            raise TopicNotExistError(ResponseCode.TOPIC_NOT_EXIST, f"empty route info of topic {topic}")
        return TopicRouteData.from_json(resp.body)

    # -------------------------------------------------------------- producer

    async def send_message(self, addr: str, mq: MessageQueue, header: SendMessageRequestHeader | dict[str, str],
                           body: bytes, uniq_id: str, timeout_ms: float, *,
                           code: int = RequestCode.SEND_MESSAGE_V2) -> SendResult:
        """SEND_MESSAGE_V2 (310) with the single-letter header; map the answer as Java does.

        ``header`` is a ``SendMessageRequestHeader`` or its ``to_v2()`` dict (producers build the
        dict once per message and only patch the queue between retries).

        Returns:
            a ``SendResult`` for codes 0, 10, 11, 12 (SEND_OK and the three degraded statuses).

        Raises:
            MQBrokerError: any other code (``.code`` holds it).
            RemotingError: network failure or timeout.
        """
        ext = header if isinstance(header, dict) else header.to_v2()
        cmd = _new_request(code, ext, body)
        return send_result_from_response(await self.remoting.invoke(addr, cmd, timeout_ms), addr, mq, uniq_id)

    async def recall_message(self, addr: str, header: RecallMessageRequestHeader, timeout_ms: float | None = None
                             ) -> str:
        """RECALL_MESSAGE (370, RocketMQ 5.3): the recalled message's ``UNIQ_KEY`` (``msgId``).

        Raises:
            MQBrokerError: any code but SUCCESS (``IllegalOperationError`` for 604).
            RemotingError: network failure or timeout.
        """
        resp = await self._request(addr, RequestCode.RECALL_MESSAGE, header.to_ext_fields(), timeout_ms=timeout_ms)
        return resp.ext_fields.get("msgId") or ""

    def send_message_blocking(self, conns: BlockingConnections, addr: str, mq: MessageQueue, header: dict[str, str],
                              body: bytes, uniq_id: str, timeout_ms: float, *,
                              code: int = RequestCode.SEND_MESSAGE_V2) -> SendResult:
        """:meth:`send_message` in the calling thread over its own blocking connection.

        Raises:
            MQBrokerError, RemotingError: as :meth:`send_message`.
        """
        return send_result_from_response(conns.invoke(addr, _new_request(code, header, body), timeout_ms), addr, mq, uniq_id)

    def send_request_blocking(self, conns: BlockingConnections, addr: str, mq: MessageQueue, cmd: RemotingCommand,
                              uniq_id: str, timeout_ms: float) -> SendResult:
        """:meth:`send_message_blocking` of a request the producer built (``producer/prepare.py``).

        Raises:
            MQBrokerError, RemotingError: as :meth:`send_message`.
        """
        return send_result_from_response(conns.invoke(addr, cmd, timeout_ms), addr, mq, uniq_id)

    async def send_message_oneway(self, addr: str, header: dict[str, str], body: bytes, *,
                                  code: int = RequestCode.SEND_MESSAGE_V2, timeout_ms: float = 3000.0) -> None:
        """A send request with the ONEWAY flag: written to the socket, never answered.

        Raises:
            RemotingError: cannot connect, or the socket did not drain within ``timeout_ms``.
        """
        await self.remoting.invoke_oneway(addr, _new_request(code, header, body, oneway=True), timeout_ms)

    async def end_transaction_oneway(self, addr: str, header: EndTransactionRequestHeader, *,
                                     remark: str | None = None, timeout_ms: float = 3000.0) -> None:
        """END_TRANSACTION (37), oneway as Java (commit 8, rollback 12, unknown 0).

        Raises:
            RemotingError: cannot connect or write.
        """
        cmd = _new_request(RequestCode.END_TRANSACTION, header.to_ext_fields(), oneway=True)
        cmd.remark = remark
        await self.remoting.invoke_oneway(addr, cmd, timeout_ms)

    # -------------------------------------------------------------- heartbeat, clients

    async def send_heartbeat(self, addr: str, data: HeartbeatData, timeout_ms: float | None = None) -> int:
        """HEART_BEAT (34); returns the broker's version.

        Raises:
            MQBrokerError, RemotingError.
        """
        return (await self.heartbeat(addr, data, timeout_ms)).version

    async def heartbeat(self, addr: str, data: HeartbeatData, timeout_ms: float | None = None) -> RemotingCommand:
        """HEART_BEAT (34); returns the broker's answer (its ``version``, and from a 5.x broker
        ``IS_SUPPORT_HEART_BEAT_V2`` / ``IS_SUB_CHANGE`` in ``ext_fields``).

        Raises:
            MQBrokerError, RemotingError.
        """
        return await self._request(addr, RequestCode.HEART_BEAT, None, data.to_json(), timeout_ms)

    async def check_client_in_broker(self, addr: str, group: str, client_id: str, subscription: SubscriptionData,
                                     timeout_ms: float | None = None) -> None:
        """CHECK_CLIENT_CONFIG (46): can the broker filter ``subscription``? (Java
        ``checkClientInBroker``: an SQL92 subscription needs ``enablePropertyFilter=true`` and an
        expression that compiles.)

        Raises:
            MQBrokerError: SYSTEM_ERROR (the broker does not filter by that type) or
                SUBSCRIPTION_PARSE_FAILED (23, the compiler's message in ``remark``).
            RemotingError: the broker is unreachable.
        """
        body = fastjson.dumps({"clientId": client_id, "group": group,
                               "subscriptionData": subscription.to_dict()}).encode("utf-8")
        await self._request(addr, RequestCode.CHECK_CLIENT_CONFIG, None, body, timeout_ms)

    async def unregister_client(self, addr: str, client_id: str, *, producer_group: str | None = None,
                                consumer_group: str | None = None, timeout_ms: float | None = None) -> None:
        """UNREGISTER_CLIENT (35).

        Raises:
            MQBrokerError, RemotingError.
        """
        header = UnregisterClientRequestHeader(client_id=client_id, producer_group=producer_group,
                                               consumer_group=consumer_group)
        await self._request(addr, RequestCode.UNREGISTER_CLIENT, header.to_ext_fields(), timeout_ms=timeout_ms)

    async def get_consumer_id_list(self, addr: str, group: str, timeout_ms: float | None = None) -> list[str]:
        """GET_CONSUMER_LIST_BY_GROUP (38): client ids of the group's live consumers.

        Raises:
            MQBrokerError, RemotingError.
        """
        resp = await self._request(addr, RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                                   ConsumerGroupRequestHeader(consumer_group=group).to_ext_fields(),
                                   timeout_ms=timeout_ms)
        if not resp.body:
            return []
        return list(ConsumerListBody.from_json(resp.body).consumer_id_list)

    # -------------------------------------------------------------- pull

    async def pull_message(self, addr: str, header: PullMessageRequestHeader, timeout_ms: float) -> PullResult:
        """PULL_MESSAGE (11); messages are decoded (bodies inflated) but not tag-filtered.

        Raises:
            MQBrokerError: a code other than 0/19/20/21.
            RemotingError: network failure or timeout.
        """
        result, body = await self.pull_message_raw(addr, header, timeout_ms)
        if body:
            result.msg_found_list = decode_messages(body)
        return result

    async def pull_message_raw(self, addr: str, header: PullMessageRequestHeader,
                               timeout_ms: float) -> tuple[PullResult, bytes]:
        """PULL_MESSAGE (11) with the records left encoded: the result (its ``msg_found_list``
        empty) and the body, FOUND's back-to-back stored records as the broker sent them
        (docs/protocol.md §4.5; ``b""`` for the other statuses), for readers that decode them
        their own way (``message_codec.decode_messages`` gives what :meth:`pull_message` does).

        Raises:
            MQBrokerError: a code other than 0/19/20/21.
            RemotingError: network failure or timeout.
        """
        cmd = _new_request(RequestCode.PULL_MESSAGE, header.to_ext_fields())
        resp = await self.remoting.invoke(addr, cmd, timeout_ms)
        status = PullStatus.from_response_code(resp.code)
        if status is None:
            raise MQBrokerError(resp.code, resp.remark, addr)
        h = PullMessageResponseHeader.from_ext_fields(resp.ext_fields)
        body = resp.body if status is PullStatus.FOUND and resp.body else b""
        return PullResult(status, h.next_begin_offset or 0, h.min_offset or 0, h.max_offset or 0, [],
                          h.suggest_which_broker_id or 0), bytes(body)

    # -------------------------------------------------------------- offsets

    async def query_consumer_offset(self, addr: str, group: str, mq: MessageQueue,
                                    timeout_ms: float | None = None) -> int:
        """QUERY_CONSUMER_OFFSET (14).

        Raises:
            MQBrokerError: the broker has no offset (code 22) or another error.
            RemotingError.
        """
        header = QueryConsumerOffsetRequestHeader(consumer_group=group, topic=mq.topic, queue_id=mq.queue_id,
                                                  bname=mq.broker_name)
        return await self._offset(addr, RequestCode.QUERY_CONSUMER_OFFSET, header.to_ext_fields(), timeout_ms,
                                  missing=-1)

    async def update_consumer_offset_oneway(self, addr: str, group: str, mq: MessageQueue, offset: int) -> None:
        """UPDATE_CONSUMER_OFFSET (15), oneway as Java's periodic persist.

        Raises:
            RemotingError.
        """
        header = UpdateConsumerOffsetRequestHeader(consumer_group=group, topic=mq.topic, queue_id=mq.queue_id,
                                                   commit_offset=offset, bname=mq.broker_name)
        cmd = _new_request(RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext_fields(), oneway=True)
        await self.remoting.invoke_oneway(addr, cmd)

    async def update_consumer_offset(self, addr: str, group: str, mq: MessageQueue, offset: int,
                                     timeout_ms: float | None = None) -> None:
        """UPDATE_CONSUMER_OFFSET (15), waiting for the answer (used at shutdown).

        Raises:
            MQBrokerError, RemotingError.
        """
        header = UpdateConsumerOffsetRequestHeader(consumer_group=group, topic=mq.topic, queue_id=mq.queue_id,
                                                   commit_offset=offset, bname=mq.broker_name)
        await self._request(addr, RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext_fields(), timeout_ms=timeout_ms)

    async def get_max_offset(self, addr: str, mq: MessageQueue, timeout_ms: float | None = None) -> int:
        """GET_MAX_OFFSET (30): the queue's next offset to be written.

        Raises:
            MQBrokerError, RemotingError.
        """
        return await self._offset(addr, RequestCode.GET_MAX_OFFSET, _queue_header(mq), timeout_ms)

    async def get_min_offset(self, addr: str, mq: MessageQueue, timeout_ms: float | None = None) -> int:
        """GET_MIN_OFFSET (31).

        Raises:
            MQBrokerError, RemotingError.
        """
        return await self._offset(addr, RequestCode.GET_MIN_OFFSET, _queue_header(mq), timeout_ms)

    async def search_offset(self, addr: str, mq: MessageQueue, timestamp_ms: int,
                            timeout_ms: float | None = None) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP (29).

        Raises:
            MQBrokerError, RemotingError.
        """
        header = SearchOffsetRequestHeader(topic=mq.topic, queue_id=mq.queue_id, timestamp=timestamp_ms,
                                           bname=mq.broker_name)
        return await self._offset(addr, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, header.to_ext_fields(), timeout_ms)

    # -------------------------------------------------------------- consumer send-back

    async def consumer_send_message_back(self, addr: str, *, group: str, commit_log_offset: int,
                                         delay_level: int, origin_msg_id: str, origin_topic: str,
                                         max_reconsume_times: int, broker_name: str | None = None,
                                         timeout_ms: float | None = None) -> None:
        """CONSUMER_SEND_MSG_BACK (36): have the broker re-deliver a message through
        ``%RETRY%group`` (delay level 0 lets the broker use ``3 + reconsumeTimes``, as Java).

        Raises:
            MQBrokerError, RemotingError.
        """
        header = ConsumerSendMsgBackRequestHeader(
            offset=commit_log_offset, group=group, delay_level=delay_level, origin_msg_id=origin_msg_id,
            origin_topic=origin_topic, unit_mode=False, max_reconsume_times=max_reconsume_times,
            bname=broker_name)
        await self._request(addr, RequestCode.CONSUMER_SEND_MSG_BACK, header.to_ext_fields(), timeout_ms=timeout_ms)
