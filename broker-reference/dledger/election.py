"""Elections of a DLedger member (Java ``DLedgerLeaderElector``; dledger-protocol.md §4): the
state loop (leader heartbeats and step-down, follower timeout, candidate vote rounds) and the
VOTE / HEART_BEAT receivers.

A candidate first campaigns in its current term and only moves to the next one after a "next
term" outcome or on hearing of a higher term; a vote or heartbeat of a higher term is answered
``TERM_NOT_READY`` while the receiver moves there; the log check (ledger end term, then index)
comes before the term check; the leader heartbeats every ``heart_beat_time_interval_ms`` and
steps down after ``max_heart_beat_leak`` intervals without a quorum; a follower campaigns after
as long without a heartbeat.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import random

from rocketmq_sdk.remoting.channel import Channel
from rocketmq_sdk.remoting.command import RemotingCommand

from .errors import now_ms as _now
from .member_state import Role
from .protocol import (
    DLedgerCode,
    DLedgerRequestCode,
    HeartBeatRequest,
    HeartBeatResponse,
    VoteRequest,
    VoteResponse,
    VoteResult,
)

__all__ = ["MAX_TERM", "Election"]

log = logging.getLogger("rocketmq_broker.dledger")

#: terms above are refused (411), never adopted, so that a member pushed up to it by a hostile
#: frame still has 2**32 elections of room below the Java long limit (real terms grow by one per
#: election)
MAX_TERM = (1 << 63) - (1 << 32)


class _Parse(enum.Enum):
    WAIT_TO_REVOTE = 0
    REVOTE_IMMEDIATELY = 1
    PASSED = 2
    WAIT_TO_VOTE_NEXT = 3


class Election:
    """The election part of :class:`~.node.DLedgerNode` (a mixin: the node holds the state)."""

    async def _state_loop(self) -> None:
        while self._running:
            try:
                role = self.state.role
                if role is Role.LEADER:
                    await self._maintain_leader()
                elif role is Role.FOLLOWER:
                    self._maintain_follower()
                else:
                    await self._maintain_candidate()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("dledger %s state loop", self.config.self_id)
            await self._sleep(self._wake, 10)

    def _maintain_follower(self) -> None:
        leak = self.config.heart_beat_time_interval_ms * self.config.max_heart_beat_leak
        if _now() - self.last_leader_heartbeat > leak:
            log.info("dledger %s: no heartbeat from %s for %d ms; campaigning", self.config.self_id,
                     self.state.leader_id, leak)
            self._change_to_candidate(self.term)

    async def _maintain_leader(self) -> None:
        cfg = self.config
        if _now() - self.last_send_heartbeat < cfg.heart_beat_time_interval_ms:
            return
        term = self.term
        self.last_send_heartbeat = _now()
        req = {p: HeartBeatRequest(group=cfg.group, remote_id=p, local_id=cfg.self_id, leader_id=cfg.self_id,
                                   term=term) for p in self.others}
        tasks = {asyncio.ensure_future(self._invoke(p, DLedgerRequestCode.HEART_BEAT, r.encode())): p
                 for p, r in req.items()}
        succ, not_ready, max_term, inconsistent = 1, 0, -1, False
        pending = set(tasks)
        deadline = _now() + cfg.heart_beat_time_interval_ms
        while pending and succ < cfg.quorum and _now() < deadline:
            done, pending = await asyncio.wait(pending, timeout=(deadline - _now()) / 1000.0,
                                               return_when=asyncio.FIRST_COMPLETED)
            for t in done:
                try:
                    resp = HeartBeatResponse.decode(t.result())
                except Exception:
                    self.peers_live[tasks[t]] = False
                    continue
                self.peers_live[tasks[t]] = resp.code == DLedgerCode.SUCCESS  # DLedger's peersLiveTable
                if resp.code == DLedgerCode.SUCCESS:
                    succ += 1
                elif resp.code == DLedgerCode.EXPIRED_TERM:
                    max_term = max(max_term, resp.term)
                elif resp.code == DLedgerCode.INCONSISTENT_LEADER:
                    inconsistent = True
                elif resp.code == DLedgerCode.TERM_NOT_READY:
                    not_ready += 1
        for t in pending:  # let late answers finish in the background, ignored
            self.peers_live[tasks[t]] = False
            t.add_done_callback(lambda f: f.exception() if not f.cancelled() else None)
        if self.state.role is not Role.LEADER or self.term != term:
            return
        if max_term > term:
            # a member is in a higher term (one that could not win, e.g. after a hostile frame):
            # Raft's rule, stricter than DLedger 0.3.1.2 (which ignores it while it has a quorum
            # and so never gets that member back): step down, the next election takes everyone there
            log.info("dledger %s: a member reports term %d > %d; stepping down", cfg.self_id, max_term, term)
            self._change_to_candidate(max_term)
        elif succ >= cfg.quorum:
            self.last_succ_heartbeat = _now()
        elif succ + not_ready >= cfg.quorum:
            self.last_send_heartbeat = -1.0
        elif inconsistent:
            self._change_to_candidate(term)
        elif _now() - self.last_succ_heartbeat > cfg.heart_beat_time_interval_ms * cfg.max_heart_beat_leak:
            log.info("dledger %s: no heartbeat quorum; stepping down", cfg.self_id)
            self._change_to_candidate(term)

    async def _maintain_candidate(self) -> None:
        cfg = self.config
        if _now() < self.next_vote_time and not self.need_increase_term:
            return
        st = self.state
        if st.role is not Role.CANDIDATE:
            return
        if self.last_parse is _Parse.WAIT_TO_VOTE_NEXT or self.need_increase_term:
            term = st.next_term()
            self.last_parse = _Parse.WAIT_TO_REVOTE  # as DLedger: one step per "next term" outcome
        else:
            term = st.curr_term
        handed_over = term == self.transfer.handed_over_term
        if self.need_increase_term or handed_over:
            self.need_increase_term = False
            self.next_vote_time = _now() + self._rand_vote_wait()
            if handed_over:  # the term this node handed to its transferee: let it win there first
                self.transfer.handed_over_term = -1
                self.next_vote_time += cfg.heart_beat_time_interval_ms * cfg.max_heart_beat_leak
            return
        end_index, end_term = self.ledger.end_index, self.ledger.end_term
        reqs = {p: VoteRequest(group=cfg.group, remote_id=p, local_id=cfg.self_id, leader_id=cfg.self_id,
                               term=term, ledger_end_index=end_index, ledger_end_term=end_term) for p in self.others}
        own = self._handle_vote(VoteRequest(group=cfg.group, remote_id=cfg.self_id, local_id=cfg.self_id,
                                            leader_id=cfg.self_id, term=term, ledger_end_index=end_index,
                                            ledger_end_term=end_term), own=True)
        results: list[VoteResponse] = [own]
        tasks = {asyncio.ensure_future(self._invoke(p, DLedgerRequestCode.VOTE, r.encode())) for p, r in reqs.items()}
        deadline = _now() + cfg.vote_wait_ms + random.randint(0, 999) * cfg.vote_wait_ms / 2000

        def counts() -> tuple[int, int, int, bool]:
            acc = sum(r.vote_result is VoteResult.ACCEPT for r in results)
            not_ready = sum(r.vote_result is VoteResult.REJECT_TERM_NOT_READY for r in results)
            valid = sum(r.vote_result is not VoteResult.UNKNOWN for r in results)
            has_leader = any(r.vote_result is VoteResult.REJECT_ALREADY_HAS_LEADER for r in results)
            return acc, not_ready, valid, has_leader

        pending = tasks
        while pending and _now() < deadline:
            acc, not_ready, _, has_leader = counts()
            if acc >= cfg.quorum or acc + not_ready >= cfg.quorum or has_leader:
                break
            done, pending = await asyncio.wait(pending, timeout=(deadline - _now()) / 1000.0,
                                               return_when=asyncio.FIRST_COMPLETED)
            for t in done:
                try:
                    results.append(VoteResponse.decode(t.result()))
                except Exception:
                    results.append(VoteResponse(vote_result=VoteResult.UNKNOWN))
        for t in pending:
            t.add_done_callback(lambda f: f.exception() if not f.cancelled() else None)
        if st.role is not Role.CANDIDATE or st.curr_term != term:
            return
        acc, not_ready, valid, has_leader = counts()
        bigger_ledger = sum(r.vote_result in (VoteResult.REJECT_EXPIRED_LEDGER_TERM,
                                              VoteResult.REJECT_SMALL_LEDGER_END_INDEX) for r in results)
        known_max = max([r.term for r in results if r.vote_result in (
            VoteResult.REJECT_EXPIRED_VOTE_TERM, VoteResult.REJECT_TERM_SMALL_THAN_LEDGER)], default=-1)
        rand = self._rand_vote_wait()
        if known_max > term:
            parse = _Parse.WAIT_TO_VOTE_NEXT
            self.next_vote_time = _now() + rand
            self._change_to_candidate(known_max)
        elif has_leader:
            parse = _Parse.WAIT_TO_REVOTE
            self.next_vote_time = _now() + rand + cfg.heart_beat_time_interval_ms * cfg.max_heart_beat_leak
        elif valid < cfg.quorum:
            parse = _Parse.WAIT_TO_REVOTE
            self.next_vote_time = _now() + rand
        elif valid - bigger_ledger < cfg.quorum:
            parse = _Parse.WAIT_TO_REVOTE
            self.next_vote_time = _now() + rand + cfg.max_vote_interval_ms
        elif acc >= cfg.quorum:
            parse = _Parse.PASSED
        elif acc + not_ready >= cfg.quorum:
            parse = _Parse.REVOTE_IMMEDIATELY
            self.next_vote_time = 0.0
        else:
            parse = _Parse.WAIT_TO_VOTE_NEXT
            self.next_vote_time = _now() + rand
        self.last_parse = parse
        log.debug("dledger %s: vote round term %d: %s (accept %d, not ready %d, valid %d)", cfg.self_id, term,
                  parse.name, acc, not_ready, valid)
        if parse is _Parse.PASSED:
            self._change_to_leader(term)
        elif parse is _Parse.REVOTE_IMMEDIATELY:
            self._wake.set()

    def _check_base(self, group: str | None, remote_id: str | None, term: int = 0) -> DLedgerCode | None:
        if remote_id != self.config.self_id:
            return DLedgerCode.UNKNOWN_MEMBER
        if group != self.config.group:
            return DLedgerCode.UNKNOWN_GROUP
        if term > MAX_TERM:
            # never adopted: a member there could not move to a next term that fits a Java long
            return DLedgerCode.UNEXPECTED_ARGUMENT
        return None

    def _on_vote(self, channel: Channel, cmd: RemotingCommand) -> RemotingCommand:
        req = VoteRequest.decode(cmd.body)
        bad = self._check_base(req.group, req.remote_id, req.term)
        if bad is not None:
            resp = VoteResponse(group=req.group, remote_id=req.remote_id, local_id=req.local_id,
                                leader_id=req.leader_id, term=req.term, code=int(bad))
        else:
            resp = self._handle_vote(req, own=False)
        return cmd.response(200, body=resp.encode())

    def _handle_vote(self, req: VoteRequest, own: bool) -> VoteResponse:
        st = self.state

        def answer(result: VoteResult, term: int | None = None) -> VoteResponse:
            return VoteResponse(group=req.group, remote_id=req.remote_id, local_id=req.local_id,
                                leader_id=req.leader_id, term=st.curr_term if term is None else term,
                                vote_result=result)

        if not st.is_member(req.leader_id):
            return answer(VoteResult.REJECT_UNKNOWN_LEADER)
        if not own and req.leader_id == self.config.self_id:
            return answer(VoteResult.REJECT_UNEXPECTED_LEADER)
        if req.ledger_end_term < self.ledger.end_term:
            return answer(VoteResult.REJECT_EXPIRED_LEDGER_TERM)
        if req.ledger_end_term == self.ledger.end_term and req.ledger_end_index < self.ledger.end_index:
            return answer(VoteResult.REJECT_SMALL_LEDGER_END_INDEX)
        if req.term < st.curr_term:
            return answer(VoteResult.REJECT_EXPIRED_VOTE_TERM)
        if req.term == st.curr_term:
            if st.vote_for is not None and st.vote_for != req.leader_id:
                return answer(VoteResult.REJECT_ALREADY_HAS_LEADER if st.leader_id is not None
                              else VoteResult.REJECT_ALREADY_VOTED)
        else:
            old = st.curr_term
            self._change_to_candidate(req.term)
            self.need_increase_term = True
            self._wake.set()
            return answer(VoteResult.REJECT_TERM_NOT_READY, old)
        if req.term < self.ledger.end_term:
            return answer(VoteResult.REJECT_TERM_SMALL_THAN_LEDGER, self.ledger.end_term)
        if not own and self.transfer.is_taking_leadership() and req.ledger_end_term == self.ledger.end_term \
                and self.ledger.end_index >= req.ledger_end_index:
            return answer(VoteResult.REJECT_TAKING_LEADERSHIP)  # a preferred member taking over
        st.set_vote(req.leader_id)  # type: ignore[arg-type]  # checked: a member
        return answer(VoteResult.ACCEPT)

    def _on_heartbeat(self, channel: Channel, cmd: RemotingCommand) -> RemotingCommand:
        req = HeartBeatRequest.decode(cmd.body)
        st = self.state
        bad = self._check_base(req.group, req.remote_id, req.term)
        if bad is not None:
            resp = HeartBeatResponse(group=req.group, remote_id=req.remote_id, local_id=req.local_id,
                                     leader_id=req.leader_id, term=req.term, code=int(bad))
        elif not st.is_member(req.leader_id):
            resp = HeartBeatResponse(code=DLedgerCode.UNKNOWN_MEMBER, term=st.curr_term)
        elif req.leader_id == self.config.self_id:
            resp = HeartBeatResponse(code=DLedgerCode.UNEXPECTED_MEMBER, term=st.curr_term)
        elif req.term < st.curr_term:
            resp = HeartBeatResponse(code=DLedgerCode.EXPIRED_TERM, term=st.curr_term)
        elif req.term == st.curr_term:
            if st.leader_id is None:
                self._change_to_follower(req.term, req.leader_id)  # type: ignore[arg-type]
                resp = HeartBeatResponse(code=DLedgerCode.SUCCESS)
            elif st.leader_id == req.leader_id:
                self.last_leader_heartbeat = _now()
                resp = HeartBeatResponse(code=DLedgerCode.SUCCESS)
            else:
                resp = HeartBeatResponse(code=DLedgerCode.INCONSISTENT_LEADER)
        else:
            self._change_to_candidate(req.term)
            self.need_increase_term = True
            self._wake.set()
            resp = HeartBeatResponse(code=DLedgerCode.TERM_NOT_READY)
        return cmd.response(200, body=resp.encode())
