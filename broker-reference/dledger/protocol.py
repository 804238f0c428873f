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
from dataclasses import dataclass, field
from typing import Any

from rocketmq_sdk.protocol.dledger import (
    DLedgerBase,
    DLedgerCode,
    DLedgerProtocolError,
    DLedgerRequestCode,
    LeadershipTransferRequest,
    LeadershipTransferResponse,
    MetadataRequest,
    MetadataResponse,
    base_kwargs,
    code_field,
    decode_body,
    encode_body,
    int_field,
    str_field,
)
from rocketmq_sdk.remoting.command import RemotingCommand

from .entry import MAX_BODY_SIZE, DLedgerEntry

__all__ = [
    "DLedgerCode",
    "DLedgerProtocolError",
    "DLedgerRequestCode",
    "HeartBeatRequest",
    "HeartBeatResponse",
    "LeadershipTransferRequest",
    "LeadershipTransferResponse",
    "MetadataRequest",
    "MetadataResponse",
    "PushRequest",
    "PushResponse",
    "PushType",
    "VoteRequest",
    "VoteResponse",
    "VoteResult",
    "decode_body",
    "encode_body",
]

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


# -- VOTE ----------------------------------------------------------------------------------
@dataclass(slots=True)
class VoteRequest(DLedgerBase):
    """VOTE (51001): a candidate (``leader_id`` = ``local_id``) asks for a vote in ``term``."""

    ledger_end_index: int = -1
    ledger_end_term: int = -1

    def encode(self) -> bytes:
        return encode_body({**self._base(), "ledgerEndIndex": self.ledger_end_index,
                            "ledgerEndTerm": self.ledger_end_term})

    @classmethod
    def decode(cls, body: bytes) -> VoteRequest:
        obj = decode_body(body)
        return cls(**base_kwargs(obj, True), ledger_end_index=int_field(obj, "ledgerEndIndex", -1),
                   ledger_end_term=int_field(obj, "ledgerEndTerm", -1))


@dataclass(slots=True)
class VoteResponse(DLedgerBase):
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
        return cls(**base_kwargs(obj, False), vote_result=result)


# -- HEART_BEAT ----------------------------------------------------------------------------
@dataclass(slots=True)
class HeartBeatRequest(DLedgerBase):
    """HEART_BEAT (51002): the leader of ``term`` asserts its leadership."""

    @classmethod
    def decode(cls, body: bytes) -> HeartBeatRequest:
        return cls(**base_kwargs(decode_body(body), True))


@dataclass(slots=True)
class HeartBeatResponse(DLedgerBase):
    """HEART_BEAT answer: only ``code`` and ``term`` unless the base fields were copied back."""

    @classmethod
    def decode(cls, body: bytes) -> HeartBeatResponse:
        return cls(**base_kwargs(decode_body(body), False))


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
    entry = DLedgerEntry(index=int_field(obj, "index", None, 0), term=int_field(obj, "term", None, 0),
                         pos=int_field(obj, "pos", None, 0), body=body, magic=int_field(obj, "magic", 1, 1, 1),
                         channel=int_field(obj, "channel", 0, -(1 << 31), (1 << 31) - 1),
                         chain_crc=int_field(obj, "chainCrc", 0, -(1 << 31), (1 << 31) - 1),
                         body_crc=int_field(obj, "bodyCrc", 0, -(1 << 31), (1 << 31) - 1))
    size = obj.get("size", entry.size)
    if size != entry.size:
        raise DLedgerProtocolError(f"entry size {size!r} is not 48 + {len(body)}")
    return entry


@dataclass(slots=True)
class PushRequest(DLedgerBase):
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
        req = cls(**base_kwargs(obj, True), type=push_type, commit_index=int_field(obj, "commitIndex", -1),
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
        return cls(code=code_field(obj), group=str_field(obj, "group", False), term=int_field(obj, "term", -1),
                   index=int_field(obj, "index") if index is not None else None, count=int_field(obj, "count", 0, 0),
                   begin_index=int_field(obj, "beginIndex", -1), end_index=int_field(obj, "endIndex", -1))


def response_command(request: RemotingCommand, body: bytes) -> RemotingCommand:
    """The remoting answer to a DLedger request: code 200 (always), the result in ``body``."""
    return request.response(200, body=body)
