"""The RPCs of ``apache.rocketmq.v2.MessagingService``: path, request and response class, and
whether the request / the response is a stream. Shared by the SDK's client and the reference
broker's proxy (which registers a generic handler per entry)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import v2

SERVICE = "apache.rocketmq.v2.MessagingService"


@dataclass(frozen=True, slots=True)
class Rpc:
    """One RPC of the service."""

    name: str
    request: Any
    response: Any
    request_stream: bool = False
    response_stream: bool = False

    @property
    def path(self) -> str:
        """``/apache.rocketmq.v2.MessagingService/<name>``, the HTTP/2 path of the call."""
        return f"/{SERVICE}/{self.name}"


RPCS: dict[str, Rpc] = {r.name: r for r in (
    Rpc("QueryRoute", v2.QueryRouteRequest, v2.QueryRouteResponse),
    Rpc("Heartbeat", v2.HeartbeatRequest, v2.HeartbeatResponse),
    Rpc("SendMessage", v2.SendMessageRequest, v2.SendMessageResponse),
    Rpc("QueryAssignment", v2.QueryAssignmentRequest, v2.QueryAssignmentResponse),
    Rpc("ReceiveMessage", v2.ReceiveMessageRequest, v2.ReceiveMessageResponse, response_stream=True),
    Rpc("AckMessage", v2.AckMessageRequest, v2.AckMessageResponse),
    Rpc("ForwardMessageToDeadLetterQueue", v2.ForwardMessageToDeadLetterQueueRequest,
        v2.ForwardMessageToDeadLetterQueueResponse),
    Rpc("PullMessage", v2.PullMessageRequest, v2.PullMessageResponse, response_stream=True),
    Rpc("UpdateOffset", v2.UpdateOffsetRequest, v2.UpdateOffsetResponse),
    Rpc("GetOffset", v2.GetOffsetRequest, v2.GetOffsetResponse),
    Rpc("QueryOffset", v2.QueryOffsetRequest, v2.QueryOffsetResponse),
    Rpc("EndTransaction", v2.EndTransactionRequest, v2.EndTransactionResponse),
    Rpc("Telemetry", v2.TelemetryCommand, v2.TelemetryCommand, request_stream=True, response_stream=True),
    Rpc("NotifyClientTermination", v2.NotifyClientTerminationRequest, v2.NotifyClientTerminationResponse),
    Rpc("ChangeInvisibleDuration", v2.ChangeInvisibleDurationRequest, v2.ChangeInvisibleDurationResponse),
    Rpc("RecallMessage", v2.RecallMessageRequest, v2.RecallMessageResponse),
)}

#: gRPC metadata keys of the 5.x clients
CLIENT_ID = "x-mq-client-id"
NAMESPACE = "x-mq-namespace"
LANGUAGE = "x-mq-language"
PROTOCOL = "x-mq-protocol"
CLIENT_VERSION = "x-mq-client-version"
DATE_TIME = "x-mq-date-time"
REQUEST_ID = "x-mq-request-id"
AUTHORIZATION = "authorization"
