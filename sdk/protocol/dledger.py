"""DLedger 0.3.1.2 RPC bodies shared by the SDK (admin: METADATA, LEADERSHIP_TRANSFER) and the
reference broker's DLedger member (``rocketmq_broker.dledger.protocol`` adds VOTE, HEART_BEAT, PUSH).

Frames are ordinary remoting frames (JSON header); the DLedger request or response is the JSON
body, written as fastjson writes it: keys in alphabetical order, null fields left out. Responses
always carry remoting code 200; the outcome is the ``code`` inside the body (:class:`DLedgerCode`).
Decoding is strict about types and ranges (a hostile body is a :class:`DLedgerProtocolError`)
and ignores unknown fields, as the Java side does.
"""

from __future__ import annotations

import enum
import json
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "MAX_ID_LENGTH",
    "MAX_INDEX",
    "DLedgerBase",
    "DLedgerCode",
    "DLedgerProtocolError",
    "DLedgerRequestCode",
    "LeadershipTransferRequest",
    "LeadershipTransferResponse",
    "MetadataRequest",
    "MetadataResponse",
    "base_kwargs",
    "code_field",
    "decode_body",
    "encode_body",
    "int_field",
    "parse_peers",
    "str_field",
]

MAX_ID_LENGTH = 255  # characters of group / member ids accepted from a peer
MAX_INDEX = (1 << 63) - 1  # indexes and terms are Java longs: anything above is refused


class DLedgerRequestCode(enum.IntEnum):
    """Remoting request codes of DLedger (``DLedgerRequestCode``)."""

    UNKNOWN = -1
    METADATA = 50000
    APPEND = 50001
    GET = 50002
    VOTE = 51001
    HEART_BEAT = 51002
    PULL = 51003
    PUSH = 51004
    LEADERSHIP_TRANSFER = 51005


class DLedgerCode(enum.IntEnum):
    """Result codes inside DLedger response bodies (``DLedgerResponseCode``)."""

    UNKNOWN = -1
    SUCCESS = 200
    TIMEOUT = 300
    METADATA_ERROR = 301
    NETWORK_ERROR = 302
    UNSUPPORTED = 303
    UNKNOWN_GROUP = 400
    UNKNOWN_MEMBER = 401
    UNEXPECTED_MEMBER = 402
    EXPIRED_TERM = 403
    NOT_LEADER = 404
    NOT_FOLLOWER = 405
    INCONSISTENT_STATE = 406
    INCONSISTENT_TERM = 407
    INCONSISTENT_INDEX = 408
    INCONSISTENT_LEADER = 409
    INDEX_OUT_OF_RANGE = 410
    UNEXPECTED_ARGUMENT = 411
    REPEATED_REQUEST = 412
    REPEATED_PUSH = 413
    DISK_ERROR = 414
    DISK_FULL = 415
    TERM_NOT_READY = 416
    FALL_BEHIND_TOO_MUCH = 417
    TAKE_LEADERSHIP_FAILED = 418
    INDEX_LESS_THAN_LOCAL_BEGIN = 419
    REQUEST_WITH_EMPTY_BODYS = 420
    PUSH_REQUEST_IS_FULL = 421
    INTERNAL_ERROR = 500
    TERM_CHANGED = 501
    WAIT_QUORUM_ACK_TIMEOUT = 502
    LEADER_PENDING_FULL = 503
    ILLEGAL_MEMBER_STATE = 504
    LEADER_NOT_READY = 505
    LEADER_TRANSFERRING = 506


class DLedgerProtocolError(ValueError):
    """A DLedger body that is not valid JSON of the expected shape, or holds absurd values."""


# -- fastjson-form encoding -----------------------------------------------------------------
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode


def encode_body(fields: dict[str, Any]) -> bytes:
    """``fields`` as fastjson writes a bean: sorted keys, None values left out, UTF-8."""
    return _dumps(_drop_none(fields)).encode("utf-8")


