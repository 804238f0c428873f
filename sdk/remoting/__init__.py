"""Remoting layer shared by the SDK and the reference broker: commands, frames, client, server.

See ``docs/architecture.md`` (``rocketmq_sdk.remoting``) and docs/protocol.md §1.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:  # imported when first used (PEP 562, rocketmq_sdk._lazy)
    from .channel import Channel, Handler, Processor
    from .client import RemotingClient
    from .command import FLAG_ONEWAY, FLAG_RESPONSE, RemotingCommand
    from .frame import FrameDecoder
    from .hooks import HookChain, RPCHook
    from .loop import EventLoopThread
    from .server import RemotingServer

__all__ = [
    "FLAG_ONEWAY",
    "FLAG_RESPONSE",
    "Channel",
    "EventLoopThread",
    "FrameDecoder",
    "Handler",
    "HookChain",
    "Processor",
    "RPCHook",
    "RemotingClient",
    "RemotingCommand",
    "RemotingServer",
]

if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(__name__)
