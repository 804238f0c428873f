"""Remoting layer: commands, frames, and the asyncio client and server (shared with the broker)."""

from .channel import Channel
from .client import RemotingClient
from .command import FLAG_ONEWAY, FLAG_RESPONSE, RemotingCommand
from .frame import FrameDecoder
from .loop import EventLoopThread
from .server import RemotingServer

__all__ = ["FLAG_ONEWAY", "FLAG_RESPONSE", "Channel", "EventLoopThread", "FrameDecoder", "RemotingClient",
           "RemotingCommand", "RemotingServer"]
