"""The ``plain_acl.yml`` model of the reference broker (RocketMQ 4.9 ``PlainPermissionManager``).

File format (YAML, the one Apache RocketMQ ships in ``conf/plain_acl.yml``)::

    globalWhiteRemoteAddresses:      # clients from these addresses skip every check
      - 10.10.103.*
      - 192.168.0.*
    accounts:
      - accessKey: RocketMQ          # longer than 6 characters (as Java requires)
        secretKey: 12345678          # longer than 6 characters
        whiteRemoteAddress:          # this account skips signature and permission checks from here
        admin: false                 # admins may use the admin-only request codes
        defaultTopicPerm: DENY       # for topics not in topicPerms (absent = DENY)
        defaultGroupPerm: SUB        # for groups not in groupPerms (absent = DENY)
        topicPerms: [topicA=DENY, topicB=PUB|SUB, topicC=SUB]
        groupPerms: [groupA=DENY, groupB=PUB|SUB, groupC=SUB]

Permissions are ``DENY``, ``PUB``, ``SUB``, ``PUB|SUB`` / ``SUB|PUB``; any other text means
``DENY`` (Java ``Permission.parsePermFromString``). Groups are keyed by their retry topic
``%RETRY%<group>``, as Java does, so a request naming ``%RETRY%g`` is checked against ``g``.

Remote address patterns (Java ``RemoteAddressStrategyFactory``): blank matches nothing; ``*``,
``*.*.*.*`` and ``*:*:*:*:*:*:*:*`` match everything; ``192.168.0.{1,2}`` and ``1.2.3.4,1.2.3.5``
list addresses; ``192.168.1.*``, ``192.168.*`` and ``192.168.1.1-5`` / ``192.168.10-20.*`` are
ranges (IPv6 the same with ``:`` and hex segments, the prefix written out without ``::``);
anything else is one address.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

__all__ = [
    "ADMIN_CODES",
    "ANY",
    "DENY",
    "PUB",
    "SUB",
    "RETRY_GROUP_TOPIC_PREFIX",
    "AclConfigError",
    "PlainAccessAccount",
    "PlainAclConfig",
    "check_permission",
    "parse_perm",
    "remote_address_matcher",
    "retry_topic",
]

log = logging.getLogger("rocketmq_broker.acl")

DENY = 1
ANY = 1 << 1
PUB = 1 << 2
SUB = 1 << 3

RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"

#: Request codes only admin accounts may send (Java ``Permission.ADMIN_CODE``, 4.9.8):
#: UPDATE_AND_CREATE_TOPIC, UPDATE_BROKER_CONFIG, DELETE_TOPIC_IN_BROKER,
#: UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, DELETE_SUBSCRIPTIONGROUP.
ADMIN_CODES = frozenset({17, 25, 215, 200, 207})

_ACCESS_KEY_MIN_LENGTH = 6
_SECRET_KEY_MIN_LENGTH = 6

RemoteAddressMatcher = Callable[[str], bool]


class AclConfigError(ValueError):
    """``plain_acl.yml`` cannot be used: bad YAML, a short key, a bad permission or address pattern."""


def retry_topic(group: str) -> str:
    """``%RETRY%<group>``: the key a group's permissions are stored and checked under."""
    return RETRY_GROUP_TOPIC_PREFIX + group


def parse_perm(text: object) -> int:
    """``"PUB"`` → PUB, ``"SUB"`` → SUB, ``"PUB|SUB"``/``"SUB|PUB"`` → both; anything else
    (``DENY``, None, a typo) → DENY, as Java's ``Permission.parsePermFromString``."""
    if text is None:
        return DENY
    return {"PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB}.get(str(text).strip(), DENY)


def check_permission(needed: int, owned: int) -> bool:
    """Java ``Permission.checkPermission``: DENY in ``owned`` refuses everything; ANY needs PUB or
    SUB; otherwise one needed bit must be owned."""
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)


# -- remote address patterns ------------------------------------------------------------------------

def _expand_v6(addr: str) -> str | None:
    try:
        return ipaddress.IPv6Address(addr).exploded.upper()
    except ValueError:
        return None


def _is_v4(addr: str) -> bool:
    try:
        ipaddress.IPv4Address(addr)
    except ValueError:
        return False
    return True


def _canonical(addr: str) -> str | None:
    """A valid IPv4 address as is, an IPv6 one fully expanded in upper case, else None."""
    if _is_v4(addr):
        return addr
    return _expand_v6(addr)


