"""The broker-side message handed to the store (RocketMQ ``MessageExtBrokerInner``).

It carries what the CommitLog record (docs/protocol.md §4.5) needs, already in wire form: the properties string
(docs/protocol.md §4.1), the tag hash code for the consume queue, hosts as ``"ip:port"``. The store builds the
record with :func:`rocketmq_sdk.protocol.message_codec.encode_stored_message` and patches the
queue offset, physical offset and store timestamp inside its append lock.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from rocketmq_sdk.protocol.codes import MessageConst as MC
from rocketmq_sdk.protocol.codes import MessageSysFlag
from rocketmq_sdk.protocol.javahash import java_string_hash
from rocketmq_sdk.protocol.message import Message, MessageExt
from rocketmq_sdk.protocol.message_codec import decode_properties, encode_properties


def tags_string_to_tags_code(tags: str | None) -> int:
    """Consume-queue tag code of a tag string: Java ``String.hashCode``, 0 when absent (docs/protocol.md §4.8)."""
    return java_string_hash(tags) if tags else 0


@dataclass(slots=True)
class InnerMessage:
    """A message as the broker stores it.

    Attributes:
        topic: topic name (≤ 127 UTF-8 bytes).
        queue_id: destination queue.
        body: stored body (compressed bytes when ``sys_flag`` has COMPRESSED).
        properties_string: docs/protocol.md §4.1 properties string.
        flag: user flag (int32).
        tags_code: consume-queue tag code (``tags_string_to_tags_code``; deliver time for
            ``SCHEDULE_TOPIC_XXXX``).
        sys_flag: docs/protocol.md §4.3; the transaction bits decide whether the record gets a queue offset and a
            consume-queue entry (NOT/COMMIT) or not (PREPARED/ROLLBACK). The V6 host bits must
            match the hosts.
        born_timestamp: producer time, epoch ms.
        born_host / store_host: ``"ip:port"`` (IPv6 as ``"[::1]:port"``).
        reconsume_times: retry count.
        prepared_transaction_offset: CommitLog offset of the half message (commit records).
        wait_store_msg_ok: under SYNC_FLUSH, whether the put waits for the fsync (``WAIT``).
        properties: parsed properties, handed to arrival listeners; parsed lazily if None.
    """

    topic: str
    queue_id: int
    body: bytes
    properties_string: str = ""
    flag: int = 0
    tags_code: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: str = "127.0.0.1:0"
    store_host: str = "127.0.0.1:10911"
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    wait_store_msg_ok: bool = True
    properties: dict[str, str] | None = None

    @classmethod
    def from_message(cls, msg: Message, queue_id: int, *, born_host: str = "127.0.0.1:0",
                     store_host: str = "127.0.0.1:10911", sys_flag: int = 0,
                     born_timestamp: int | None = None, reconsume_times: int = 0) -> InnerMessage:
        """Build from an SDK :class:`Message` (tests, internal broker messages)."""
        props = dict(msg.properties)
        if ":" in born_host.rpartition(":")[0]:
            sys_flag |= MessageSysFlag.BORNHOST_V6
        if ":" in store_host.rpartition(":")[0]:
            sys_flag |= MessageSysFlag.STOREHOST_V6
        return cls(topic=msg.topic, queue_id=queue_id, body=msg.body,
                   properties_string=encode_properties(props), flag=msg.flag,
                   tags_code=tags_string_to_tags_code(props.get(MC.TAGS)), sys_flag=sys_flag,
                   born_timestamp=int(time.time() * 1000) if born_timestamp is None else born_timestamp,
                   born_host=born_host, store_host=store_host, reconsume_times=reconsume_times,
                   wait_store_msg_ok=props.get(MC.WAIT_STORE_MSG_OK, "true") != "false",
                   properties=props)

    @classmethod
    def requeued(cls, msg: MessageExt, topic: str, queue_id: int, props: dict[str, str], *,
                 store_host: str | None = None, reconsume_times: int | None = None) -> InnerMessage:
        """A stored message put again elsewhere by the broker itself (delay levels, timers, POP
        revive): same body, flag, sys flag, born time and host; ``props`` as given plus
        ``WAIT=false`` (nobody waits for it)."""
        props[MC.WAIT_STORE_MSG_OK] = "false"
        return cls(topic=topic, queue_id=queue_id, body=msg.body, properties_string=encode_properties(props),
                   flag=msg.flag, tags_code=tags_string_to_tags_code(props.get(MC.TAGS)), sys_flag=msg.sys_flag,
                   born_timestamp=msg.born_timestamp, born_host=msg.born_host,
                   store_host=msg.store_host if store_host is None else store_host,
                   reconsume_times=msg.reconsume_times if reconsume_times is None else reconsume_times,
                   properties=props, wait_store_msg_ok=False)

    def get_properties(self) -> dict[str, str]:
        if self.properties is None:
            self.properties = decode_properties(self.properties_string)
        return self.properties

    @property
    def transaction_type(self) -> int:
        return self.sys_flag & MessageSysFlag.TRANSACTION_MASK
