"""5.x status codes of the proxy's answers (``apache.rocketmq.v2.Code``) and the error carrying one."""

from __future__ import annotations

from typing import Any

from rocketmq_sdk.grpc import v2
from rocketmq_sdk.protocol.codes import ResponseCode


class ProxyError(Exception):
    """A request the proxy answers with a non-OK ``Status`` (``code`` a ``v2.Code`` value)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def status(code: int = v2.OK, message: str = "OK") -> Any:
    """A ``v2.Status``."""
    return v2.Status(code=code, message=message)


#: remoting response codes of the broker / name server -> 5.x codes (Apache proxy's mapping)
_FROM_REMOTING = {
    ResponseCode.SUCCESS: v2.OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: v2.MASTER_PERSISTENCE_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: v2.SLAVE_PERSISTENCE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: v2.HA_NOT_AVAILABLE,
    ResponseCode.TOPIC_NOT_EXIST: v2.TOPIC_NOT_FOUND,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: v2.CONSUMER_GROUP_NOT_FOUND,
    ResponseCode.NO_PERMISSION: v2.FORBIDDEN,
    ResponseCode.MESSAGE_ILLEGAL: v2.BAD_REQUEST,
    ResponseCode.SERVICE_NOT_AVAILABLE: v2.INTERNAL_SERVER_ERROR,
    ResponseCode.SYSTEM_BUSY: v2.TOO_MANY_REQUESTS,
    ResponseCode.SYSTEM_ERROR: v2.INTERNAL_SERVER_ERROR,
    ResponseCode.REQUEST_CODE_NOT_SUPPORTED: v2.UNSUPPORTED,  # e.g. POP on a 4.x broker
}


def from_remoting(code: int) -> int:
    """The 5.x code for a remoting response code (INTERNAL_SERVER_ERROR for the others)."""
    return _FROM_REMOTING.get(code, v2.INTERNAL_SERVER_ERROR)
