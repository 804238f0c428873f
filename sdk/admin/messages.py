"""Messages: by offset message id, unique id, key, queue offset; consuming one directly on a client."""

from __future__ import annotations

from ..exceptions import IllegalArgumentError, MQBrokerError, MQClientError, MQError, RemotingError
from ..protocol.bodies import ConsumeMessageDirectlyResult
from ..protocol.codes import RequestCode, ResponseCode, is_sys_topic
from ..protocol.headers import (
    ConsumeMessageDirectlyResultRequestHeader,
    QueryMessageRequestHeader,
    ViewMessageRequestHeader,
)
from ..protocol.message import MessageExt, MessageQueue
from ..protocol.message_codec import decode_messages
from ..protocol.msgid import decode_offset_msg_id, get_nearly_time_from_id
from .core import JAVA_LONG_MAX, UNIQUE_KEY_QUERY, AdminCore

__all__ = ["MessageAdmin"]


class MessageAdmin(AdminCore):
    """Messages: by offset message id, unique id, key, queue offset; consuming one directly on a client."""

    async def view_message(self, offset_msg_id: str) -> MessageExt:
        """The message with this offset message id (VIEW_MESSAGE_BY_ID 33 to the store host
        encoded in the id), as ``queryMsgById``. When the store host does not answer, the
        slaves of the brokers whose master is down are asked instead (a slave's CommitLog is a
        byte-for-byte copy of its master's, so the offset in the id is valid there too).

        Raises:
            IllegalArgumentError: not an offset message id.
            MQBrokerError: no message at that offset. RemotingError: neither the store host nor
            a slave standing in for a master answered.
        """
        try:
            host, port, offset = decode_offset_msg_id(offset_msg_id)
        except ValueError as exc:
            raise IllegalArgumentError(str(exc)) from None

        addr = f"{host}:{port}"
        ext = ViewMessageRequestHeader(offset=offset).to_ext_fields()
        try:
            resp = await self._broker(addr, RequestCode.VIEW_MESSAGE_BY_ID, ext)
        except RemotingError:
            found = await self._view_on_slaves(addr, ext)
            if found is None:
                raise
            return found[1]
        msgs = decode_messages(resp.body)
        if not msgs:
            raise MQBrokerError(ResponseCode.QUERY_NOT_FOUND, f"no message {offset_msg_id}", addr)
        return msgs[0]

    async def _view_on_slaves(self, addr: str, ext: dict[str, str]) -> tuple[str, MessageExt] | None:
        """VIEW_MESSAGE_BY_ID on the slaves standing in for masters that are down: the first
        that has a message at the offset whose store host is ``addr``, with the message (its
        ``broker_name`` set: the store host is the master's, which the name server no longer
        lists) (None: no such slave)."""
        for broker in self._masterless(await self._cluster()):
            try:
                resp = await self._broker(broker.read_from, RequestCode.VIEW_MESSAGE_BY_ID, dict(ext))
            except (MQBrokerError, RemotingError):
                continue
            msgs = decode_messages(resp.body)
            if msgs and msgs[0].store_host == addr:
                msgs[0].broker_name = msgs[0].broker_name or broker.broker_name
                return broker.read_from, msgs[0]
        return None

    async def _stand_in(self, offset_msg_id: str) -> str | None:
        """The slave standing in for the (down) master that stored ``offset_msg_id``, if any."""
        try:
            host, port, offset = decode_offset_msg_id(offset_msg_id)
        except ValueError:
            return None
        found = await self._view_on_slaves(f"{host}:{port}", ViewMessageRequestHeader(offset=offset).to_ext_fields())
        return found[0] if found else None

    async def query_message_by_key(self, topic: str, key: str, *, max_num: int = 64, begin_ms: int = 0,
                             end_ms: int = JAVA_LONG_MAX, unique: bool = False) -> list[MessageExt]:
        """Messages of ``topic`` indexed under ``key`` stored in [begin_ms, end_ms]
        (QUERY_MESSAGE 12 to every broker of the route: its master, or a slave while the master is down), as ``queryMsgByKey``.

        Args:
            max_num: at most this many messages per broker (default 64, mqadmin's).
            unique: the key is a unique message id (``_UNIQUE_KEY_QUERY``), see
                :meth:`query_message_by_unique_key`.

        Raises:
            TopicNotExistError, RemotingError.
        """
        ext = QueryMessageRequestHeader(topic=topic, key=key, max_num=max_num, begin_timestamp=begin_ms,
                                        end_timestamp=end_ms).to_ext_fields()
        ext[UNIQUE_KEY_QUERY] = "true" if unique else "false"

        route = await self._route(topic)
        out: list[MessageExt] = []
        for broker_name, addr in self._route_readers(route).items():
            try:
                resp = await self._broker(addr, RequestCode.QUERY_MESSAGE, dict(ext))
            except MQBrokerError as exc:
                if exc.code == ResponseCode.QUERY_NOT_FOUND:
                    continue
                raise
            for m in decode_messages(resp.body):
                if m.topic != topic:
                    continue
                if unique and m.msg_id != key:
                    continue
                if not unique and key not in m.keys:
                    continue
                m.broker_name = m.broker_name or broker_name  # a slave's copy names the master's store host
                out.append(m)
        out.sort(key=lambda m: m.store_timestamp)
        return out

    async def query_message_by_unique_key(self, topic: str, msg_id: str) -> MessageExt:
        """The message whose client-side unique id (``UNIQ_KEY``) is ``msg_id``, as
        ``queryMsgByUniqueKey`` (QUERY_MESSAGE with ``_UNIQUE_KEY_QUERY=true``, max 32).

        Raises:
            MQClientError: not found.
        """
        msgs = await self.query_message_by_key(topic, msg_id, max_num=32, unique=True)
        if not msgs:
            raise MQClientError(f"message {msg_id} not found in topic {topic}")
        return msgs[0]

    async def query_message_by_id(self, msg_id: str, topic: str | None = None) -> MessageExt:
        """Look a message up by either id kind, as ``mqadmin queryMsgById``: an offset message id
        first (VIEW_MESSAGE_BY_ID), then as a unique id (``SendResult.msg_id``) in ``topic``, or
        without ``topic`` in every non-system topic of the cluster (one QUERY_MESSAGE per topic,
        from an hour before the time the id carries).

        Raises:
            MQClientError: not found.
        """
        errors: list[str] = []
        try:
            return await self.view_message(msg_id)
        except (IllegalArgumentError, MQBrokerError, RemotingError) as exc:
            errors.append(str(exc))
        if topic:
            return await self.query_message_by_unique_key(topic, msg_id)
        found = await self._find_unique_key_in_all_topics(msg_id)
        if found is not None:
            return found
        raise MQClientError(f"message {msg_id} not found, neither as an offset message id ({'; '.join(errors)}) "
                            "nor as a unique id in any topic")

    async def _find_unique_key_in_all_topics(self, msg_id: str) -> MessageExt | None:
        try:
            begin_ms = max(0, get_nearly_time_from_id(msg_id) - 3_600_000)
        except ValueError:
            return None
        for topic in await self._topics():
            if is_sys_topic(topic):
                continue
            try:
                msgs = await self.query_message_by_key(topic, msg_id, max_num=32, begin_ms=begin_ms, unique=True)
            except MQError:  # e.g. a cluster or broker name listed as a topic: no route
                continue
            if msgs:
                return msgs[0]
        return None

    async def search_offset(self, topic: str, broker_name: str, queue_id: int, timestamp_ms: int) -> int:
        """The offset of the first message of a queue stored at or after ``timestamp_ms``
        (SEARCH_OFFSET_BY_TIMESTAMP 29 to the master, or a slave while it is down; as Java ``searchOffset``; the queue's max
        offset when every message is older).

        Raises:
            MQClientError: ``broker_name`` is not in the topic's route.
        """
        addr = await self._queue_addr(topic, broker_name, read=True)
        return await self._api.search_offset(addr, MessageQueue(topic, broker_name, queue_id), timestamp_ms,
                                             self.timeout_ms)

    async def pull_messages(self, topic: str, broker_name: str, queue_id: int, offset: int,
                            max_nums: int = 32) -> list[MessageExt]:
        """Up to ``max_nums`` messages of a queue from ``offset`` on (one PULL_MESSAGE as group
        ``TOOLS_CONSUMER``, no filter, bodies inflated); empty past the end of the queue.

        Raises:
            MQClientError: ``broker_name`` is not in the topic's route.
            IllegalArgumentError: ``max_nums`` not in 1..1024.
        """
        if not 1 <= max_nums <= 1024:
            raise IllegalArgumentError(f"max_nums must be in 1..1024, got {max_nums}")
        addr = await self._queue_addr(topic, broker_name, read=True)
        return await self._pull(addr, MessageQueue(topic, broker_name, queue_id), offset, max_nums)

    async def query_message_by_offset(self, topic: str, broker_name: str, queue_id: int, offset: int) -> MessageExt:
        """The message at ``offset`` of a queue (one PULL_MESSAGE of 1 message as group
        ``TOOLS_CONSUMER``, like ``queryMsgByOffset``).

        Raises:
            MQClientError: unknown broker, or no message at that offset.
        """
        addr = await self._queue_addr(topic, broker_name, read=True)
        msg = await self._pull_one(addr, MessageQueue(topic, broker_name, queue_id), offset)
        if msg is None:
            raise MQClientError(f"no message at offset {offset} of {topic}/{broker_name}/{queue_id}")
        return msg

    async def consume_message_directly(self, group: str, msg_id: str, client_id: str | None = None,
                                 topic: str | None = None) -> dict[str, ConsumeMessageDirectlyResult]:
        """Have a consumer of ``group`` consume one message again (CONSUME_MESSAGE_DIRECTLY 309,
        forwarded by the broker to the client), as ``queryMsgById -g G [-d clientId]``.

        Args:
            msg_id: offset message id (or unique id, with ``topic``).
            client_id: this client only (default: every connected client).

        Returns:
            client id → result (``consume_result`` CR_SUCCESS, CR_LATER...).
        """
        msg = await self.query_message_by_id(msg_id, topic)

        conns = await self._connections(group)
        readers = await self._group_readers(group)
        # the broker that stores the message, as mqadmin (it serves the group's clients too);
        # while its master is down, the slave standing in for it (same CommitLog offsets)
        addr = msg.store_host or readers.get(msg.broker_name) or next(iter(readers.values()))
        if addr not in readers.values():  # its master is down: the slave holding the message
            addr = await self._stand_in(msg.offset_msg_id) or addr
        out = {}
        for c in conns.connections:
            if client_id and c.client_id != client_id:
                continue
            ext = ConsumeMessageDirectlyResultRequestHeader(
                consumer_group=group, client_id=c.client_id, msg_id=msg.offset_msg_id).to_ext_fields()
            resp = await self._broker(addr, RequestCode.CONSUME_MESSAGE_DIRECTLY, ext)
            out[c.client_id] = ConsumeMessageDirectlyResult.from_json(resp.body)
        if not out:
            who = f"client {client_id}" if client_id else "no client"
            raise MQClientError(f"{who} of group {group} is not online")
        return out