def _drop_none(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _drop_none(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, list):
        return [_drop_none(v) for v in obj]
    return obj


def decode_body(body: bytes) -> dict[str, Any]:
    """The JSON object of a DLedger body.

    Raises:
        DLedgerProtocolError: empty, not UTF-8 JSON, or not an object.
    """
    if not body:
        raise DLedgerProtocolError("empty DLedger body")
    try:
        obj = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise DLedgerProtocolError(f"DLedger body is not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise DLedgerProtocolError("DLedger body is not a JSON object")
    return obj


def int_field(obj: dict, key: str, default: int | None = None, lo: int = -1, hi: int = MAX_INDEX) -> int:
    value = obj.get(key, default)
    if value is None or type(value) is not int:
        raise DLedgerProtocolError(f"{key} must be an integer, got {value!r}")
    if not lo <= value <= hi:
        raise DLedgerProtocolError(f"{key} {value} outside [{lo}, {hi}]")
    return value


def str_field(obj: dict, key: str, required: bool = True) -> str | None:
    value = obj.get(key)
    if value is None and not required:
        return None
    if type(value) is not str or not value or len(value) > MAX_ID_LENGTH:
        raise DLedgerProtocolError(f"{key} must be a non-empty string of at most {MAX_ID_LENGTH} chars, got {value!r}")
    return value


def code_field(obj: dict) -> int:
    return int_field(obj, "code", 200, -1, 999)


# -- base fields ---------------------------------------------------------------------------
@dataclass(slots=True)
class DLedgerBase:
    group: str | None = None
    remote_id: str | None = None
    local_id: str | None = None
    leader_id: str | None = None
    term: int = -1
    code: int = 200

    def _base(self) -> dict[str, Any]:
        return {"code": self.code, "group": self.group, "leaderId": self.leader_id, "localId": self.local_id,
                "remoteId": self.remote_id, "term": self.term}

    def encode(self) -> bytes:
        return encode_body(self._base())


def base_kwargs(obj: dict, ids_required: bool) -> dict[str, Any]:
    return {"group": str_field(obj, "group", ids_required), "remote_id": str_field(obj, "remoteId", ids_required),
            "local_id": str_field(obj, "localId", ids_required), "leader_id": str_field(obj, "leaderId", False),
            "term": int_field(obj, "term", -1), "code": code_field(obj)}


# -- METADATA ------------------------------------------------------------------------------
@dataclass(slots=True)
class MetadataRequest(DLedgerBase):
    """METADATA (50000): the group's members and leader, as DLedger's own client asks for them."""

    @classmethod
    def decode(cls, body: bytes) -> MetadataRequest:
        return cls(**base_kwargs(decode_body(body), False))  # DLedger's client sends no localId


@dataclass(slots=True)
class MetadataResponse(DLedgerBase):
    """METADATA answer: ``group``, ``leader_id`` (None while there is no leader) and ``peers``
    ({member id: "host:port"}); the term is not reported (-1), as in DLedger 0.3.1.2."""

    peers: dict[str, str] = field(default_factory=dict)

    def encode(self) -> bytes:
        return encode_body({**self._base(), "peers": self.peers or None})

    @classmethod
    def decode(cls, body: bytes) -> MetadataResponse:
        obj = decode_body(body)
        peers = obj.get("peers") or {}
        if not isinstance(peers, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                  for k, v in peers.items()):
            raise DLedgerProtocolError("peers must map member ids to addresses")
        return cls(**base_kwargs(obj, False), peers=dict(peers))


# -- LEADERSHIP_TRANSFER -------------------------------------------------------------------
@dataclass(slots=True)
class LeadershipTransferRequest(DLedgerBase):
    """LEADERSHIP_TRANSFER (51005), two legs with one body (``LeadershipTransferRequest``):

    * to the leader (``remote_id`` = ``transfer_id`` = the leader): hand leadership to
      ``transferee_id``; ``term`` must be the leader's current term;
    * leader → transferee (``remote_id`` = ``transferee_id``): take leadership once your log
      reaches ``take_leadership_ledger_index`` (the leader's ledger end index), in ``term`` + 1.
    """

    transfer_id: str | None = None
    transferee_id: str | None = None
    take_leadership_ledger_index: int = 0

    def encode(self) -> bytes:
        return encode_body({**self._base(), "takeLeadershipLedgerIndex": self.take_leadership_ledger_index,
                            "transferId": self.transfer_id, "transfereeId": self.transferee_id})

    @classmethod
    def decode(cls, body: bytes) -> LeadershipTransferRequest:
        obj = decode_body(body)
        # DLedger's client sends no localId: only the transfer's own ids are required
        return cls(**base_kwargs(obj, False), transfer_id=str_field(obj, "transferId"),
                   transferee_id=str_field(obj, "transfereeId"),
                   take_leadership_ledger_index=int_field(obj, "takeLeadershipLedgerIndex", 0))


@dataclass(slots=True)
class LeadershipTransferResponse(DLedgerBase):
    """LEADERSHIP_TRANSFER answer: ``code`` (SUCCESS, or e.g. FALL_BEHIND_TOO_MUCH 417,
    TAKE_LEADERSHIP_FAILED 418, LEADER_TRANSFERRING 506, UNKNOWN_MEMBER 401, INCONSISTENT_TERM
    407, NOT_LEADER 404) and ``term`` (on success the new leader's term)."""

    @classmethod
    def decode(cls, body: bytes) -> LeadershipTransferResponse:
        return cls(**base_kwargs(decode_body(body), False))


# -- dLegerPeers ---------------------------------------------------------------------------
_PEER = re.compile(r"^([A-Za-z][0-9]{1,6})-([A-Za-z0-9.\-]+|\[[0-9A-Fa-f:]+\]):([0-9]{1,5})$")


def parse_peers(spec: str) -> dict[str, str]:
    """``dLegerPeers`` (``n0-127.0.0.1:40911;n1-127.0.0.1:40912;…``) → {id: "host:port"}.

    Raises:
        ValueError: an empty list, a malformed item, a repeated id or a port outside 1..65535.
    """
    peers: dict[str, str] = {}
    for item in (p.strip() for p in spec.split(";")):
        if not item:
            continue
        m = _PEER.match(item)
        if m is None or not 0 < int(m.group(3)) < 65536:
            raise ValueError(f"dLegerPeers item {item!r} is not <id>-<host>:<port> (id: a letter and digits)")
        if m.group(1) in peers:
            raise ValueError(f"dLegerPeers repeats id {m.group(1)!r}")
        peers[m.group(1)] = f"{m.group(2)}:{m.group(3)}"
    if not peers:
        raise ValueError("dLegerPeers is empty")
    return peers
