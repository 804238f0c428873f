"""ACL checks of the reference broker (Apache RocketMQ 4.9.8 ``PlainAccessValidator``).

With ``aclEnable=true`` every request reaching a processor first goes through
:meth:`PlainAccessValidator.before_request` (the broker's server RPC hook in Java):

1. A client whose IP matches ``globalWhiteRemoteAddresses`` passes.
2. No ``AccessKey`` ext field: refused (``No accessKey is configured``); an unknown key:
   ``No acl config for <key>``.
3. A client whose IP matches the account's ``whiteRemoteAddress`` passes (no signature needed).
4. ``Signature`` must be ``base64(HmacSHA1(secretKey, values of the sorted ext fields except
   Signature and _UNIQUE_KEY_QUERY + body))`` (:mod:`rocketmq_sdk.protocol.acl`), else
   ``Check signature failed for accessKey=<key>``.
5. Admin-only codes (``acl=ACL_ADMIN`` in the request table, :mod:`.request_table`: Java's
   :data:`~.acl_config.ADMIN_CODES`, and here also the ACL administration codes
   :data:`ACL_ADMIN_CODES`, which 4.9.8 leaves open) need ``admin: true``; then every resource
   the request names needs its permission (below), from ``topicPerms``/``groupPerms`` or the
   account's default (``No default permission for topic:<t>`` / ``group:<g>``). An admin with
   no topic or group perms may do anything. A PUB on ``RMQ_SYS_TRACE_TOPIC`` is never checked.

Resources per request code (the ``acl`` of its request table entry), as Java 4.9.8 parses them (other codes name no resource, so a
signed request of a known account passes): SEND_MESSAGE / SEND_MESSAGE_V2 → PUB on the topic,
or SUB on the group for a ``%RETRY%`` topic; CONSUMER_SEND_MSG_BACK → SUB on the group;
PULL_MESSAGE → SUB on topic and group; QUERY_MESSAGE → SUB on the topic; HEART_BEAT → SUB on
each consumer group and subscribed topic; UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP → SUB
on the group; UPDATE_CONSUMER_OFFSET → SUB on group and topic. Like 4.9.8, SEND_BATCH_MESSAGE,
QUERY_CONSUMER_OFFSET and the other codes are not checked per resource.

A refusal is answered NO_PERMISSION (16), as the broker issue asks, with Java's remark
``org.apache.rocketmq.acl.common.AclException: <message>``. A 4.9.8 broker answers the same
remark with SYSTEM_ERROR (1) instead (its hook's exception, ``NettyRemotingAbstract.
processRequestCommand``; Java also appends the first stack frame, we do not); set the broker's
``aclDeniedResponseCode=1`` to answer exactly that. The SDK treats both the same way.
Oneway requests are dropped unanswered.

The ACL file is re-read when its modification time, size or inode changes, checked on each
request (one ``stat``; Java polls every 5 s). A file that fails to parse on reload is logged and
the previous configuration stays in force.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field

from rocketmq_sdk.protocol.acl import ACCESS_KEY, SECURITY_TOKEN, SIGNATURE, verify
from rocketmq_sdk.protocol.bodies import HeartbeatData
from rocketmq_sdk.protocol.codes import ResponseCode
from rocketmq_sdk.remoting import Channel, RemotingCommand
from rocketmq_sdk.remoting.channel import bad_input_log

from .acl_config import (
    PUB,
    SUB,
    AclConfigError,
    PlainAccessAccount,
    PlainAclConfig,
    check_permission,
    retry_topic,
)
from .request_table import BROKER_REQUESTS
from .requests import GroupRes, SendRes, TopicRes

__all__ = ["ACL_ADMIN_CODES", "ACL_EXCEPTION", "AccessResource", "AclError", "PlainAccessValidator"]

log = logging.getLogger("rocketmq_broker.acl")

ACL_EXCEPTION = "org.apache.rocketmq.acl.common.AclException"
"""Class name that starts the remark of a refused request, as the Java broker writes it."""

RMQ_SYS_TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"

ACL_ADMIN_CODES = frozenset(code for code in (50, 51, 53) if BROKER_REQUESTS[code].acl.admin)
"""UPDATE_AND_CREATE_ACL_CONFIG, DELETE_ACL_CONFIG, UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: admin-only here
(``ACL_ADMIN`` in the request table); 4.9.8 lets any signed account change the ACL file with them
(not mirrored on purpose)."""


class AclError(Exception):
    """A request failed the ACL check; the message is Java's ``AclException`` message."""


