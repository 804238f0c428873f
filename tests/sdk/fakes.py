"""Programmable variants of the interop ``FakeCluster`` (name server + broker on one port) for
SDK tests that need failures or several broker names before the reference broker exists."""

from __future__ import annotations

from rocketmq_sdk.protocol.codes import RequestCode, ResponseCode
from rocketmq_sdk.protocol.headers import SendMessageRequestHeader

from tests.interop.fake_cluster import QUEUES, FakeCluster


class ScriptedCluster(FakeCluster):
    """``brokers``: broker names announced in routes (all served by this one address);
    ``fail_send``: broker name → response code answered to every send aimed at it;
    ``missing_topics``: topics the name server answers TOPIC_NOT_EXIST for."""

    def __init__(self, brokers: tuple[str, ...] = ("fake-broker",), fail_send: dict[str, int] | None = None,
                 missing_topics: frozenset[str] = frozenset()) -> None:
        super().__init__()
        self.brokers = brokers
        self.fail_send = dict(fail_send or {})
        self.missing_topics = set(missing_topics)
        #: answer to CONSUMER_SEND_MSG_BACK (SUCCESS by default; the fake never redelivers)
        self.send_back_code = ResponseCode.SUCCESS
        self.server.register_processor(RequestCode.CONSUMER_SEND_MSG_BACK, self._recording(self._send_back))
        self.server.register_processor(RequestCode.SEND_BATCH_MESSAGE, self._recording(self._send_batch))

    async def _send_batch(self, _channel, cmd):
        """Recorded and acknowledged, not stored."""
        header = SendMessageRequestHeader.from_v2(cmd.ext_fields)
        return cmd.response(ResponseCode.SUCCESS, ext_fields={
            "msgId": "7F0000010000000000000000000000AA", "queueId": str(header.queue_id), "queueOffset": "0"})

    async def _send_back(self, _channel, cmd):
        return cmd.response(self.send_back_code, None if self.send_back_code == 0 else "scripted failure")

    async def _route(self, _channel, cmd):
        topic = cmd.ext_fields.get("topic", "")
        if topic in self.missing_topics:
            return cmd.response(ResponseCode.TOPIC_NOT_EXIST, f"No topic route info in name server for the topic: {topic}")
        brokers = ",".join(f'{{"brokerAddrs":{{0:"{self.addr}"}},"brokerName":"{b}","cluster":"C"}}'
                           for b in self.brokers)
        n = 8 if topic == "TBW102" else QUEUES
        queues = ",".join(f'{{"brokerName":"{b}","perm":{7 if topic == "TBW102" else 6},"readQueueNums":{n},'
                          f'"topicSysFlag":0,"writeQueueNums":{n}}}' for b in self.brokers)
        body = f'{{"brokerDatas":[{brokers}],"filterServerTable":{{}},"queueDatas":[{queues}]}}'
        return cmd.response(ResponseCode.SUCCESS, body=body.encode())

    async def _send(self, channel, cmd):
        header = SendMessageRequestHeader.from_v2(cmd.ext_fields)
        code = self.fail_send.get(header.bname or "")
        if code is not None:
            return cmd.response(code, f"scripted failure {code}")
        self.missing_topics.discard(header.topic)  # the broker auto-created it
        return await super()._send(channel, cmd)
