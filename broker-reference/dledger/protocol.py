"""DLedger 0.3.1.2 RPC bodies on the remoting codec (dledger-protocol.md §2–3).

Frames are ordinary remoting frames (:class:`rocketmq_sdk.remoting.RemotingCommand`, JSON header);
the DLedger request or response is the JSON body, written as fastjson writes it: keys in
alphabetical order, null fields left out, the derived getters of PUSH (``batch``, ``count``,
``firstEntryIndex``, ``lastEntryIndex``, ``totalSize``) included. Responses always carry remoting
code 200; the outcome is the ``code`` inside the body (:class:`DLedgerCode`).

Decoding is strict about types and ranges (a hostile frame is a :class:`DLedgerProtocolError`,
never a crash or a write) and ignores unknown fields, as the Java side does.
"""

from __future__ import annotations

import base64
import binascii
import enum
import json
from dataclasses import dataclass, field
from typing import Any

from rocketmq_sdk.remoting.command import RemotingCommand

from .entry import MAX_BODY_SIZE, DLedgerEntry

__all__ = [
    "DLedgerCode",
    "DLedgerProtocolError",
    "DLedgerRequestCode",
    "HeartBeatRequest",
    "HeartBeatResponse",
    "PushRequest",
    "PushResponse",
    "PushType",
    "VoteRequest",
    "VoteResponse",
    "VoteResult",
    "decode_body",
    "encode_body",
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


class VoteResult(enum.Enum):
    """``VoteResponse.RESULT``."""

    UNKNOWN = "UNKNOWN"
    ACCEPT = "ACCEPT"
    REJECT_UNKNOWN_LEADER = "REJECT_UNKNOWN_LEADER"
    REJECT_UNEXPECTED_LEADER = "REJECT_UNEXPECTED_LEADER"
    REJECT_EXPIRED_VOTE_TERM = "REJECT_EXPIRED_VOTE_TERM"
    REJECT_ALREADY_VOTED = "REJECT_ALREADY_VOTED"
    REJECT_ALREADY_HAS_LEADER = "REJECT_ALREADY_HAS_LEADER"
    REJECT_TERM_NOT_READY = "REJECT_TERM_NOT_READY"
    REJECT_TERM_SMALL_THAN_LEDGER = "REJECT_TERM_SMALL_THAN_LEDGER"
    REJECT_EXPIRED_LEDGER_TERM = "REJECT_EXPIRED_LEDGER_TERM"
    REJECT_SMALL_LEDGER_END_INDEX = "REJECT_SMALL_LEDGER_END_INDEX"
    REJECT_TAKING_LEADERSHIP = "REJECT_TAKING_LEADERSHIP"


class PushType(enum.Enum):
    """``PushEntryRequest.Type``."""

    APPEND = "APPEND"
    COMMIT = "COMMIT"
    COMPARE = "COMPARE"
    TRUNCATE = "TRUNCATE"


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


def _int(obj: dict, key: str, default: int | None = None, lo: int = -1, hi: int = MAX_INDEX) -> int:
    value = obj.get(key, default)
    if value is None or type(value) is not int:
        raise DLedgerProtocolError(f"{key} must be an integer, got {value!r}")
    if not lo <= value <= hi:
        raise DLedgerProtocolError(f"{key} {value} outside [{lo}, {hi}]")
    return value


def _str(obj: dict, key: str, required: bool = True) -> str | None:
    value = obj.get(key)
    if value is None and not required:
        return None
    if type(value) is not str or not value or len(value) > MAX_ID_LENGTH:
        raise DLedgerProtocolError(f"{key} must be a non-empty string of at most {MAX_ID_LENGTH} chars, got {value!r}")
    return value


def _code(obj: dict) -> int:
    return _int(obj, "code", 200, -1, 999)


# -- base fields ---------------------------------------------------------------------------
@dataclass(slots=True)
class _Base:
    group: str | None = None
    remote_id: str | None = None
    local_id: str | None = None
    leader_id: str | None = None
    term: int = -1
    code: int = 200

    def _base(self) -> dict[str, Any]:
        return {"code": self.code, "group": self.group, "leaderId": self.leader_id, "localId": self.local_id,
                "remoteId": self.remote_id, "term": self.term}

    def to_command(self, code: int) -> RemotingCommand:
        """This request as a remoting request frame (fresh opaque)."""
        return RemotingCommand.request(code, body=self.encode())

    def encode(self) -> bytes:
        return encode_body(self._base())


def _base_kwargs(obj: dict, ids_required: bool) -> dict[str, Any]:
    return {"group": _str(obj, "group", ids_required), "remote_id": _str(obj, "remoteId", ids_required),
            "local_id": _str(obj, "localId", ids_required), "leader_id": _str(obj, "leaderId", False),
            "term": _int(obj, "term", -1), "code": _code(obj)}


# -- VOTE ----------------------------------------------------------------------------------
@dataclass(slots=True)
class VoteRequest(_Base):
    """VOTE (51001): a candidate (``leader_id`` = ``local_id``) asks for a vote in ``term``."""

    ledger_end_index: int = -1
    ledger_end_term: int = -1

    def encode(self) -> bytes:
        return encode_body({**self._base(), "ledgerEndIndex": self.ledger_end_index,
                            "ledgerEndTerm": self.ledger_end_term})

    @classmethod
    def decode(cls, body: bytes) -> VoteRequest:
        obj = decode_body(body)
        return cls(**_base_kwargs(obj, True), ledger_end_index=_int(obj, "ledgerEndIndex", -1),
                   ledger_end_term=_int(obj, "ledgerEndTerm", -1))


@dataclass(slots=True)
class VoteResponse(_Base):
    """VOTE answer: the request's group/ids, the responder's term and its ``vote_result``."""

    vote_result: VoteResult = VoteResult.UNKNOWN

    def encode(self) -> bytes:
        return encode_body({**self._base(), "voteResult": self.vote_result.value})

    @classmethod
    def decode(cls, body: bytes) -> VoteResponse:
        obj = decode_body(body)
        raw = obj.get("voteResult", "UNKNOWN")
        try:
            result = VoteResult(raw)
        except ValueError:
            raise DLedgerProtocolError(f"unknown voteResult {raw!r}") from None
        return cls(**_base_kwargs(obj, False), vote_result=result)


# -- HEART_BEAT ----------------------------------------------------------------------------
@dataclass(slots=True)
class HeartBeatRequest(_Base):
    """HEART_BEAT (51002): the leader of ``term`` asserts its leadership."""

    @classmethod
    def decode(cls, body: bytes) -> HeartBeatRequest:
        return cls(**_base_kwargs(decode_body(body), True))


@dataclass(slots=True)
class HeartBeatResponse(_Base):
    """HEART_BEAT answer: only ``code`` and ``term`` unless the base fields were copied back."""

    @classmethod
    def decode(cls, body: bytes) -> HeartBeatResponse:
        return cls(**_base_kwargs(decode_body(body), False))


# -- PUSH ----------------------------------------------------------------------------------
def entry_to_json(entry: DLedgerEntry) -> dict[str, Any]:
    return {"body": base64.b64encode(entry.body).decode("ascii"), "bodyCrc": entry.body_crc,
            "chainCrc": entry.chain_crc, "channel": entry.channel, "index": entry.index, "magic": entry.magic,
            "pos": entry.pos, "size": entry.size, "term": entry.term}


def entry_from_json(obj: Any) -> DLedgerEntry:
    """A PUSH ``entry`` object as an entry.

    Raises:
        DLedgerProtocolError: missing or absurd fields, bad base64, or ``size`` ≠ 48 + body length.
    """
    if not isinstance(obj, dict):
        raise DLedgerProtocolError("entry must be an object")
    raw = obj.get("body", "")
    if type(raw) is not str or len(raw) > (MAX_BODY_SIZE * 4) // 3 + 4:
        raise DLedgerProtocolError("entry body must be a base64 string of bounded size")
    try:
        body = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        raise DLedgerProtocolError("entry body is not base64") from None
    entry = DLedgerEntry(index=_int(obj, "index", None, 0), term=_int(obj, "term", None, 0),
                         pos=_int(obj, "pos", None, 0), body=body, magic=_int(obj, "magic", 1, 1, 1),
                         channel=_int(obj, "channel", 0, -(1 << 31), (1 << 31) - 1),
                         chain_crc=_int(obj, "chainCrc", 0, -(1 << 31), (1 << 31) - 1),
                         body_crc=_int(obj, "bodyCrc", 0, -(1 << 31), (1 << 31) - 1))
    size = obj.get("size", entry.size)
    if size != entry.size:
        raise DLedgerProtocolError(f"entry size {size!r} is not 48 + {len(body)}")
    return entry


@dataclass(slots=True)
class PushRequest(_Base):
    """PUSH (51004) of the leader: ``type`` COMPARE / TRUNCATE / APPEND carry ``entry``, COMMIT none."""

    type: PushType = PushType.APPEND
    commit_index: int = -1
    entry: DLedgerEntry | None = None
    batch_entry: list[DLedgerEntry] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.batch_entry) if self.batch_entry else (1 if self.entry is not None else 0)

    @property
    def first_entry_index(self) -> int:
        if self.batch_entry:
            return self.batch_entry[0].index
        return self.entry.index if self.entry is not None else -1

    @property
    def last_entry_index(self) -> int:
        if self.batch_entry:
            return self.batch_entry[-1].index
        return self.entry.index if self.entry is not None else -1

    def encode(self) -> bytes:
        return encode_body({
            **self._base(), "batch": bool(self.batch_entry),
            "batchEntry": [entry_to_json(e) for e in self.batch_entry], "commitIndex": self.commit_index,
            "count": self.count, "entry": entry_to_json(self.entry) if self.entry is not None else None,
            "firstEntryIndex": self.first_entry_index, "lastEntryIndex": self.last_entry_index,
            "totalSize": sum(e.size for e in self.batch_entry), "type": self.type.value})

    @classmethod
    def decode(cls, body: bytes) -> PushRequest:
        obj = decode_body(body)
        raw_type = obj.get("type")
        try:
            push_type = PushType(raw_type)
        except ValueError:
            raise DLedgerProtocolError(f"unknown push type {raw_type!r}") from None
        entry = entry_from_json(obj["entry"]) if obj.get("entry") is not None else None
        batch = obj.get("batchEntry") or []
        if not isinstance(batch, list) or len(batch) > 10_000:
            raise DLedgerProtocolError("batchEntry must be a list of at most 10000 entries")
        req = cls(**_base_kwargs(obj, True), type=push_type, commit_index=_int(obj, "commitIndex", -1),
                  entry=entry, batch_entry=[entry_from_json(e) for e in batch])
        if push_type is not PushType.COMMIT and entry is None and not req.batch_entry:
            raise DLedgerProtocolError(f"{push_type.value} push without an entry")
        return req


@dataclass(slots=True)
class PushResponse:
    """PUSH answer: ``term`` echoes the request's, ``index``/``count`` its first entry and count,
    ``begin_index``/``end_index`` are the follower's ledger range after handling it."""

    code: int = 200
    group: str | None = None
    term: int = -1
    index: int | None = None
    count: int = 0
    begin_index: int = -1
    end_index: int = -1

    def encode(self) -> bytes:
        return encode_body({"beginIndex": self.begin_index, "code": self.code, "count": self.count,
                            "endIndex": self.end_index, "group": self.group, "index": self.index,
                            "term": self.term})

    @classmethod
    def decode(cls, body: bytes) -> PushResponse:
        obj = decode_body(body)
        index = obj.get("index")
        return cls(code=_code(obj), group=_str(obj, "group", False), term=_int(obj, "term", -1),
                   index=_int(obj, "index") if index is not None else None, count=_int(obj, "count", 0, 0),
                   begin_index=_int(obj, "beginIndex", -1), end_index=_int(obj, "endIndex", -1))


def response_command(request: RemotingCommand, body: bytes) -> RemotingCommand:
    """The remoting answer to a DLedger request: code 200 (always), the result in ``body``."""
    return request.response(200, body=body)
