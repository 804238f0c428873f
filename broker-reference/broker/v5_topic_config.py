"""GET_TOPIC_CONFIG (351), a 5.x request (mqadmin 5.x ``consumerProgress`` asks it for each topic,
../shared/docs/rocketmq5-remoting.md §8.1): one topic's config as 5.3.3 writes it (``attributes``
included; static-topic mappings are not kept here, so none is returned)."""

from __future__ import annotations

from typing import Any

from rocketmq_sdk.protocol import fastjson
from rocketmq_sdk.protocol.codes import RequestCode, ResponseCode
from rocketmq_sdk.remoting import Channel, RemotingCommand

from .requests import ACL_NONE, handles


class TopicConfigProcessor:
    """Answers GET_TOPIC_CONFIG from ``topics`` (the broker's topic manager, ``get(name)``)."""

    def __init__(self, topics: Any) -> None:
        self.topics = topics

    @handles(RequestCode.GET_TOPIC_CONFIG, header=None, writes=False, acl=ACL_NONE, v5_only=True)
    def get(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        topic = (cmd.ext_fields or {}).get("topic") or ""
        tc = self.topics.get(topic)
        if tc is None:
            return cmd.response(ResponseCode.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {topic}")
        return cmd.response(ResponseCode.SUCCESS, body=fastjson.dumps({"attributes": {}, **tc.to_dict()}).encode())
