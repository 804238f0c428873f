"""Role, term and vote of one member (Java ``MemberState``; dledger-protocol.md §4.1).

``<root>/dledger-<selfId>/currterm`` is a properties file ``voteLeader=<id or empty>`` /
``currTerm=<n>``, rewritten when the term changes (vote cleared) and when a vote is recorded.
"""

from __future__ import annotations

import enum
import logging
import os

from rocketmq_sdk.properties import read_properties

__all__ = ["MemberState", "Role"]

log = logging.getLogger("rocketmq_broker.dledger")


class Role(enum.Enum):
    CANDIDATE = "CANDIDATE"
    FOLLOWER = "FOLLOWER"
    LEADER = "LEADER"


class MemberState:
    """Current term, vote, role and known leader of a member.

    Args:
        self_id: own member id; peers: every member id (self included).
        path: the ``currterm`` file (read now, when present).
    """

    def __init__(self, self_id: str, peers: list[str], path: str) -> None:
        self.self_id = self_id
        self.peers = list(peers)
        self.path = path
        self.role = Role.CANDIDATE
        self.leader_id: str | None = None
        self.curr_term = 0
        self.vote_for: str | None = None
        self.known_max_term = -1
        if os.path.exists(path):
            props = read_properties(path)
            try:
                self.curr_term = max(0, int(props.get("currTerm", "0")))
            except ValueError:
                log.warning("dledger: %s has no valid currTerm; starting at term 0", path)
            vote = props.get("voteLeader") or None
            self.vote_for = vote if vote in self.peers else None

    def persist(self) -> None:
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        tmp = self.path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(f"voteLeader={self.vote_for or ''}\ncurrTerm={self.curr_term}\n")
        os.replace(tmp, self.path)

    def is_member(self, member_id: str | None) -> bool:
        return member_id in self.peers

    def next_term(self) -> int:
        """Enter the next term: the highest term heard of if above the current one, else current
        + 1; the vote is cleared and persisted."""
        self.curr_term = self.known_max_term if self.known_max_term > self.curr_term else self.curr_term + 1
        self.vote_for = None
        self.persist()
        return self.curr_term

    def set_vote(self, member_id: str) -> None:
        self.vote_for = member_id
        self.persist()

    def to_candidate(self) -> None:
        self.role = Role.CANDIDATE
        self.leader_id = None

    def to_leader(self) -> None:
        self.role = Role.LEADER
        self.leader_id = self.self_id

    def to_follower(self, term: int, leader_id: str) -> None:
        if term != self.curr_term:
            self.curr_term = term
            self.vote_for = None
            self.persist()
        self.role = Role.FOLLOWER
        self.leader_id = leader_id
