"""ACL of the proxy: the 5.x request signature checked against a ``plain_acl.yml`` (the file the
brokers enforce for remoting clients, ``rocketmq_broker.broker.acl``), as Apache RocketMQ 5's
proxy does with ACL 1.0.

Every request (and each Telemetry ``Settings``) is checked before it is served:

1. A client whose IP matches ``globalWhiteRemoteAddresses`` passes.
2. No ``authorization`` header, one not of the form ``MQv2-HMAC-SHA1 Credential=<ak>,
   SignedHeaders=x-mq-date-time, Signature=<hex>``, or an unknown access key: UNAUTHORIZED.
3. A client whose IP matches the account's ``whiteRemoteAddress`` passes.
4. ``Signature`` must be the hex HMAC-SHA1 of the ``x-mq-date-time`` header under the account's
   secret key, else UNAUTHORIZED (the date is not checked against the clock: the official
   clients send their local time marked ``Z``).
5. The resources the request names need the account's permission (``topicPerms`` /
   ``groupPerms`` and the defaults, as for remoting), else FORBIDDEN: sending and ending a
   transaction need PUB on the topic; a route query PUB or SUB; receiving, acking, offsets and
   the other consumer RPCs SUB on the topic and on the group; a producer's settings PUB on each
   topic it publishes, a consumer's SUB on its group and topics.

Refusals are answered the 5.x way, with the code in the response's ``status``.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any, NoReturn

from rocketmq_sdk.grpc import v2
from rocketmq_sdk.grpc.service import AUTHORIZATION, DATE_TIME
from rocketmq_sdk.producer.namespace import wrap_namespace
from rocketmq_sdk.remoting.log_limit import RateLimitedLog

from ..broker.acl import AccessResource, AclError, PlainAccessValidator
from ..broker.acl_config import ANY, PUB, SUB, retry_topic
from .status import ProxyError

log = logging.getLogger("rocketmq_broker.proxy")
#: refusals are logged, at most a few a second (a client retrying with a bad key must not flood)
_refusal_log = RateLimitedLog(log)

#: the only signing algorithm of the 5.x clients
ALGORITHM = "MQv2-HMAC-SHA1"
_AUTHORIZATION = re.compile(r"MQv2-HMAC-SHA1\s+Credential=([^,\s]*)\s*,\s*SignedHeaders=([^,\s]*)\s*,\s*"
                            r"Signature=([0-9A-Fa-f]*)\s*")
#: what a request's topic needs, by RPC (the others: SUB)
TOPIC_PERM = {"SendMessage": PUB, "EndTransaction": PUB, "RecallMessage": PUB, "QueryRoute": ANY}
#: RPCs that name no resource: only the signature is checked
NO_RESOURCE = frozenset({"Heartbeat", "NotifyClientTermination"})


def signature(secret_key: str, date_time: str) -> str:
    """Hex HMAC-SHA1 of ``date_time`` under ``secret_key`` (what the 5.x clients send)."""
    return hmac.new(secret_key.encode(), date_time.encode(), hashlib.sha1).hexdigest()


def parse_authorization(value: str) -> tuple[str, str]:
    """``(access key, signature)`` of an ``authorization`` header.

    Raises:
        ProxyError: UNAUTHORIZED when it is not ``MQv2-HMAC-SHA1 Credential=..., SignedHeaders=
            x-mq-date-time, Signature=...``.
    """
    match = _AUTHORIZATION.fullmatch(value.strip())
    if match is None or match.group(2).lower() != DATE_TIME:
        raise ProxyError(v2.UNAUTHORIZED, f"the authorization header is not {ALGORITHM} over {DATE_TIME}")
    return match.group(1), match.group(3).lower()


def peer_ip(peer: str) -> str:
    """The IP of a grpc peer string (``ipv4:1.2.3.4:5``, ``ipv6:[::1]:5``), '' when unknown."""
    kind, _, rest = peer.partition(":")
    if kind == "ipv4":
        return rest.rpartition(":")[0]
    if kind == "ipv6":
        return rest.rpartition(":")[0].strip("[]")
    return ""


def _resource(r: Any) -> str:
    return wrap_namespace(r.resource_namespace or None, r.name)


def _topics(req: Any) -> Iterator[Any]:
    fields = req.DESCRIPTOR.fields_by_name
    if "topic" in fields and req.HasField("topic"):
        yield req.topic
    if "message_queue" in fields and req.HasField("message_queue"):
        yield req.message_queue.topic
    if "messages" in fields:
        for m in req.messages:
            yield m.topic


def resources_of(rpc: str, req: Any) -> dict[str, int]:
    """``{topic or %RETRY%group: permission bits}`` a request of ``rpc`` needs."""
    if rpc in NO_RESOURCE:
        return {}
    need = {_resource(t): TOPIC_PERM.get(rpc, SUB) for t in _topics(req) if t.name}
    if "group" in req.DESCRIPTOR.fields_by_name and req.HasField("group") and req.group.name:
        need[retry_topic(_resource(req.group))] = SUB
    return need


def settings_resources(settings: Any) -> dict[str, int]:
    """What a Telemetry ``Settings`` asks for: PUB on published topics; SUB on a consumer's
    group and topics."""
    kind = settings.WhichOneof("pub_sub")
    if kind == "publishing":
        return {_resource(t): PUB for t in settings.publishing.topics if t.name}
    if kind == "subscription":
        sub = settings.subscription
        need = {_resource(e.topic): SUB for e in sub.subscriptions if e.topic.name}
        if sub.HasField("group") and sub.group.name:
            need[retry_topic(_resource(sub.group))] = SUB
        return need
    return {}


class ProxyAcl:
    """Checks 5.x requests against ``validator``'s ``plain_acl.yml`` (re-read when it changes).

    Args:
        validator: the ACL file's validator; a broker in the same process shares its own
            (``BrokerController.acl``).
    """

    def __init__(self, validator: PlainAccessValidator) -> None:
        self.validator = validator
        #: refusals so far by 5.x code (UNAUTHORIZED, FORBIDDEN)
        self.refused: Counter[int] = Counter()

    @classmethod
    def from_file(cls, path: str) -> ProxyAcl:
        """A checker of the ``plain_acl.yml`` at ``path``.

        Raises:
            AclConfigError: the file exists but is invalid. OSError: it cannot be read.
        """
        return cls(PlainAccessValidator(path))

    def check(self, metadata: Iterable[tuple[str, Any]], peer: str, rpc: str, resources: dict[str, int]) -> None:
        """Let a request through or refuse it.

        Args:
            metadata: the call's invocation metadata.
            peer: ``context.peer()`` of the call.
            rpc: the RPC's name (``SendMessage``; ``Telemetry`` for settings).
            resources: what it needs (:func:`resources_of`, :func:`settings_resources`).

        Raises:
            ProxyError: UNAUTHORIZED (no, malformed or wrong signature, unknown key) or FORBIDDEN
                (a resource without the permission).
        """
        self.validator.reload_if_changed()
        config = self.validator.config
        ip = peer_ip(peer)
        if config.is_globally_white(ip):
            return
        headers = {k: v for k, v in metadata if isinstance(v, str)}
        value = headers.get(AUTHORIZATION)
        if not value:
            self._refuse(v2.UNAUTHORIZED, rpc, ip, "No accessKey is configured")
        access_key, given = parse_authorization(value)
        account = config.accounts.get(access_key)
        if account is None:
            self._refuse(v2.UNAUTHORIZED, rpc, ip, f"No acl config for {access_key}")
        if account.matches_white_address(ip):
            return
        expected = signature(account.secret_key, headers.get(DATE_TIME, ""))
        if not hmac.compare_digest(given, expected):
            self._refuse(v2.UNAUTHORIZED, rpc, ip, f"Check signature failed for accessKey={access_key}")
        try:
            PlainAccessValidator._check_perm(AccessResource(ip, 0, access_key, given, resources=resources), account)
        except AclError as exc:
            self._refuse(v2.FORBIDDEN, rpc, ip, str(exc))

    def _refuse(self, code: int, rpc: str, ip: str, message: str) -> NoReturn:
        self.refused[code] += 1
        _refusal_log.warning("ACL refused %s from %s: %s", rpc, ip or "?", message)
        raise ProxyError(code, message)