def _multiple(addresses: Iterable[str], spec: str) -> RemoteAddressMatcher:
    allowed = set()
    for a in addresses:
        a = a.strip()
        canon = _canonical(a)
        if canon is None:
            raise AclConfigError(f"Netaddress examine Exception netaddress is {a} (in {spec!r})")
        allowed.add(canon)
    return lambda remote: _canonical(remote) in allowed


def _range_bounds(seg: str, hexa: bool, spec: str) -> tuple[int, int] | None:
    top = 0xFFFF if hexa else 255
    if seg == "*":
        return 0, top
    if "-" in seg:
        lo_s, _, hi_s = seg.partition("-")
        try:
            lo, hi = int(lo_s, 16 if hexa else 10), int(hi_s, 16 if hexa else 10)
        except ValueError:
            raise AclConfigError(f"RangeRemoteAddressStrategy netaddress examine scope Exception value {seg} "
                                 f"(in {spec!r})") from None
        if not (0 <= lo <= hi <= top):
            raise AclConfigError(f"RangeRemoteAddressStrategy netaddress examine scope Exception start is {lo} , "
                                 f"end is {hi} (in {spec!r})")
        return lo, hi
    return None


def _range(spec: str) -> RemoteAddressMatcher:
    v6 = ":" in spec
    if v6 and "::" in spec:
        raise AclConfigError(f"IPv6 range pattern {spec!r}: write the prefix out without '::'")
    segs = [s.strip() for s in spec.split(":" if v6 else ".")]
    for i in range(1, len(segs)):
        bounds = _range_bounds(segs[i], v6, spec)
        if bounds is not None:
            break
    else:
        raise AclConfigError(f"no range segment in address pattern {spec!r}")
    if any(s != "*" for s in segs[i + 1:]):
        raise AclConfigError(f"only '*' may follow the range segment in address pattern {spec!r}")
    lo, hi = bounds
    if v6:
        head = [s.upper().zfill(4) for s in segs[:i]]

        def match_v6(remote: str) -> bool:
            full = _expand_v6(remote)
            if full is None:
                return False
            parts = full.split(":")
            return parts[:i] == head and lo <= int(parts[i], 16) <= hi

        return match_v6
    head = segs[:i]

    def match_v4(remote: str) -> bool:
        if not _is_v4(remote):
            return False
        parts = remote.split(".")
        return parts[:i] == head and lo <= int(parts[i]) <= hi

    return match_v4


def remote_address_matcher(spec: object) -> RemoteAddressMatcher:
    """A predicate over client IPs (no port) for a ``whiteRemoteAddress`` pattern.

    Raises:
        AclConfigError: the pattern is not one RocketMQ accepts.
    """
    text = "" if spec is None else str(spec).strip()
    if not text:
        return lambda remote: False
    if text in ("*", "*.*.*.*", "*:*:*:*:*:*:*:*"):
        return lambda remote: True
    if text.endswith("}"):
        head, brace, tail = text.rpartition("{")
        sep = ":" if ":" in head else "."
        if not brace or not head.endswith(sep):
            raise AclConfigError(f"MultipleRemoteAddressStrategy netaddress examine scope Exception netaddress {text}")
        return _multiple((head + s for s in tail[:-1].split(",") if s.strip()), text)
    if "," in text:
        return _multiple(text.split(","), text)
    if "*" in text or "-" in text:
        return _range(text)
    canon = _canonical(text)
    if canon is None:
        raise AclConfigError(f"Netaddress examine Exception netaddress is {text}")
    return lambda remote: _canonical(remote) == canon


# -- accounts ---------------------------------------------------------------------------------------

def _parse_resource_perms(entries: object, *, groups: bool, owner: str) -> dict[str, int]:
    out: dict[str, int] = {}
    if not entries:
        return out
    if not isinstance(entries, list):
        raise AclConfigError(f"{'groupPerms' if groups else 'topicPerms'} of {owner} must be a list")
    for entry in entries:
        items = [p for p in str(entry).split("=") if p]
        if len(items) != 2:
            raise AclConfigError(f"Parse resource permission failed for {'group' if groups else 'topic'}:{entry}")
        name = items[0].strip()
        out[retry_topic(name) if groups else name] = parse_perm(items[1])
    return out


