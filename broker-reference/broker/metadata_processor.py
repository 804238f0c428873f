"""What a slave's SlaveSynchronize asks its master for, answered on every broker:
GET_ALL_CONSUMER_OFFSET (43) and GET_ALL_DELAY_OFFSET (45), as Java's AdminBrokerProcessor
(docs/protocol.md §8.9)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocketmq_sdk.protocol import fastjson
from rocketmq_sdk.protocol.codes import RequestCode, ResponseCode
from rocketmq_sdk.remoting import Channel, RemotingCommand

from .requests import ACL_NONE, handles

if TYPE_CHECKING:
    from .context import BrokerContext

__all__ = ["MetadataProcessor"]


class MetadataProcessor:
    """GET_ALL_CONSUMER_OFFSET (43) and GET_ALL_DELAY_OFFSET (45), as Java's AdminBrokerProcessor."""

    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker

    @handles(RequestCode.GET_ALL_CONSUMER_OFFSET, header=None, writes=False, acl=ACL_NONE)
    def all_consumer_offsets(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        offsets = self.broker.offsets
        snapshot = {k: dict(v) for k, v in list(offsets.table.items())}
        # fastjson's form with bare integer queue ids, as the 4.9.8 master sends it
        return cmd.response(ResponseCode.SUCCESS, body=fastjson.dumps({"offsetTable": snapshot}, standard=False).encode())

    @handles(RequestCode.GET_ALL_DELAY_OFFSET, header=None, writes=False, acl=ACL_NONE)
    def all_delay_offsets(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        offsets = dict(self.broker.schedule.offsets)
        return cmd.response(ResponseCode.SUCCESS, body=fastjson.dumps({"offsetTable": offsets}, standard=False).encode())
