"""``apache.rocketmq.v2.MessagingService`` of the reference broker: each RPC of
``rocketmq_sdk.grpc.service.RPCS`` served on the proxy's loop (grpc.aio generic handlers taking
and giving bytes, so a request that does not parse gets INVALID_ARGUMENT, not an internal error).

Answers follow Apache RocketMQ's proxy: a refused request gets a response whose ``status``
holds the 5.x code (ILLEGAL_TOPIC, TOPIC_NOT_FOUND, ...); only requests that cannot be read at
all, or that lack ``x-mq-client-id`` where a client identity is needed, end with a gRPC error
status.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from google.protobuf.message import DecodeError
from rocketmq_sdk.grpc import v2
from rocketmq_sdk.grpc.service import CLIENT_ID, RPCS, SERVICE

from .auth import ProxyAcl, resources_of, settings_resources
from .checks import group_name, topic_name
from .consuming import Consuming, GroupSettings, consumer_retry_policy
from .h2_calls import BIDI_STREAMING, SERVER_STREAMING, UNARY, Method
from .h2_stream import CallError
from .offsets import Offsets
from .producing import Producing
from .recall import Recall
from .routes import RouteCache
from .sessions import Session, Sessions
from .status import ProxyError, status

log = logging.getLogger("rocketmq_broker.proxy")

#: what the proxy tells a client in its Settings answer
SEND_MAX_ATTEMPTS = 3
REQUEST_TIMEOUT_S = 3
MAX_CLIENT_ID = 256


def _parse(rpc_name: str, raw: bytes) -> Any:
    try:
        return RPCS[rpc_name].request.FromString(raw)
    except DecodeError as exc:
        raise _BadRequest(f"{rpc_name}: the request is not a {RPCS[rpc_name].request.DESCRIPTOR.name}: {exc}") \
            from None


def _not_served(name: str) -> Any:
    """The answer to an RPC this proxy does not serve: NOT_IMPLEMENTED."""
    return RPCS[name].response(status=status(v2.NOT_IMPLEMENTED, f"{name} is not served by this broker"))


class _BadRequest(Exception):
    """A request that cannot be read: ends the call with gRPC INVALID_ARGUMENT."""


def client_id_of(context: grpc.aio.ServicerContext) -> str | None:
    """The ``x-mq-client-id`` of a call, None when absent or unusable (blank, > 256 chars)."""
    for key, value in context.invocation_metadata() or ():
        if key == CLIENT_ID and isinstance(value, str) and value.strip() and len(value) <= MAX_CLIENT_ID:
            return value
    return None


class MessagingService:
    """The RPC handlers.

    Args:
        routes: route cache (name-server lookups).
        producing: SendMessage / EndTransaction / transaction checks.
        consuming: ReceiveMessage / AckMessage / ChangeInvisibleDuration / DLQ / QueryAssignment.
        offsets: PullMessage / UpdateOffset / GetOffset / QueryOffset (None: NOT_IMPLEMENTED).
        recall: RecallMessage (None: NOT_IMPLEMENTED).
        sessions: the known clients.
        endpoints: the proxy's own ``v2.Endpoints`` (given in routes when a request names none).
    """

    def __init__(self, routes: RouteCache, producing: Producing, consuming: Consuming, sessions: Sessions,
                 endpoints: Any, offsets: Offsets | None = None, recall: Recall | None = None) -> None:
        self.routes = routes
        self.producing = producing
        self.consuming = consuming
        self.offsets = offsets
        self.recall = recall
        self.sessions = sessions
        self.endpoints = endpoints
        self.extra: dict[str, Callable[[Any, Any], Awaitable[Any]]] = {}
        #: the ACL check of every request (None: no ACL), ``proxy/auth.py``
        self.acl: ProxyAcl | None = None
        self._methods = self._method_table()

    # -- registration -----------------------------------------------------------------------
    def methods(self) -> dict[str, Method]:
        """Every RPC by ``:path`` as the proxy's own HTTP/2 server serves it (``h2_server.py``)."""
        out = {}
        for name, rpc in RPCS.items():
            if name == "Telemetry":
                out[f"/{SERVICE}/{name}"] = Method(BIDI_STREAMING, self.telemetry)
            elif rpc.response_stream:
                out[f"/{SERVICE}/{name}"] = Method(SERVER_STREAMING, self._unary_stream(name))
            else:
                out[f"/{SERVICE}/{name}"] = Method(UNARY, self._unary(name))
        return out

    def handler(self) -> grpc.GenericRpcHandler:
        """The generic handler serving every RPC on grpc.aio's server (unimplemented ones answer
        NOT_IMPLEMENTED)."""
        wrap = {UNARY: grpc.unary_unary_rpc_method_handler, SERVER_STREAMING: grpc.unary_stream_rpc_method_handler,
                BIDI_STREAMING: grpc.stream_stream_rpc_method_handler}
        handlers = {path.rpartition("/")[2]: wrap[m.kind](m.handler) for path, m in self.methods().items()}
        return grpc.method_handlers_generic_handler(SERVICE, handlers)

    def _method(self, name: str) -> Callable[[Any, Any], Awaitable[Any]] | None:
        return self.extra.get(name) or self._methods.get(name)

    def _method_table(self) -> dict[str, Callable[[Any, Any], Awaitable[Any]]]:
        """The handler of each served RPC (built once: every request looks its own up)."""
        table: dict[str, Callable[[Any, Any], Awaitable[Any]]] = {
            "QueryRoute": self.query_route, "Heartbeat": self.heartbeat,
            "SendMessage": self.producing.send,  # directly: no wrapper coroutine per send
            "EndTransaction": self.end_transaction, "NotifyClientTermination": self.notify_client_termination,
            "ReceiveMessage": self.consuming.receive, "AckMessage": self.consuming.ack,
            "ChangeInvisibleDuration": self.consuming.change_invisible_duration,
            "ForwardMessageToDeadLetterQueue": self.consuming.forward_to_dlq,
            "QueryAssignment": self.query_assignment,
        }
        if self.recall is not None:
            table["RecallMessage"] = self.recall.recall
        offsets = self.offsets
        if offsets is not None:
            table.update({"PullMessage": offsets.pull, "UpdateOffset": offsets.update_offset,  # type: ignore[dict-item]
                          "GetOffset": offsets.get_offset, "QueryOffset": offsets.query_offset})
        return table

    async def _prepare(self, name: str, raw: bytes, context: Any) -> tuple[Any, Any]:
        """The parsed request and its handler (None: not served); an unreadable request ends the
        call with INVALID_ARGUMENT."""
        try:
            req = _parse(name, raw)
        except _BadRequest as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        return req, self._method(name)

    def _unary(self, name: str) -> Callable[[bytes, Any], Awaitable[bytes]]:
        response_class = RPCS[name].response

        async def call(raw: bytes, context: grpc.aio.ServicerContext) -> bytes:
            try:  # parsed here, not in _prepare: one coroutine less per call
                req = _parse(name, raw)
            except _BadRequest as exc:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
            method = self._method(name)
            if method is None:
                return _not_served(name).SerializeToString()
            try:
                self._authorize(name, req, context)
                resp = await method(req, context)
            except ProxyError as exc:
                resp = response_class(status=status(exc.code, exc.message))
            except Exception:  # noqa: BLE001 - answered as the 5.x proxy does: INTERNAL_SERVER_ERROR
                log.exception("%s failed", name)
                resp = response_class(status=status(v2.INTERNAL_SERVER_ERROR, f"{name} failed in the proxy"))
            return resp.SerializeToString()

        return call

    def _unary_stream(self, name: str) -> Callable[[bytes, Any], AsyncIterator[bytes]]:
        response_class = RPCS[name].response

        async def call(raw: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
            req, method = await self._prepare(name, raw, context)
            if method is None:
                yield _not_served(name).SerializeToString()
                return
            try:
                self._authorize(name, req, context)
                async for resp in method(req, context):  # type: ignore[attr-defined]
                    yield resp.SerializeToString()
            except ProxyError as exc:
                yield response_class(status=status(exc.code, exc.message)).SerializeToString()

        return call

    def _authorize(self, name: str, req: Any, context: Any) -> None:
        """The ACL check of a request (ProxyError UNAUTHORIZED / FORBIDDEN)."""
        if self.acl is not None:
            self.acl.check(context.invocation_metadata() or (), context.peer(), name, resources_of(name, req))

    # -- routes and clients -----------------------------------------------------------------
    async def query_route(self, req: Any, context: Any) -> Any:
        topic = topic_name(req.topic)
        route = await self.routes.get(topic)
        endpoints = req.endpoints if req.endpoints.addresses else self.endpoints
        resp = v2.QueryRouteResponse(status=status())
        resp.message_queues.extend(self.routes.message_queues(route, endpoints))
        for mq in resp.message_queues:  # the client's own name and namespace, not the broker's ns%name
            mq.topic.CopyFrom(req.topic)
        return resp

    def _session(self, context: Any) -> Session:
        client_id = client_id_of(context)
        if client_id is None:
            raise ProxyError(v2.CLIENT_ID_REQUIRED, f"the {CLIENT_ID} header is missing")
        return self.sessions.touch(client_id)

    async def heartbeat(self, req: Any, context: Any) -> Any:
        session = self._session(context)
        if req.HasField("group"):
            session.group = group_name(req.group)
        if req.client_type:
            session.client_type = req.client_type
        return v2.HeartbeatResponse(status=status())

    async def notify_client_termination(self, req: Any, context: Any) -> Any:
        client_id = client_id_of(context)
        if client_id is None:
            raise ProxyError(v2.CLIENT_ID_REQUIRED, f"the {CLIENT_ID} header is missing")
        self.sessions.remove(client_id)
        self.consuming.renewals.drop_client(client_id)  # its held messages come back after their invisibility
        return v2.NotifyClientTerminationResponse(status=status())

    async def query_assignment(self, req: Any, context: Any) -> Any:
        endpoints = req.endpoints if req.endpoints.addresses else self.endpoints
        return await self.consuming.query_assignment(req, context, endpoints)

    async def send_message(self, req: Any, context: Any) -> Any:
        return await self.producing.send(req)

    async def end_transaction(self, req: Any, context: Any) -> Any:
        return await self.producing.end_transaction(req)

    # -- Telemetry --------------------------------------------------------------------------
    def settings_answer(self, session: Session, settings: Any, group: GroupSettings | None = None) -> Any:
        """The proxy's Settings for a client that sent ``settings`` (retry policy, limits; for a
        consumer its ``group``'s retry policy and FIFO flag)."""
        out = v2.Settings()
        out.CopyFrom(settings)
        out.backoff_policy.max_attempts = SEND_MAX_ATTEMPTS
        eb = out.backoff_policy.exponential_backoff
        eb.initial.nanos = 10_000_000
        eb.max.seconds = 1
        eb.multiplier = 2.0
        out.request_timeout.seconds = REQUEST_TIMEOUT_S
        if settings.WhichOneof("pub_sub") == "publishing":
            out.publishing.max_body_size = self.producing.max_body
            out.publishing.validate_message_type = True
        elif settings.WhichOneof("pub_sub") == "subscription":
            group = group or GroupSettings()
            consumer_retry_policy(out.backoff_policy, group)
            sub = out.subscription
            sub.fifo = group.orderly
            if not sub.HasField("receive_batch_size"):
                sub.receive_batch_size = 32
            if not sub.HasField("long_polling_timeout"):
                sub.long_polling_timeout.seconds = 20
        out.metric.on = False
        return out

    def _apply_settings(self, session: Session, settings: Any) -> None:
        if settings.HasField("client_type"):
            session.client_type = settings.client_type
        kind = settings.WhichOneof("pub_sub")
        topics = set()
        if kind == "publishing":
            for r in settings.publishing.topics:
                with contextlib.suppress(ProxyError):
                    topics.add(topic_name(r))
        elif kind == "subscription":
            if settings.subscription.HasField("group"):
                session.group = group_name(settings.subscription.group)
            for entry in settings.subscription.subscriptions:
                with contextlib.suppress(ProxyError):
                    topics.add(topic_name(entry.topic))
        session.topics = topics
        session.settings = settings

    async def telemetry(self, requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext
                        ) -> AsyncIterator[bytes]:
        client_id = client_id_of(context)
        if client_id is None:
            yield v2.TelemetryCommand(status=status(v2.CLIENT_ID_REQUIRED, f"the {CLIENT_ID} header is missing")
                                      ).SerializeToString()
            return
        session = self.sessions.touch(client_id)
        outbox: asyncio.Queue = asyncio.Queue()
        if session.outbox is not None:
            session.outbox.put_nowait(None)  # a newer stream of the same client replaces the old one
        session.outbox = outbox

        async def read() -> None:
            try:
                async for raw in requests:
                    try:
                        cmd = v2.TelemetryCommand.FromString(raw)
                    except DecodeError:
                        await outbox.put(v2.TelemetryCommand(status=status(v2.BAD_REQUEST,
                                                                           "unreadable TelemetryCommand")))
                        continue
                    self.sessions.touch(client_id)
                    kind = cmd.WhichOneof("command")
                    if kind == "settings":
                        try:
                            if self.acl is not None:
                                self.acl.check(context.invocation_metadata() or (), context.peer(), "Telemetry",
                                               settings_resources(cmd.settings))
                            self._apply_settings(session, cmd.settings)
                        except ProxyError as exc:
                            await outbox.put(v2.TelemetryCommand(status=status(exc.code, exc.message)))
                            continue
                        answer = v2.TelemetryCommand(status=status())
                        group = await self.consuming.subscription_group(cmd.settings)
                        answer.settings.CopyFrom(self.settings_answer(session, cmd.settings, group))
                        await outbox.put(answer)
                    elif kind in ("thread_stack_trace", "verify_message_result"):
                        log.info("client %s reported %s", client_id, kind)
            except (asyncio.CancelledError, grpc.aio.AioRpcError, CallError):
                pass
            finally:
                outbox.put_nowait(None)

        reader = asyncio.get_running_loop().create_task(read())
        try:
            while True:
                cmd = await outbox.get()
                if cmd is None:
                    break
                yield cmd.SerializeToString()
        finally:
            reader.cancel()
            if session.outbox is outbox:
                session.outbox = None