@dataclass
class AccessResource:
    """What a request asks for (Java ``PlainAccessResource`` built by ``parse``).

    Attributes:
        remote_ip: client IP without the port.
        request_code: the request's code.
        access_key / signature / security_token: the ACL ext fields (None when absent).
        resources: ``{topic or %RETRY%group: needed perm bits}``.
    """

    remote_ip: str
    request_code: int
    access_key: str | None = None
    signature: str | None = None
    security_token: str | None = None
    resources: dict[str, int] = field(default_factory=dict)


def _remote_ip(remote_addr: str) -> str:
    host = remote_addr.rpartition(":")[0] if ":" in remote_addr else remote_addr
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def _is_retry(resource: str) -> bool:
    return resource.startswith("%RETRY%")


def _print(resource: str) -> str:
    return f"group:{resource[len('%RETRY%'):]}" if _is_retry(resource) else f"topic:{resource}"


class PlainAccessValidator:
    """Checks requests against a ``plain_acl.yml`` (see the module docstring).

    Args:
        path: the ACL file. A missing file means no accounts (every request not from a globally
            white-listed address is refused) until it appears.
        lenient_unique_key_query: also accept QUERY_MESSAGE signatures that include
            ``_UNIQUE_KEY_QUERY`` (what Java clients send); False (default) refuses them as 4.9.8
            does (apache/rocketmq#5310).

    Raises:
        AclConfigError: the file exists but is invalid at start (Java fails the broker start).
        OSError: the file exists but cannot be read.
    """

    def __init__(self, path: str, *, lenient_unique_key_query: bool = False,
                 denied_code: int = ResponseCode.NO_PERMISSION) -> None:
        #: response code of a refused request (NO_PERMISSION; 4.9.8 answers SYSTEM_ERROR)
        self.denied_code = denied_code
        self.path = path
        self.lenient = lenient_unique_key_query
        self.config = PlainAclConfig()
        self._stamp: tuple[int, int, int] | None = None
        self.reloads = 0
        self._check_file(initial=True)

    # -- configuration -------------------------------------------------------------------------
    def _check_file(self, initial: bool = False) -> None:
        try:
            st = os.stat(self.path)
            stamp: tuple[int, int, int] | None = (st.st_mtime_ns, st.st_size, st.st_ino)
        except FileNotFoundError:
            stamp = None
        if stamp == self._stamp and not initial:
            return
        self._stamp = stamp
        if stamp is None:
            log.warning("ACL file %s does not exist: no accounts", self.path)
            self.config = PlainAclConfig()
            return
        try:
            config = PlainAclConfig.load(self.path)
        except (OSError, AclConfigError) as exc:
            if initial:
                raise
            log.error("ACL file %s not reloaded, keeping the previous accounts: %s", self.path, exc)
            return
        self.config = config
        if not initial:
            self.reloads += 1
        log.info("ACL file %s loaded: %d account(s), %d global white address pattern(s)", self.path,
                 len(config.accounts), len(config.global_white_remote_addresses))

    def reload_if_changed(self) -> None:
        """Re-read the file when its mtime, size or inode changed since the last look."""
        self._check_file()

    # -- checking ------------------------------------------------------------------------------
    @staticmethod
    def parse(cmd: RemotingCommand, remote_addr: str) -> AccessResource:
        """The resources ``cmd`` needs (Java ``PlainAccessValidator.parse``), as its entry of the
        broker's request table declares them (``acl``).

        Raises:
            AclError: the header or heartbeat body cannot be read.
        """
        res = AccessResource(_remote_ip(remote_addr), cmd.code)
        ext = cmd.ext_fields
        if not ext:
            return res
        res.access_key = _text(ext.get(ACCESS_KEY))
        res.signature = _text(ext.get(SIGNATURE))
        res.security_token = _text(ext.get(SECURITY_TOKEN))
        need = res.resources
        code = cmd.code

        def add(resource: object, perm: int) -> None:
            if resource is not None:
                need[str(resource)] = perm

        def add_group(group: object) -> None:
            if group is not None:
                need[retry_topic(str(group))] = SUB

        spec = BROKER_REQUESTS.get(code)
        try:
            for r in spec.acl.resources if spec is not None else ():
                if type(r) is TopicRes:
                    add(ext.get(r.field), r.perm)
                elif type(r) is GroupRes:
                    add_group(ext.get(r.field))
                elif type(r) is SendRes:
                    topic = ext.get(r.topic_field)
                    if topic is not None and _is_retry(str(topic)):
                        add_group(ext.get(r.group_field))
                    else:
                        add(topic, PUB)
                else:  # HeartbeatRes
                    for consumer in HeartbeatData.from_json(cmd.body).consumers:
                        add_group(consumer.group_name)
                        for sub in consumer.subscriptions:
                            add(sub.topic, SUB)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise AclError(str(exc)) from exc
        return res

    def validate(self, cmd: RemotingCommand, res: AccessResource) -> None:
        """Java ``PlainPermissionManager.validate``.

        Raises:
            AclError: the request is refused (Java's message).
        """
        config = self.config
        if config.is_globally_white(res.remote_ip):
            return
        if res.access_key is None:
            raise AclError("No accessKey is configured")
        owned = config.accounts.get(res.access_key)
        if owned is None:
            raise AclError(f"No acl config for {res.access_key}")
        if owned.matches_white_address(res.remote_ip):
            return
        if not verify(cmd.ext_fields, cmd.body, owned.secret_key, lenient=self.lenient):
            raise AclError(f"Check signature failed for accessKey={res.access_key}")
        if res.resources.get(RMQ_SYS_TRACE_TOPIC) == PUB:
            return
        self._check_perm(res, owned)

    @staticmethod
    def _check_perm(res: AccessResource, owned: PlainAccessAccount) -> None:
        spec = BROKER_REQUESTS.get(res.request_code)
        if spec is not None and spec.acl.admin and not owned.admin:
            raise AclError(f"Need admin permission for request code={res.request_code}, "
                           f"but accessKey={owned.access_key} is not")
        if not res.resources or (owned.admin and not owned.resource_perms):
            return
        for resource, needed in res.resources.items():
            perm = owned.resource_perms.get(resource)
            if perm is None:
                perm = owned.default_group_perm if _is_retry(resource) else owned.default_topic_perm
            if not check_permission(needed, perm):
                raise AclError(f"No default permission for {_print(resource)}")

    def check(self, cmd: RemotingCommand, remote_addr: str) -> None:
        """Reload the file if it changed, then parse and validate ``cmd``.

        Raises:
            AclError: the request is refused.
        """
        self._check_file()
        self.validate(cmd, self.parse(cmd, remote_addr))

    def before_request(self, channel: Channel, cmd: RemotingCommand) -> RemotingCommand | None:
        """Server request hook: None lets the request through, else the refusal to send."""
        try:
            self.check(cmd, channel.remote_addr)
        except AclError as exc:
            bad_input_log.warning("ACL refused request code %d from %s: %s", cmd.code, channel.remote_addr, exc)
            return cmd.response(self.denied_code, f"{ACL_EXCEPTION}: {exc}")
        return None


def _text(value: object) -> str | None:
    return None if value is None else str(value)