@dataclass
class PlainAccessAccount:
    """One entry of ``accounts`` (Java ``PlainAccessResource`` as owned by an account).

    Attributes:
        access_key / secret_key: credentials (both longer than 6 characters).
        white_remote_address: the pattern text; requests from matching IPs skip the checks.
        admin: may send :data:`ADMIN_CODES`; with no topic/group perms it may do anything.
        default_topic_perm / default_group_perm: bits for resources not listed (DENY when absent).
        resource_perms: ``{topic or %RETRY%group: bits}`` from ``topicPerms``/``groupPerms``.
    """

    access_key: str
    secret_key: str
    white_remote_address: str = ""
    admin: bool = False
    default_topic_perm: int = DENY
    default_group_perm: int = DENY
    resource_perms: dict[str, int] = field(default_factory=dict)
    matches_white_address: RemoteAddressMatcher = field(default=lambda remote: False, repr=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PlainAccessAccount:
        """Build an account from its YAML mapping.

        Raises:
            AclConfigError: missing or short keys, bad resource entries or address pattern.
        """
        # YAML reads ``secretKey: 12345678`` as a number; Java's fastjson turns it back to text
        ak, sk = d.get("accessKey"), d.get("secretKey")
        ak = None if ak is None else str(ak)
        sk = None if sk is None else str(sk)
        if ak is None or sk is None or len(ak) <= _ACCESS_KEY_MIN_LENGTH or len(sk) <= _SECRET_KEY_MIN_LENGTH:
            raise AclConfigError(f"The accessKey={ak} and secretKey={'***' if sk else sk} cannot be null "
                                 "and length should longer than 6")
        admin = d.get("admin", False)
        if isinstance(admin, str):
            admin = admin.strip().lower() == "true"
        white = d.get("whiteRemoteAddress")
        white_text = "" if white is None else str(white)
        perms = _parse_resource_perms(d.get("groupPerms"), groups=True, owner=ak)
        perms.update(_parse_resource_perms(d.get("topicPerms"), groups=False, owner=ak))
        return cls(access_key=ak, secret_key=sk, white_remote_address=white_text, admin=bool(admin),
                   default_topic_perm=parse_perm(d.get("defaultTopicPerm")),
                   default_group_perm=parse_perm(d.get("defaultGroupPerm")),
                   resource_perms=perms, matches_white_address=remote_address_matcher(white_text))


@dataclass
class PlainAclConfig:
    """A parsed ``plain_acl.yml``: the global white list and the accounts by access key."""

    global_white_remote_addresses: list[str] = field(default_factory=list)
    accounts: dict[str, PlainAccessAccount] = field(default_factory=dict)
    global_white_matchers: list[RemoteAddressMatcher] = field(default_factory=list, repr=False)

    def is_globally_white(self, remote_ip: str) -> bool:
        """Does ``remote_ip`` match one of ``globalWhiteRemoteAddresses``?"""
        return any(m(remote_ip) for m in self.global_white_matchers)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> PlainAclConfig:
        """Build the config from the YAML document (None or empty: no accounts, nobody white).

        An access key listed twice keeps its first entry (Java logs and skips the repeat).

        Raises:
            AclConfigError: a bad account or address pattern.
        """
        if not data:
            return cls()
        if not isinstance(data, Mapping):
            raise AclConfigError("plain_acl.yml must hold a mapping")
        white = [str(a) for a in data.get("globalWhiteRemoteAddresses") or [] if a is not None]
        accounts: dict[str, PlainAccessAccount] = {}
        raw_accounts = data.get("accounts") or []
        if not isinstance(raw_accounts, list):
            raise AclConfigError("accounts must be a list")
        for raw in raw_accounts:
            if not isinstance(raw, Mapping):
                raise AclConfigError(f"an account must be a mapping, got {raw!r}")
            account = PlainAccessAccount.from_dict(raw)
            if account.access_key in accounts:
                log.warning("access key %s is repeated in the ACL file; keeping the first", account.access_key)
                continue
            accounts[account.access_key] = account
        return cls(white, accounts, [remote_address_matcher(a) for a in white])

    @classmethod
    def load(cls, path: str) -> PlainAclConfig:
        """Read and parse ``path``.

        Raises:
            OSError: the file cannot be read.
            AclConfigError: not YAML, or its content is invalid.
        """
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise AclConfigError(f"{path} is not valid YAML: {exc}") from exc
        return cls.from_dict(data)
