"""DLedger settings (dledger-protocol.md §11): the broker.conf keys of DLedger mode and the
timers DLedger 0.3.1.2 fixes (here settable, under DLedgerConfig's Java names, for tests)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from rocketmq_sdk.protocol.dledger import parse_peers

from ..store.config import StoreConfig

__all__ = ["DLedgerConfig", "member_number", "parse_peers"]

_ID = re.compile(r"^[A-Za-z][0-9]{1,6}$")


def member_number(self_id: str) -> int:
    """The number of a member id (``n2`` → 2): the broker registers as ``number + 1`` when not
    leader (DLedgerRoleChangeHandler parses ``dLegerSelfId`` without its first character).

    Raises:
        ValueError: not a letter followed by digits.
    """
    if not _ID.match(self_id):
        raise ValueError(f"dLegerSelfId must be a letter followed by digits, got {self_id!r}")
    return int(self_id[1:])


@dataclass
class DLedgerConfig:
    """Settings of one DLedger member (times in ms; defaults are DLedger 0.3.1.2's).

    Attributes:
        group: ``dLegerGroup``; self_id: ``dLegerSelfId``; peers: parsed ``dLegerPeers``.
        heart_beat_time_interval_ms: leader heartbeat period (2000).
        max_heart_beat_leak: heartbeats missed before a follower campaigns / a leader steps down (3).
        min_vote_interval_ms / max_vote_interval_ms: random wait between vote rounds (300 / 1000).
        vote_wait_ms: base wait for vote replies, plus random 0..999 (2000).
        rpc_timeout_ms: every DLedger RPC (3000).
        max_wait_ack_time_ms: an append without a quorum fails after this (2500).
        max_push_timeout_ms: an unanswered APPEND push is resent after this (1000).
        commit_push_interval_ms: idle COMMIT push period per follower (1000).
        max_pending_requests_num: pending appends on the leader (10000).
        max_pending_pushes: outstanding APPEND pushes per follower (1000).
        max_push_queue: follower queue of COMPARE/TRUNCATE/COMMIT pushes (1024).
        checkpoint_interval_ms: ``checkpoint`` file write period (3000).
        error_sleep_ms: dispatcher back-off after an error (500).
        max_leadership_transfer_wait_index: a transfer is refused (FALL_BEHIND_TOO_MUCH) when the
            transferee is this many entries or more behind the leader (1000).
        leadership_transfer_wait_timeout_ms: how long the transferee waits to catch up with the
            leader's log before it refuses to take leadership (TAKE_LEADERSHIP_FAILED) (1000).
        preferred_leader_ids: ``preferredLeaderId`` (member ids separated by ``;``, "" for none):
            a leader that is not one of them hands its leadership (a leadership transfer, checked
            every second) to the one least behind, once it is online and less than
            ``max_leadership_transfer_wait_index`` entries behind; a preferred member taking
            leadership votes 30–100 ms apart and is not out-voted by an equally up-to-date one.
        enable_batch_push: ``enableBatchPush``: the leader sends APPEND pushes with a
            ``batchEntry`` list, closed once it holds ``max_batch_push_size`` bytes (4096) or the
            log's end is reached (False: one entry a push). Members accept both either way.
    """

    group: str
    self_id: str
    peers: dict[str, str]
    # the timers a broker configures (StoreConfig's keys) default to StoreConfig's values: one source
    heart_beat_time_interval_ms: int = StoreConfig.heart_beat_time_interval_ms
    max_heart_beat_leak: int = StoreConfig.max_heart_beat_leak
    min_vote_interval_ms: int = StoreConfig.min_vote_interval_ms
    max_vote_interval_ms: int = StoreConfig.max_vote_interval_ms
    vote_wait_ms: int = 2000
    rpc_timeout_ms: int = 3000
    max_wait_ack_time_ms: int = StoreConfig.max_wait_ack_time_ms
    max_push_timeout_ms: int = StoreConfig.max_push_time_out_ms
    commit_push_interval_ms: int = 1000
    max_pending_requests_num: int = 10000
    max_pending_pushes: int = 1000
    max_push_queue: int = 1024
    checkpoint_interval_ms: int = 3000
    error_sleep_ms: int = 500
    max_leadership_transfer_wait_index: int = 1000
    leadership_transfer_wait_timeout_ms: int = 1000
    preferred_leader_ids: str = ""
    min_take_leadership_vote_interval_ms: int = 30
    max_take_leadership_vote_interval_ms: int = 100
    enable_batch_push: bool = StoreConfig.enable_batch_push
    max_batch_push_size: int = 4096
    extra: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        member_number(self.self_id)
        if not self.group or len(self.group) > 255:
            raise ValueError(f"dLegerGroup must be 1..255 characters, got {self.group!r}")
        if self.self_id not in self.peers:
            raise ValueError(f"dLegerSelfId {self.self_id!r} is not in dLegerPeers {sorted(self.peers)}")

    @property
    def preferred_leaders(self) -> list[str]:
        """The members of ``preferred_leader_ids`` (unknown ids left out)."""
        return [i for i in (p.strip() for p in self.preferred_leader_ids.split(";")) if i in self.peers]

    @property
    def quorum(self) -> int:
        """⌊members / 2⌋ + 1."""
        return len(self.peers) // 2 + 1

    @property
    def self_addr(self) -> str:
        return self.peers[self.self_id]

    def scaled(self, factor: float) -> DLedgerConfig:
        """A copy with every timer multiplied by ``factor`` (tests run elections in a fraction of the time)."""
        names = ("heart_beat_time_interval_ms", "min_vote_interval_ms", "max_vote_interval_ms", "vote_wait_ms",
                 "rpc_timeout_ms", "max_wait_ack_time_ms", "max_push_timeout_ms", "commit_push_interval_ms",
                 "checkpoint_interval_ms", "error_sleep_ms")
        values = {n: max(1, int(getattr(self, n) * factor)) for n in names}
        return DLedgerConfig(self.group, self.self_id, dict(self.peers), max_heart_beat_leak=self.max_heart_beat_leak,
                             max_pending_requests_num=self.max_pending_requests_num,
                             max_leadership_transfer_wait_index=self.max_leadership_transfer_wait_index,
                             leadership_transfer_wait_timeout_ms=self.leadership_transfer_wait_timeout_ms,
                             enable_batch_push=self.enable_batch_push, max_batch_push_size=self.max_batch_push_size,
                             preferred_leader_ids=self.preferred_leader_ids,
                             max_pending_pushes=self.max_pending_pushes, max_push_queue=self.max_push_queue, **values)
