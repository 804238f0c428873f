"""One description per broker request code: :class:`RequestSpec`, filled by the :func:`handles`
decorator on each processor's handler and read by the name guard (:mod:`rocketmq_broker.request_guard`),
the ACL check (:mod:`.acl`) and a slave's refusal of writes (:mod:`.replication`).

Adding a request code (docs/architecture.md, "Adding a request code")::

    class MyProcessor:
        def __init__(self, ctx: BrokerContext) -> None: ...

        @handles(RequestCode.MY_CODE, header=MyRequestHeader, writes=True,
                 acl=Acl(TopicRes("topic", PUB)), on_slave=SlaveRule.refuse(ResponseCode.SYSTEM_ERROR, "..."))
        def my_handler(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand: ...

then list the processor class in :data:`.request_table.PROCESSOR_CLASSES` (new processors only) and
let the controller call ``register_requests(server, MyProcessor(ctx))``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from rocketmq_sdk.protocol.codes import ResponseCode
from rocketmq_sdk.protocol.headers import V2Field

from .acl_config import PUB, SUB

__all__ = ["ACL_ADMIN", "ACL_NONE", "PUB", "SUB", "TOPIC_FIELDS", "GROUP_FIELDS", "V2_TOPIC_FIELDS", "V2_GROUP_FIELDS",
           "SLAVE_ADMIN_REMARK", "SLAVE_REFUSES_ADMIN", "SLAVE_REFUSES_SEND", "SLAVE_SEND_REMARK",
           "Acl", "Body", "GroupRes", "HeartbeatRes", "RequestSpec", "SendRes", "SlaveRule", "TopicRes", "handles",
           "register_requests", "specs_of", "table_of"]

F = TypeVar("F", bound=Callable[..., Any])

#: header fields (Java names) holding a topic / a group: what the name guard checks by default
TOPIC_FIELDS = ("topic", "defaultTopic", "originTopic")
GROUP_FIELDS = ("group", "consumerGroup", "producerGroup", "groupName", "srcGroup", "destGroup", "compareGroup")
#: SendMessageRequestHeaderV2's one-letter fields holding a topic / a group
V2_TOPIC_FIELDS = (V2Field.TOPIC, V2Field.DEFAULT_TOPIC)
V2_GROUP_FIELDS = (V2Field.PRODUCER_GROUP,)


class Body(enum.Enum):
    """Which JSON body of a request names topics and groups (checked by the name guard)."""

    HEARTBEAT = "heartbeat"  # producerDataSet[].groupName, consumerDataSet[].groupName / subscriptionDataSet[].topic
    LOCK_BATCH = "lock_batch"  # consumerGroup, mqSet[].topic
    SUBSCRIPTION_GROUP = "subscription_group"  # groupName


# -- ACL resources (Java PlainAccessValidator.parse) ------------------------------------------------
@dataclass(frozen=True, slots=True)
class TopicRes:
    """The topic in header field ``field`` needs ``perm`` (PUB or SUB)."""

    field: str
    perm: int


@dataclass(frozen=True, slots=True)
class GroupRes:
    """The group in header field ``field`` needs SUB (checked as ``%RETRY%<group>``)."""

    field: str


@dataclass(frozen=True, slots=True)
class SendRes:
    """A send: PUB on the topic in ``topic_field``, or SUB on the group in ``group_field`` when the
    topic is a ``%RETRY%`` topic."""

    topic_field: str
    group_field: str


@dataclass(frozen=True, slots=True)
class HeartbeatRes:
    """A heartbeat body: SUB on each consumer group and on each topic it subscribes."""


AclResource = TopicRes | GroupRes | SendRes | HeartbeatRes


@dataclass(frozen=True, slots=True)
class Acl:
    """What the ACL check asks of a request: ``admin`` (the account needs ``admin: true``) and the
    resources it names, in the order Java parses them (the first one missing is reported)."""

    resources: tuple[AclResource, ...] = ()
    admin: bool = False

    def __init__(self, *resources: AclResource, admin: bool = False) -> None:
        object.__setattr__(self, "resources", tuple(resources))
        object.__setattr__(self, "admin", admin)


ACL_NONE = Acl()
"""No resource: a signed request of a known account passes."""
ACL_ADMIN = Acl(admin=True)
"""Admin-only, no resource."""


# -- slave / DLedger follower -----------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class SlaveRule:
    """What a SLAVE (or a DLedger follower) does with the request: serve it, answer
    ``refusal = (code, remark)`` instead, or not register it at all (``absent``: the code is
    answered REQUEST_CODE_NOT_SUPPORTED)."""

    refusal: tuple[int, str] | None = None
    absent: bool = False

    @staticmethod
    def refuse(code: int, remark: str) -> SlaveRule:
        return SlaveRule(refusal=(int(code), remark))


SlaveRule.SERVE = SlaveRule()  # type: ignore[attr-defined]
SlaveRule.ABSENT = SlaveRule(absent=True)  # type: ignore[attr-defined]

#: Java ``DefaultMessageStore`` remark of a put refused by a slave (code 14)
SLAVE_SEND_REMARK = ("service not available now. It may be caused by one of the following reasons: the broker's "
                     "disk is full, messages are put to the slave, message store has been shut down, etc.")
SLAVE_ADMIN_REMARK = "Can't modify topic or subscription group from slave broker, please execute it from master broker."
#: a 4.9.8 slave's answer to a send: SERVICE_NOT_AVAILABLE (14)
SLAVE_REFUSES_SEND = SlaveRule.refuse(ResponseCode.SERVICE_NOT_AVAILABLE, SLAVE_SEND_REMARK)
#: a 4.9.8 slave's answer to a topic or subscription-group change: SYSTEM_ERROR (1)
SLAVE_REFUSES_ADMIN = SlaveRule.refuse(ResponseCode.SYSTEM_ERROR, SLAVE_ADMIN_REMARK)


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """Everything the broker knows about one request code besides its handler's logic.

    Attributes:
        code: the request code.
        handler: ``Class.method`` serving it.
        header: the request header class the handler reads (None: no header, or the body only).
        writes: the request changes what the broker stores (messages, topics, groups, offsets,
            settings, the ACL file).
        acl: the ACL resources and admin flag (:class:`Acl`).
        topic_fields / group_fields: the header fields naming a topic / a group (the name guard
            checks each, before the handler runs).
        body: the JSON body naming topics/groups, if any (:class:`Body`).
        on_slave: what a slave does with it (:class:`SlaveRule`).
        v5_only: registered only on a broker configured as 5.x.
    """

    code: int
    handler: str
    header: type | None
    writes: bool
    acl: Acl
    on_slave: SlaveRule
    topic_fields: tuple[str, ...] = TOPIC_FIELDS
    group_fields: tuple[str, ...] = GROUP_FIELDS
    body: Body | None = None
    v5_only: bool = False
    method: str = field(default="", compare=False)


_ATTR = "__broker_requests__"


def handles(code: int, *, header: type | None, writes: bool, acl: Acl, on_slave: SlaveRule | None = None,
            topic_fields: tuple[str, ...] = TOPIC_FIELDS, group_fields: tuple[str, ...] = GROUP_FIELDS,
            body: Body | None = None, v5_only: bool = False) -> Callable[[F], F]:
    """Declare that the decorated processor method serves ``code`` (stack it for several codes).

    ``on_slave`` defaults to serving the request; a request that ``writes`` must say explicitly
    what a slave does with it.

    Raises:
        TypeError: ``writes=True`` without ``on_slave``.
    """
    if writes and on_slave is None:
        raise TypeError(f"request code {int(code)} writes: declare on_slave (SlaveRule.SERVE, .refuse(...) or .ABSENT)")

    def mark(fn: F) -> F:
        specs = list(getattr(fn, _ATTR, ()))
        specs.append(RequestSpec(int(code), fn.__qualname__, header, writes, acl,
                                 on_slave if on_slave is not None else SlaveRule.SERVE,  # type: ignore[attr-defined]
                                 tuple(topic_fields), tuple(group_fields), body, v5_only, fn.__name__))
        setattr(fn, _ATTR, tuple(specs))
        return fn
    return mark


def specs_of(cls: type) -> Iterator[RequestSpec]:
    """Every :class:`RequestSpec` declared on the methods of ``cls``."""
    seen: set[str] = set()
    for klass in cls.__mro__:
        for name, member in vars(klass).items():
            if name in seen:
                continue
            seen.add(name)
            fn = member.__func__ if isinstance(member, staticmethod | classmethod) else member
            yield from getattr(fn, _ATTR, ())


def table_of(classes: tuple[type, ...]) -> Mapping[int, RequestSpec]:
    """code -> spec over ``classes``.

    Raises:
        ValueError: two handlers declare the same code.
    """
    table: dict[int, RequestSpec] = {}
    for cls in classes:
        for spec in specs_of(cls):
            if spec.code in table:
                raise ValueError(f"request code {spec.code} declared by {table[spec.code].handler} and {spec.handler}")
            table[spec.code] = spec
    return table


def register_requests(server: Any, processor: object, *, v5: bool = False, slave: bool = False,
                      only: frozenset[int] | None = None) -> list[int]:
    """Register every handler of ``processor`` declared with :func:`handles` on ``server``
    (``server.register_processor(code, bound method)``); returns the codes registered.

    Args:
        v5: the broker is configured as 5.x (``v5_only`` codes are registered only then).
        slave: the broker is a slave (``SlaveRule.ABSENT`` codes are left out).
        only: register only these codes (e.g. the VIP port's GET_ALL_TOPIC_CONFIG).
    """
    done = []
    for spec in specs_of(type(processor)):
        if (spec.v5_only and not v5) or (slave and spec.on_slave.absent) or (only is not None and spec.code not in only):
            continue
        server.register_processor(spec.code, getattr(processor, spec.method))
        done.append(spec.code)
    return done

