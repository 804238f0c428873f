"""Remoting layer: commands, frames, and the asyncio client and server (shared with the broker)."""

from .channel import Channel
from .client import RemotingClient
from .command import RPC_ONEWAY, RPC_RESPONSE, RemotingCommand
from .frame import FrameDecoder
from .loop import EventLoopThread
from .server import RemotingServer

__all__ = ["Channel", "EventLoopThread", "FrameDecoder", "RPC_ONEWAY", "RPC_RESPONSE", "RemotingClient",
           "RemotingCommand", "RemotingServer"]
