"""A scripted in-memory name server + broker on one port: a test double for the harness self-tests.

Not a broker: just enough of the protocol (route lookup, heartbeat, send, long-polled pull,
consumer list, offsets, queue locks) for the C++ client to produce and consume, so the harness can be proven
end to end before the reference broker exists, and so tests can see exactly which requests the
C++ client sent (``FakeCluster.requests``). One topic config for every topic (4 queues, perm 6),
auto-created on first use; offsets are per (group, topic, queue); new groups start at 0, as a
4.9.8 broker answers QUERY_CONSUMER_OFFSET for queues whose minimum offset is still 0.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass, field

from rocketmq_sdk.protocol.codes import RequestCode, ResponseCode
from rocketmq_sdk.protocol.headers import (
    PullMessageRequestHeader,
    QueryConsumerOffsetRequestHeader,
    QueueRequestHeader,
    SendMessageRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rocketmq_sdk.protocol.message_codec import decode_properties, encode_stored_message, pack_host
from rocketmq_sdk.protocol.msgid import create_offset_msg_id
from rocketmq_sdk.remoting.command import RemotingCommand
from rocketmq_sdk.remoting.loop import EventLoopThread
from rocketmq_sdk.remoting.server import RemotingServer

QUEUES = 4
BROKER_NAME = "fake-broker"
MAX_HOLD_S = 1.0


@dataclass
class Stored:
    """One message as the fake stored it."""

    topic: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    body: bytes
    properties: dict[str, str]
    record: bytes = field(repr=False)


@dataclass
class Request:
    code: int
    ext_fields: dict[str, str]
    body: bytes
    language: int  # LanguageCode value (CPP = 1)


class FakeCluster:
    """Start with ``FakeCluster().start()`` (or as a context manager); ``addr`` is both the name
    server and the broker address. ``stop()`` is idempotent."""

    def __init__(self) -> None:
        self.loop = EventLoopThread(name="fake-cluster")
        self.server = RemotingServer(idle_timeout_s=None, name="fake-cluster")
        self.addr = ""
        self.requests: list[Request] = []
        self.queues: dict[tuple[str, int], list[Stored]] = {}
        self.offsets: dict[tuple[str, str, int], int] = {}
        self.consumers: dict[str, set[str]] = {}
        self._commit_log_offset = 0
        self._lock = threading.Lock()
        self._arrival: asyncio.Event | None = None
        handlers = {
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self._route,
            RequestCode.HEART_BEAT: self._heartbeat,
            RequestCode.UNREGISTER_CLIENT: self._ok,
            RequestCode.SEND_MESSAGE: self._send,
            RequestCode.SEND_MESSAGE_V2: self._send,
            RequestCode.PULL_MESSAGE: self._pull,
            RequestCode.GET_CONSUMER_LIST_BY_GROUP: self._consumer_list,
            RequestCode.QUERY_CONSUMER_OFFSET: self._query_offset,
            RequestCode.UPDATE_CONSUMER_OFFSET: self._update_offset,
            RequestCode.GET_MAX_OFFSET: self._max_offset,
            RequestCode.GET_MIN_OFFSET: self._min_offset,
            RequestCode.CONSUMER_SEND_MSG_BACK: self._ok,
            RequestCode.LOCK_BATCH_MQ: self._lock_batch,
            RequestCode.UNLOCK_BATCH_MQ: self._ok,
        }
        for code, handler in handlers.items():
            self.server.register_processor(code, self._recording(handler))

    # lifecycle ------------------------------------------------------------------------------
    def start(self) -> FakeCluster:
        port = self.loop.run(self._start(), timeout_s=5)
        self.addr = f"127.0.0.1:{port}"
        return self

    async def _start(self) -> int:
        self._arrival = asyncio.Event()
        return await self.server.start("127.0.0.1", 0)

    def stop(self) -> None:
        if self.loop.is_running:
            self.loop.run(self.server.stop(1.0), timeout_s=5)
            self.loop.stop()

    def __enter__(self) -> FakeCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # observation ----------------------------------------------------------------------------
    def requests_of(self, code: int) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.code == code]

    def stored(self, topic: str) -> list[Stored]:
        with self._lock:
            return sorted((m for (t, _q), msgs in self.queues.items() if t == topic for m in msgs),
                          key=lambda m: m.commit_log_offset)

    # processors -----------------------------------------------------------------------------
    def _recording(self, handler):
        async def process(channel, cmd: RemotingCommand):
            with self._lock:
                self.requests.append(Request(cmd.code, dict(cmd.ext_fields), bytes(cmd.body or b""),
                                             int(cmd.language)))
            return await handler(channel, cmd)
        return process

    async def _ok(self, _channel, cmd):
        return cmd.response(ResponseCode.SUCCESS)

    async def _route(self, _channel, cmd):
        # fastjson form, as a 4.9.8 name server writes it (bare numeric broker id key)
        broker = f'{{"brokerAddrs":{{0:"{self.addr}"}},"brokerName":"{BROKER_NAME}","cluster":"FakeCluster"}}'
        queue = (f'{{"brokerName":"{BROKER_NAME}","perm":6,"readQueueNums":{QUEUES},"topicSysFlag":0,'
                 f'"writeQueueNums":{QUEUES}}}')
        body = f'{{"brokerDatas":[{broker}],"filterServerTable":{{}},"queueDatas":[{queue}]}}'
        return cmd.response(ResponseCode.SUCCESS, body=body.encode())

    async def _heartbeat(self, _channel, cmd):
        data = json.loads(cmd.body or b"{}")
        with self._lock:
            for consumer in data.get("consumerDataSet") or []:
                self.consumers.setdefault(consumer["groupName"], set()).add(data["clientID"])
        return cmd.response(ResponseCode.SUCCESS)

    async def _consumer_list(self, _channel, cmd):
        with self._lock:
            ids = sorted(self.consumers.get(cmd.ext_fields.get("consumerGroup", ""), ()))
        return cmd.response(ResponseCode.SUCCESS, body=json.dumps({"consumerIdList": ids}).encode())

    async def _send(self, channel, cmd):
        if cmd.code == RequestCode.SEND_MESSAGE_V2:
            header = SendMessageRequestHeader.from_v2(cmd.ext_fields)
        else:
            header = SendMessageRequestHeader.from_ext_fields(cmd.ext_fields)
        properties = header.properties or ""
        queue_id = (header.queue_id or 0) % QUEUES
        body = bytes(cmd.body or b"")
        host, _v6 = pack_host(channel.remote_addr)
        store, _ = pack_host(self.addr)
        with self._lock:
            queue = self.queues.setdefault((header.topic, queue_id), [])
            offset, phys = len(queue), self._commit_log_offset
            record = bytes(encode_stored_message(
                topic=header.topic.encode(), body=body, properties=properties.encode(), queue_id=queue_id,
                flag=header.flag or 0, sys_flag=header.sys_flag or 0, born_timestamp=header.born_timestamp or 0,
                born_host=host, store_host=store, store_timestamp=int(time.time() * 1000), queue_offset=offset,
                physical_offset=phys, reconsume_times=header.reconsume_times or 0))
            self._commit_log_offset += len(record)
            queue.append(Stored(header.topic, queue_id, offset, phys, body, decode_properties(properties), record))
        self._arrival.set()
        self._arrival = asyncio.Event()
        msg_id = create_offset_msg_id("127.0.0.1", int(self.addr.rsplit(":", 1)[1]), phys)
        return cmd.response(ResponseCode.SUCCESS, ext_fields={
            "msgId": msg_id, "queueId": str(queue_id), "queueOffset": str(offset)})

    async def _pull(self, _channel, cmd):
        header = PullMessageRequestHeader.from_ext_fields(cmd.ext_fields)
        hold_s = min(MAX_HOLD_S, (header.suspend_timeout_millis or 0) / 1000) if (header.sys_flag or 0) & 2 else 0
        deadline = time.monotonic() + hold_s
        while True:
            with self._lock:
                queue = list(self.queues.get((header.topic, header.queue_id), []))
            found = queue[header.queue_offset:header.queue_offset + (header.max_msg_nums or 32)]
            remaining = deadline - time.monotonic()
            if found or remaining <= 0:
                break
            arrival = self._arrival
            try:
                await asyncio.wait_for(arrival.wait(), remaining)
            except TimeoutError:
                pass
        ext = {"suggestWhichBrokerId": "0", "minOffset": "0", "maxOffset": str(len(queue)),
               "nextBeginOffset": str(header.queue_offset + len(found) if found else max(header.queue_offset, 0))}
        if found:
            return cmd.response(ResponseCode.SUCCESS, ext_fields=ext, body=b"".join(m.record for m in found))
        code = ResponseCode.PULL_OFFSET_MOVED if header.queue_offset > len(queue) else ResponseCode.PULL_NOT_FOUND
        if code == ResponseCode.PULL_OFFSET_MOVED:
            ext["nextBeginOffset"] = str(len(queue))
        return cmd.response(code, ext_fields=ext)

    async def _query_offset(self, _channel, cmd):
        h = QueryConsumerOffsetRequestHeader.from_ext_fields(cmd.ext_fields)
        with self._lock:
            offset = self.offsets.get((h.consumer_group, h.topic, h.queue_id), 0)
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"offset": str(offset)})

    async def _update_offset(self, _channel, cmd):
        h = UpdateConsumerOffsetRequestHeader.from_ext_fields(cmd.ext_fields)
        with self._lock:
            self.offsets[(h.consumer_group, h.topic, h.queue_id)] = h.commit_offset
        return cmd.response(ResponseCode.SUCCESS)

    async def _max_offset(self, _channel, cmd):
        h = QueueRequestHeader.from_ext_fields(cmd.ext_fields)
        with self._lock:
            n = len(self.queues.get((h.topic, h.queue_id), []))
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"offset": str(n)})

    async def _lock_batch(self, _channel, cmd):
        # every lock is granted (one consumer per group in these tests)
        mqs = json.loads(cmd.body or b"{}").get("mqSet") or []
        return cmd.response(ResponseCode.SUCCESS, body=json.dumps({"lockOKMQSet": mqs}).encode())

    async def _min_offset(self, _channel, cmd):
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"offset": "0"})
