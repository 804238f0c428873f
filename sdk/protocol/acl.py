"""RocketMQ 4.x ACL request signing (docs/protocol.md §6.8), shared by the SDK and the reference broker.

Signature = ``base64(HmacSHA1(secretKey, data))`` where ``data`` is the UTF-8 concatenation of the
**values** of every ``extFields`` entry except ``Signature``, taken in key order (Java ``String``
order, i.e. UTF-16 code units; the C++ client's ``std::map`` byte order is the same for the ASCII
keys RocketMQ uses), followed by the raw body bytes. The client first adds ``AccessKey`` (and
``SecurityToken`` when it has one) to the fields, so they are signed too.

Checked against the captures: all 210 requests mqadmin 4.9.8 signed (secret ``12345678``)
recompute exactly, and the C++ client's 236 signatures (234 requests and a response; fields
``AccessKey`` "", ``OnsChannel`` "ALIYUN" and the header) recompute with the empty secret.

The ``_UNIQUE_KEY_QUERY`` quirk: Java 4.9.x clients sign it (it is an ext field of
QUERY_MESSAGE), but the 4.9.x broker leaves it out when verifying, so ``queryMsgByUniqueKey``
fails with ACL on (apache/rocketmq#5310). :class:`AclClientRPCHook` leaves it out, which is what
a real broker checks; :func:`verify` accepts both forms unless ``lenient=False``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rocketmq_sdk.remoting.command import RemotingCommand

__all__ = [
    "ACCESS_KEY",
    "SECURITY_TOKEN",
    "SIGNATURE",
    "UNIQUE_KEY_QUERY",
    "AclClientRPCHook",
    "signing_content",
    "sign",
    "verify",
]

ACCESS_KEY = "AccessKey"
SECURITY_TOKEN = "SecurityToken"
SIGNATURE = "Signature"
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"
"""``MixAll.UNIQUE_MSG_QUERY_FLAG``: ext field of QUERY_MESSAGE that brokers do not sign."""

_DEFAULT_EXCLUDE = (UNIQUE_KEY_QUERY,)


def _java_key(key: str) -> bytes:
    # Big-endian UTF-16 bytes order exactly like Java's String.compareTo (code unit by unit).
    return key.encode("utf-16-be", "surrogatepass")


def _as_str(value: object) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    return value if isinstance(value, str) else str(value)


def signing_content(ext_fields: Mapping[str, object], body: bytes = b"", *,
                    exclude: Iterable[str] = ()) -> bytes:
    """Return the bytes that are signed: values sorted by key, UTF-8, then the body.

    Args:
        ext_fields: the request's custom header (``AccessKey``/``SecurityToken`` included).
            ``Signature`` and None values are skipped; numbers and booleans are written as on
            the wire (``0``, ``true``).
        body: the request body (bytes, may be empty).
        exclude: further keys to leave out.
    """
    skip = {SIGNATURE, *exclude}
    keys = [k for k, v in ext_fields.items() if k not in skip and v is not None]
    # ASCII keys (all RocketMQ's) sort the same by code point as by UTF-16 unit: skip the encoding
    if all(k.isascii() for k in keys):
        keys.sort()
    else:
        keys.sort(key=_java_key)
    data = "".join(_as_str(ext_fields[k]) for k in keys).encode("utf-8")
    return data + bytes(body) if body else data


def sign(ext_fields: Mapping[str, object], body: bytes, secret_key: str, *,
         exclude: Iterable[str] = ()) -> str:
    """Compute the ``Signature`` ext field: ``base64(HmacSHA1(secret_key, content))``.

    Args:
        ext_fields: the fields to sign, ``AccessKey`` already in (``Signature`` is ignored).
        body: request body bytes.
        secret_key: the account's secret key (UTF-8 encoded for the HMAC; may be empty, as the
            C++ client without credentials uses).
        exclude: keys not to sign (besides ``Signature``).

    Returns:
        The base64 text (28 characters).
    """
    digest = hmac.new(secret_key.encode("utf-8"), signing_content(ext_fields, body, exclude=exclude),
                      hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


def verify(ext_fields: Mapping[str, object], body: bytes, secret_key: str, *,
           exclude: Iterable[str] = _DEFAULT_EXCLUDE, lenient: bool = True) -> bool:
    """Broker side: does the request's ``Signature`` match ``secret_key``?

    Args:
        ext_fields: the received custom header, ``Signature`` included.
        body: the received body bytes.
        secret_key: the secret of the request's ``AccessKey`` account.
        exclude: keys the broker leaves out of the content (4.9.x: ``_UNIQUE_KEY_QUERY``).
        lenient: also accept a signature over every field including the excluded ones, which is
            what Java 4.9.x clients and mqadmin send for QUERY_MESSAGE (a real 4.9.8 broker
            rejects those; pass False to mirror it exactly).

    Returns:
        False when ``Signature`` is missing or wrong (compared in constant time).
    """
    given = ext_fields.get(SIGNATURE)
    if not isinstance(given, str) or not given:
        return False
    exclude = tuple(exclude)
    expected = sign(ext_fields, body, secret_key, exclude=exclude)
    if hmac.compare_digest(given.encode("utf-8"), expected.encode("ascii")):
        return True
    if lenient and any(k in ext_fields for k in exclude):
        full = sign(ext_fields, body, secret_key)
        return hmac.compare_digest(given.encode("utf-8"), full.encode("ascii"))
    return False


class AclClientRPCHook:
    """Client RPC hook that signs every outgoing request (Java ``AclClientRPCHook``).

    Register it on a ``rocketmq_sdk.remoting.client.RemotingClient`` (``rpc_hooks``). Before
    each request it replaces ``cmd.ext_fields`` by a copy holding ``AccessKey``, ``SecurityToken``
    (when given) and a fresh ``Signature`` over those fields and ``cmd.body``; the caller's dict
    is never modified.

    Args:
        access_key: the account's access key (sent as ``AccessKey``).
        secret_key: the secret used for the HMAC; never sent.
        security_token: optional STS token (sent and signed as ``SecurityToken``).
        exclude: keys left out of the signature; default ``("_UNIQUE_KEY_QUERY",)``, what brokers
            verify (Java clients sign it, which 4.9.x brokers reject).
    """

    __slots__ = ("access_key", "secret_key", "security_token", "exclude")

    def __init__(self, access_key: str, secret_key: str, security_token: str | None = None, *,
                 exclude: Iterable[str] = _DEFAULT_EXCLUDE) -> None:
        if not isinstance(access_key, str) or not isinstance(secret_key, str):
            raise TypeError("access_key and secret_key must be str")
        self.access_key = access_key
        self.secret_key = secret_key
        self.security_token = security_token
        self.exclude = tuple(exclude)

    def before_request(self, addr: str, cmd: RemotingCommand) -> None:
        """Add ``AccessKey`` (+ ``SecurityToken``) and ``Signature`` to ``cmd.ext_fields``."""
        fields = dict(cmd.ext_fields) if cmd.ext_fields else {}
        fields.pop(SIGNATURE, None)
        fields[ACCESS_KEY] = self.access_key
        if self.security_token is not None:
            fields[SECURITY_TOKEN] = self.security_token
        fields[SIGNATURE] = sign(fields, cmd.body, self.secret_key, exclude=self.exclude)
        cmd.ext_fields = fields

    def after_response(self, addr: str, cmd: RemotingCommand, resp: RemotingCommand) -> None:
        """Nothing to do: responses are not signed."""

    def __repr__(self) -> str:
        return f"AclClientRPCHook(access_key={self.access_key!r})"
