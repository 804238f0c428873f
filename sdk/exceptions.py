"""Every error the SDK raises, in one tree.

::

    MQError                          base of everything below
    ├── MQClientError                bad input or client state (illegal topic, oversized message,
    │   │                            client not started, used across fork()) — fix the call
    │   ├── IllegalArgumentError     a value that RocketMQ would refuse (topic/group name, size)
    │   └── ClientStateError         start()/shutdown() order, use after fork
    ├── MQBrokerError                the broker (or name server) answered with a non-success
    │   │                            response code; ``.code`` and ``.remark`` hold the answer
    │   ├── TopicNotExistError       response code 17 TOPIC_NOT_EXIST (route lookup)
    │   ├── RequestCodeNotSupportedError  3: the server does not know the request (e.g. POP on 4.x)
    │   ├── SubscriptionGroupNotExistError  26 (5.x: offset commits of unknown groups)
    │   ├── InvalidParameterError    29 INVALID_PARAMETER (5.x)
    │   ├── MessageIllegalError      13 MESSAGE_ILLEGAL (size, properties, timer delay)
    │   └── IllegalOperationError    604 ILLEGAL_OPERATION (5.x, e.g. a bad recall handle)
    ├── RequestTimeoutError          request-reply: the request was sent but no reply came back
    │                                in time (also a builtin ``TimeoutError``)
    └── RemotingError                the network layer failed
        ├── RemotingConnectError     could not connect to ``addr``
        ├── RemotingTimeoutError     no response within the timeout (ms)
        ├── RemotingSendRequestError the request could not be written (connection closed)
        ├── RemotingTooMuchRequestError  too many requests in flight
        └── FrameError               a malformed or oversized frame was received

The class names follow the Java client's (``MQClientException``, ``MQBrokerException``,
``RemotingTimeoutException``...) so RocketMQ users recognise them.
"""

from __future__ import annotations


class MQError(Exception):
    """Base class of every exception raised by rocketmq_sdk."""


class MQClientError(MQError):
    """A client-side problem: invalid arguments or a client in the wrong state."""


class IllegalArgumentError(MQClientError, ValueError):
    """A value RocketMQ would refuse: illegal topic or group name, empty or oversized body."""


class ClientStateError(MQClientError):
    """The client is not started, already shut down, or was created before ``fork()``."""


class MQBrokerError(MQError):
    """The broker or name server answered with a non-success response code.

    Attributes:
        code: the RocketMQ response code (see ``rocketmq_sdk.protocol.codes.ResponseCode``).
        remark: the remark text of the response (may be empty).
        addr: ``host:port`` of the server that answered, when known.
    """

    def __init__(self, code: int, remark: str | None = None, addr: str | None = None) -> None:
        self.code = int(code)
        self.remark = remark or ""
        self.addr = addr
        where = f" from {addr}" if addr else ""
        super().__init__(f"broker response code {self.code}{where}: {self.remark}")


class TopicNotExistError(MQBrokerError):
    """No route for the topic (response code 17 TOPIC_NOT_EXIST)."""


class RequestCodeNotSupportedError(MQBrokerError):
    """Response code 3: the server does not serve this request (e.g. POP_MESSAGE on a 4.x broker)."""


class SubscriptionGroupNotExistError(MQBrokerError):
    """Response code 26 SUBSCRIPTION_GROUP_NOT_EXIST (5.x also answers it to offset commits)."""


class InvalidParameterError(MQBrokerError):
    """Response code 29 INVALID_PARAMETER (RocketMQ 5.x)."""


class MessageIllegalError(MQBrokerError):
    """Response code 13 MESSAGE_ILLEGAL (message too large, bad properties, timer delay too long)."""


class IllegalOperationError(MQBrokerError):
    """Response code 604 ILLEGAL_OPERATION (RocketMQ 5.x, e.g. a recall handle of another topic)."""


_BY_CODE: dict[int, type[MQBrokerError]] = {3: RequestCodeNotSupportedError, 13: MessageIllegalError,
                                            26: SubscriptionGroupNotExistError, 29: InvalidParameterError,
                                            604: IllegalOperationError}


def broker_error(code: int, remark: str | None = None, addr: str | None = None) -> MQBrokerError:
    """The :class:`MQBrokerError` (subclass where one exists for ``code``) for a refused request."""
    return _BY_CODE.get(int(code), MQBrokerError)(code, remark, addr)


def topic_missing_remark(topic: str, namesrv_addrs: list[str] | None = None) -> str:
    """What a user whose topic does not exist should do next (the remark of a
    :class:`TopicNotExistError` raised by a send): create the topic, or let the brokers create it."""
    where = f" on the name server(s) {';'.join(namesrv_addrs)}" if namesrv_addrs else ""
    return (f"topic {topic} does not exist{where}, and the brokers do not create topics on first use "
            f"(autoCreateTopicEnable=false): create it with `rocketmq-admin updateTopic -t {topic} -c CLUSTER` "
            f"(CLUSTER is the brokers' cluster name, DefaultCluster unless configured), or set "
            f"autoCreateTopicEnable=true in broker.conf")


class RequestTimeoutError(MQError, TimeoutError):
    """No reply arrived within the timeout of ``Producer.request`` (Java ``RequestTimeoutException``,
    ``ClientErrorCode.REQUEST_TIMEOUT_EXCEPTION``).

    Attributes:
        topic: the request's topic.
        timeout_ms: the request timeout, ms.
        correlation_id: the request's ``CORRELATION_ID`` property.
        sent: True when the broker had accepted the request message (the replier was slow or
            absent); False when the send itself had not finished.
    """

    def __init__(self, topic: str, timeout_ms: float, correlation_id: str = "", sent: bool = True) -> None:
        self.topic = topic
        self.timeout_ms = timeout_ms
        self.correlation_id = correlation_id
        self.sent = sent
        what = "OK, but wait reply message timeout" if sent else "not finished within the timeout"
        super().__init__(f"send request message to <{topic}> {what}, {timeout_ms:.0f} ms "
                         f"(correlation id {correlation_id})")


class RemotingError(MQError):
    """A failure in the remoting (network) layer."""


class RemotingConnectError(RemotingError):
    """Could not open a TCP connection to the given address."""

    def __init__(self, addr: str, reason: str = "", *, role: str = "") -> None:
        self.addr = addr
        self.reason = reason
        where = f"{role} {addr}" if role else addr
        super().__init__(f"cannot connect to {where}" + (f": {reason}" if reason else ""))


class RemotingTimeoutError(RemotingError):
    """No response arrived within the timeout.

    Attributes:
        addr: the server (or component) that did not answer.
        timeout_ms: the timeout, ms.
        operation: what timed out, for people ("get route of topic X from name server A"),
            when the caller knows it; else None.
    """

    def __init__(self, addr: str, timeout_ms: float, what: str = "request", *,
                 operation: str | None = None) -> None:
        self.addr = addr
        self.timeout_ms = timeout_ms
        self.operation = operation
        if operation:
            super().__init__(f"{operation}: no answer within {timeout_ms:.0f} ms ({what})")
        else:
            super().__init__(f"{what} to {addr} timed out after {timeout_ms:.0f} ms")


class RemotingSendRequestError(RemotingError):
    """The request could not be written because the connection is closed or broken."""


class RemotingTooMuchRequestError(RemotingError):
    """Too many requests are in flight (a semaphore limit was reached)."""


class FrameError(RemotingError):
    """A malformed or oversized remoting frame."""
