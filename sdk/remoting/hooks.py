"""RPC hooks and the one chain every client transport runs them through.

An RPC hook (Java ``RPCHook``; ACL signing is one, ``rocketmq_sdk.protocol.acl.AclClientRPCHook``)
sees each request just before it is encoded and each answer as it arrives. A client instance
holds one :class:`HookChain` and hands the same object to every transport: the asyncio client
(``RemotingClient.invoke`` / ``invoke_oneway``), the caller-thread sockets of sync sends
(``client.blocking.BlockingConnections``) and the producer's callback and oneway writes
(``producer.async_send``). A hook added to (or removed from) the chain of a running client is
therefore seen by every path at its next request. Modelled on rocketmq-client-go's
``primitive.Interceptor`` chain, in the two phases Java's ``RPCHook`` has (a request written by
one thread may be answered on another, so there is no single call to wrap).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .command import RemotingCommand

__all__ = ["HookChain", "RPCHook"]


class RPCHook(Protocol):
    """Called around every request the client sends (Java ``RPCHook``), e.g. ACL signing."""

    def before_request(self, addr: str, cmd: RemotingCommand) -> None: ...

    def after_response(self, addr: str, cmd: RemotingCommand, resp: RemotingCommand) -> None: ...


class HookChain(list["RPCHook"]):
    """The RPC hooks of one client, in order: a list (edit it like one; empty is false, which the
    transports test to skip the hooks at no cost), whose :meth:`before_request` and
    :meth:`after_response` run every hook in turn."""

    __slots__ = ()

    def before_request(self, addr: str, cmd: RemotingCommand) -> None:
        """Run each hook's ``before_request`` on ``cmd`` about to go to ``addr`` (a hook may
        change its header: encode ``cmd`` after this). A hook's exception propagates: the
        request is not sent."""
        for hook in self:
            hook.before_request(addr, cmd)

    def after_response(self, addr: str, cmd: RemotingCommand, resp: RemotingCommand) -> None:
        """Run each hook's ``after_response`` with the answer ``resp`` from ``addr`` to ``cmd``."""
        for hook in self:
            hook.after_response(addr, cmd, resp)

    @classmethod
    def of(cls, hooks: Iterable[RPCHook] | None) -> HookChain:
        """``hooks`` itself when it is a chain already (shared, not copied), else a new chain."""
        return hooks if isinstance(hooks, HookChain) else cls(hooks or ())
