"""Remoting layer shared by the SDK and the reference broker: commands, frames, client, server.

See ``docs/architecture.md`` (``rocketmq_sdk.remoting``) and docs/protocol.md §1.
"""

from .channel import Channel, Handler, Processor
from .client import RemotingClient, RPCHook
from .command import FLAG_ONEWAY, FLAG_RESPONSE, RemotingCommand
from .frame import FrameDecoder
from .loop import EventLoopThread
from .server import RemotingServer

__all__ = [
    "FLAG_ONEWAY",
    "FLAG_RESPONSE",
    "Channel",
    "EventLoopThread",
    "FrameDecoder",
    "Handler",
    "Processor",
    "RPCHook",
    "RemotingClient",
    "RemotingCommand",
    "RemotingServer",
]
