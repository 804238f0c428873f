"""One DLedger member on the broker's event loop (dledger-protocol.md §4, §6, §7).

* Election (Java ``DLedgerLeaderElector``): a candidate first campaigns in its current term and
  only moves to the next one after a "next term" outcome or on hearing of a higher term; a vote
  or heartbeat of a higher term is answered ``TERM_NOT_READY`` while the receiver moves there;
  the log check (ledger end term, then index) comes before the term check; the leader
  heartbeats every ``heart_beat_time_interval_ms`` and steps down after ``max_heart_beat_leak``
  intervals without a quorum; a follower campaigns after as long without a heartbeat.
* Replication (``DLedgerEntryPusher``): one dispatcher per follower, COMPARE → TRUNCATE → APPEND
  (one entry per PUSH, pipelined) → idle COMMIT pushes; the commit index is the water mark held
  by a majority (no current-term rule); appends wait for it up to ``max_wait_ack_time_ms``.
* Follower side: PUSHes are applied in index order at exactly ``entry.pos``; COMPARE/TRUNCATE/
  COMMIT are only handled by a FOLLOWER (else ``405 NOT_FOLLOWER``).

The broker appends in-process (:meth:`DLedgerNode.append`); no APPEND RPC crosses the wire.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import enum
import logging
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from rocketmq_sdk.remoting.channel import Channel
from rocketmq_sdk.remoting.client import RemotingClient
from rocketmq_sdk.remoting.command import RemotingCommand
from rocketmq_sdk.remoting.server import RemotingServer

from .config import DLedgerConfig
from .entry import DLedgerEntry
from .ledger import DLedgerLedger, LedgerError
from .member_state import MemberState, Role
from .protocol import (
    DLedgerCode,
    DLedgerRequestCode,
    HeartBeatRequest,
    HeartBeatResponse,
    PushRequest,
    PushResponse,
    PushType,
    VoteRequest,
    VoteResponse,
    VoteResult,
)

__all__ = ["AppendError", "DLedgerNode", "Role"]

log = logging.getLogger("rocketmq_broker.dledger")

MAX_QUEUED_APPENDS = 10_000  # follower: APPEND pushes waiting for their turn
#: terms above are refused (411), never adopted, so that a member pushed up to it by a hostile
#: frame still has 2**32 elections of room below the Java long limit (real terms grow by one per
#: election)
MAX_TERM = (1 << 63) - (1 << 32)


def _now() -> float:
    return time.monotonic() * 1000.0


class AppendError(Exception):
    """An append refused or failed (``code``: a :class:`DLedgerCode`)."""

    def __init__(self, code: DLedgerCode, message: str = "") -> None:
        super().__init__(f"{code.name} ({int(code)}){': ' + message if message else ''}")
        self.code = code


class _Parse(enum.Enum):
    WAIT_TO_REVOTE = 0
    REVOTE_IMMEDIATELY = 1
    PASSED = 2
    WAIT_TO_VOTE_NEXT = 3


class _PushState(enum.Enum):
    COMPARE = 0
    TRUNCATE = 1
    APPEND = 2


@dataclass
class _Dispatcher:
    peer: str
    term: int = -1
    state: _PushState = _PushState.COMPARE
    compare_index: int = -1
    write_index: int = 0
    pending: dict[int, float] = field(default_factory=dict)  # index → send time (ms)
    last_commit_push: float = 0.0
    wake: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class _Pending:
    future: asyncio.Future
    term: int
    created: float


RoleListener = Callable[[Role, int, "str | None"], None]
CommitListener = Callable[[int], None]


class DLedgerNode:
    """A DLedger member: server, client, election, replication.

    Args:
        config: the member's settings.
        ledger: its log (loaded by :meth:`start` if not yet).
        on_role_change: ``f(role, term, leader_id)`` at every role change (on the loop).
        on_commit: ``f(committed_index)`` whenever the committed index moves (on the loop).
    """

    def __init__(self, config: DLedgerConfig, ledger: DLedgerLedger, *, on_role_change: RoleListener | None = None,
                 on_commit: CommitListener | None = None) -> None:
        self.config = config
        self.ledger = ledger
        self.state = MemberState(config.self_id, list(config.peers), os.path.join(ledger.base_dir, "currterm"))
        self.on_role_change = on_role_change
        self.on_commit = on_commit
        self.server = RemotingServer(name=f"dledger-{config.self_id}")
        self.server.register_processor(DLedgerRequestCode.VOTE, self._on_vote)
        self.server.register_processor(DLedgerRequestCode.HEART_BEAT, self._on_heartbeat)
        self.server.register_processor(DLedgerRequestCode.PUSH, self._on_push)
        self.client = RemotingClient(connect_timeout_ms=config.rpc_timeout_ms)
        self.others = [p for p in config.peers if p != config.self_id]
        self.port = 0
        self._tasks: list[asyncio.Task] = []
        self._running = False
        self._wake = asyncio.Event()
        # election
        self.need_increase_term = False
        self.next_vote_time = 0.0
        self.last_parse = _Parse.WAIT_TO_REVOTE
        self.last_leader_heartbeat = 0.0
        self.last_send_heartbeat = -1.0
        self.last_succ_heartbeat = 0.0
        # leader
        self.water_marks: dict[str, int] = {}
        self.water_mark_term = -1
        self.pending: dict[int, _Pending] = {}
        self.dispatchers = {p: _Dispatcher(p) for p in self.others}
        # follower
        self.append_queue: dict[int, tuple[PushRequest, asyncio.Future, float]] = {}
        self.other_queue: collections.deque[tuple[PushRequest, asyncio.Future]] = collections.deque()
        self._follower_wake = asyncio.Event()
        self._last_abnormal_check = 0.0

    # -- lifecycle --------------------------------------------------------------------------
    @property
    def role(self) -> Role:
        return self.state.role

    @property
    def term(self) -> int:
        return self.state.curr_term

    @property
    def leader_id(self) -> str | None:
        return self.state.leader_id

    @property
    def is_leader(self) -> bool:
        return self.state.role is Role.LEADER

    async def start(self, host: str | None = None) -> int:
        """Listen on the own ``dLegerPeers`` address (the ledger must be loaded) and start the
        state, dispatch, follower and checkpoint loops; returns the bound port."""
        h, p = self.config.self_addr.rsplit(":", 1)
        self.port = await self.server.start(host or h.strip("[]"), int(p))
        self._running = True
        self.last_leader_heartbeat = _now()
        self.next_vote_time = _now() + self._rand_vote_wait()
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._state_loop()), loop.create_task(self._follower_loop()),
                       loop.create_task(self._housekeeping_loop())]
        self._tasks += [loop.create_task(self._dispatch_loop(d)) for d in self.dispatchers.values()]
        log.info("dledger %s of group %s listening on %d (term %d, ledger end %d)", self.config.self_id,
                 self.config.group, self.port, self.term, self.ledger.end_index)
        return self.port

    async def stop(self) -> None:
        """Stop the loops and the server, write the checkpoint; the ledger stays open."""
        self._running = False
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self._tasks = []
        await self.server.stop()
        await self.client.close()
        with contextlib.suppress(OSError):
            self.ledger.write_checkpoint()

    # -- helpers ----------------------------------------------------------------------------
    def _rand_vote_wait(self) -> float:
        return random.randint(self.config.min_vote_interval_ms, self.config.max_vote_interval_ms)

    def _notify_role(self) -> None:
        log.info("dledger %s: %s in term %d (leader %s)", self.config.self_id, self.state.role.value, self.term,
                 self.state.leader_id)
        if self.on_role_change is not None:
            try:
                self.on_role_change(self.state.role, self.term, self.state.leader_id)
            except Exception:
                log.exception("dledger role listener failed")

    def _change_to_candidate(self, term: int) -> None:
        if term < self.state.curr_term:
            return
        self.state.known_max_term = max(self.state.known_max_term, term)
        was = self.state.role
        self.state.to_candidate()
        if was is not Role.CANDIDATE:
            self._notify_role()
        self._wake.set()

    def _change_to_leader(self, term: int) -> None:
        if term != self.state.curr_term:
            return
        self.state.to_leader()
        self.last_send_heartbeat = -1.0
        self.last_succ_heartbeat = _now()
        # futures of an older term complete with TERM_CHANGED once this node leads again
        for index, p in list(self.pending.items()):
            if p.term != term:
                self._complete(index, DLedgerCode.TERM_CHANGED)
        self._notify_role()
        for d in self.dispatchers.values():
            d.wake.set()
        self._wake.set()

    def _change_to_follower(self, term: int, leader_id: str) -> None:
        if term < self.state.curr_term:
            return
        self.state.to_follower(term, leader_id)
        self.last_leader_heartbeat = _now()
        self._notify_role()
        self._follower_wake.set()

    async def _invoke(self, peer: str, code: int, body: bytes) -> bytes:
        cmd = RemotingCommand.request(code, body=body)
        resp = await self.client.invoke(self.config.peers[peer], cmd, self.config.rpc_timeout_ms)
        if resp.code != 200:
            raise AppendError(DLedgerCode.INTERNAL_ERROR, f"remoting code {resp.code} from {peer}: {resp.remark}")
        return resp.body

    async def _sleep(self, event: asyncio.Event, ms: float) -> None:
        event.clear()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(event.wait(), max(0.001, ms / 1000.0))

    # -- the state loop ---------------------------------------------------------------------
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
                    continue
                if resp.code == DLedgerCode.SUCCESS:
                    succ += 1
                elif resp.code == DLedgerCode.EXPIRED_TERM:
                    max_term = max(max_term, resp.term)
                elif resp.code == DLedgerCode.INCONSISTENT_LEADER:
                    inconsistent = True
                elif resp.code == DLedgerCode.TERM_NOT_READY:
                    not_ready += 1
        for t in pending:  # let late answers finish in the background, ignored
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
        else:
            term = st.curr_term
        if self.need_increase_term:
            self.need_increase_term = False
            self.next_vote_time = _now() + self._rand_vote_wait()
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

    # -- vote and heartbeat receivers -------------------------------------------------------
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

    # -- leader: appends, water marks, commit -----------------------------------------------
    def append(self, body_size: int, build: Callable[[int], bytes]) -> tuple[DLedgerEntry, asyncio.Future]:
        """Append one entry as leader (in-process, the broker's put). ``build(physical_offset)``
        returns the message record (``body_size`` bytes) with PHYSICALOFFSET = entry pos + 48.

        Returns the stored entry and a future completed with :attr:`DLedgerCode.SUCCESS` once a
        majority holds it, or an :class:`AppendError` (WAIT_QUORUM_ACK_TIMEOUT after
        ``max_wait_ack_time_ms``, TERM_CHANGED).

        Raises:
            AppendError: NOT_LEADER, LEADER_PENDING_FULL, or DISK_ERROR (nothing appended).
        """
        if self.state.role is not Role.LEADER:
            raise AppendError(DLedgerCode.NOT_LEADER)
        if len(self.pending) >= self.config.max_pending_requests_num:
            raise AppendError(DLedgerCode.LEADER_PENDING_FULL)
        pos = self.ledger.next_pos(body_size)
        body = build(pos + 48)
        if len(body) != body_size:
            raise AppendError(DLedgerCode.UNEXPECTED_ARGUMENT, f"record of {len(body)} bytes, announced {body_size}")
        try:
            entry = self.ledger.append(DLedgerEntry(self.ledger.end_index + 1, self.term, pos, body))
        except (LedgerError, OSError) as exc:
            raise AppendError(DLedgerCode.DISK_ERROR, str(exc)) from exc
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        self.pending[entry.index] = _Pending(fut, self.term, _now())
        self._update_water_mark(self.term, self.config.self_id, entry.index)
        for d in self.dispatchers.values():
            d.wake.set()
        self._check_quorum()
        return entry, fut

    def _update_water_mark(self, term: int, peer: str, index: int) -> None:
        if term != self.water_mark_term:
            if term < self.water_mark_term:
                return
            self.water_mark_term, self.water_marks = term, {}
        if index > self.water_marks.get(peer, -1):
            self.water_marks[peer] = index

    def _check_quorum(self) -> None:
        if self.state.role is not Role.LEADER:
            return
        term = self.term
        self._update_water_mark(term, self.config.self_id, self.ledger.end_index)
        if self.water_mark_term != term:
            return
        marks = sorted((self.water_marks.get(p, -1) for p in self.config.peers), reverse=True)
        quorum_index = marks[len(marks) // 2]
        if quorum_index >= 0 and self.ledger.update_committed(quorum_index):
            committed = self.ledger.committed_index
            for index in [i for i in self.pending if i <= committed]:
                self._complete(index, DLedgerCode.SUCCESS)
            self._notify_commit()

    def _complete(self, index: int, code: DLedgerCode) -> None:
        p = self.pending.pop(index, None)
        if p is None or p.future.done():
            return
        if code is DLedgerCode.SUCCESS:
            p.future.set_result(code)
        else:
            p.future.set_exception(AppendError(code))

    def leader_caught_up(self) -> bool:
        """Leader whose own log is fully committed (the broker switches to master only then)."""
        return self.state.role is Role.LEADER and self.ledger.committed_index == self.ledger.end_index

    # -- leader: one dispatcher per follower ------------------------------------------------
    async def _dispatch_loop(self, d: _Dispatcher) -> None:
        cfg = self.config
        while self._running:
            try:
                if self.state.role is not Role.LEADER:
                    d.term = -1
                    await self._sleep(d.wake, cfg.heart_beat_time_interval_ms)
                    continue
                if d.term != self.term:
                    d.term, d.state, d.compare_index = self.term, _PushState.COMPARE, -1
                    d.pending.clear()
                if d.state is not _PushState.APPEND:
                    if not await self._do_compare(d):
                        await self._sleep(d.wake, cfg.heart_beat_time_interval_ms)
                    continue
                if not self._do_append(d):
                    await self._sleep(d.wake, min(cfg.commit_push_interval_ms, cfg.max_push_timeout_ms) / 2)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.debug("dledger %s → %s dispatch: %s", cfg.self_id, d.peer, exc)
                d.state = _PushState.COMPARE
                await asyncio.sleep(cfg.error_sleep_ms / 1000.0)

    def _push(self, d: _Dispatcher, push_type: PushType, entry: DLedgerEntry | None) -> PushRequest:
        cfg = self.config
        return PushRequest(group=cfg.group, remote_id=d.peer, local_id=cfg.self_id, leader_id=cfg.self_id,
                           term=d.term, type=push_type, commit_index=self.ledger.committed_index, entry=entry)

    async def _send_push(self, d: _Dispatcher, req: PushRequest) -> PushResponse:
        return PushResponse.decode(await self._invoke(d.peer, DLedgerRequestCode.PUSH, req.encode()))

    async def _do_compare(self, d: _Dispatcher) -> bool:
        """One COMPARE (and maybe TRUNCATE) exchange; False when the leader's log is empty."""
        ledger = self.ledger
        if ledger.end_index < 0:
            return False
        begin, end = ledger.begin_index, ledger.end_index
        if d.compare_index == -1 or not begin <= d.compare_index <= end:
            d.compare_index = end
        resp = await self._send_push(d, self._push(d, PushType.COMPARE, ledger.get(d.compare_index)))
        if d.term != self.term or self.state.role is not Role.LEADER:
            return True
        if resp.code not in (DLedgerCode.SUCCESS, DLedgerCode.INCONSISTENT_STATE):
            raise AppendError(DLedgerCode(resp.code) if resp.code in DLedgerCode._value2member_map_
                              else DLedgerCode.UNKNOWN, f"compare answered by {d.peer}")
        truncate = -1
        begin, end = ledger.begin_index, ledger.end_index
        if resp.code == DLedgerCode.SUCCESS:
            if d.compare_index == resp.end_index:
                self._to_append(d, d.compare_index)
                return True
            truncate = d.compare_index
        elif resp.end_index < begin or resp.begin_index > end:
            truncate = begin
        elif d.compare_index < resp.begin_index:
            truncate = begin
        elif d.compare_index > resp.end_index:
            d.compare_index = resp.end_index
        else:
            d.compare_index -= 1
        if d.compare_index < begin:
            truncate = begin
        if truncate != -1:
            d.state = _PushState.TRUNCATE
            resp = await self._send_push(d, self._push(d, PushType.TRUNCATE, ledger.get(truncate)))
            if resp.code != DLedgerCode.SUCCESS:
                raise AppendError(DLedgerCode.INCONSISTENT_STATE, f"truncate refused by {d.peer}: {resp.code}")
            d.last_commit_push = _now()
            self._to_append(d, truncate)
        return True

    def _to_append(self, d: _Dispatcher, index: int) -> None:
        d.state, d.compare_index, d.write_index = _PushState.APPEND, -1, index + 1
        d.pending.clear()
        self._update_water_mark(d.term, d.peer, index)
        self._check_quorum()

    def _do_append(self, d: _Dispatcher) -> bool:
        """Send what is due; False when there is nothing to send now."""
        cfg, ledger = self.config, self.ledger
        now = _now()
        mark = self.water_marks.get(d.peer, -1) if self.water_mark_term == d.term else -1
        for i in [i for i in d.pending if i <= mark]:
            del d.pending[i]
        sent = False
        resend = d.pending.get(mark + 1)
        if resend is not None and now - resend > cfg.max_push_timeout_ms:
            self._append_push(d, mark + 1)
            sent = True
        while d.write_index <= ledger.end_index and len(d.pending) < cfg.max_pending_pushes:
            self._append_push(d, d.write_index)
            d.write_index += 1
            sent = True
        if not sent and d.write_index > ledger.end_index and now - d.last_commit_push > cfg.commit_push_interval_ms:
            d.last_commit_push = now
            task = asyncio.ensure_future(self._send_push(d, self._push(d, PushType.COMMIT, None)))
            task.add_done_callback(lambda f: self._on_commit_answer(d, f))
        return sent

    def _on_commit_answer(self, d: _Dispatcher, fut: asyncio.Future) -> None:
        """A follower whose log ends below its water mark lost entries (a store wiped while the
        leader had nothing new to push): compare again at once instead of waiting for the next
        append to hit the gap (DLedger 0.3.1.2 ignores COMMIT answers)."""
        if fut.cancelled() or fut.exception() is not None or d.state is not _PushState.APPEND:
            return
        resp: PushResponse = fut.result()
        mark = self.water_marks.get(d.peer, -1) if self.water_mark_term == d.term else -1
        if resp.code == DLedgerCode.SUCCESS and resp.end_index < mark and resp.term == d.term:
            log.warning("dledger %s: %s holds %d entries less than acknowledged; comparing again",
                        self.config.self_id, d.peer, mark - resp.end_index)
            self.water_marks[d.peer] = resp.end_index
            d.state, d.compare_index = _PushState.COMPARE, -1
            d.pending.clear()
            d.wake.set()

    def _append_push(self, d: _Dispatcher, index: int) -> None:
        d.pending[index] = _now()
        req = self._push(d, PushType.APPEND, self.ledger.get(index))
        task = asyncio.ensure_future(self._send_push(d, req))
        task.add_done_callback(lambda f: self._on_append_answer(d, req, f))

    def _on_append_answer(self, d: _Dispatcher, req: PushRequest, fut: asyncio.Future) -> None:
        if fut.cancelled() or fut.exception() is not None or d.term != req.term or d.state is not _PushState.APPEND:
            return
        resp: PushResponse = fut.result()
        if resp.code == DLedgerCode.SUCCESS:
            d.pending.pop(req.first_entry_index, None)
            self._update_water_mark(req.term, d.peer, req.last_entry_index)
            self._check_quorum()
            d.wake.set()
        elif resp.code == DLedgerCode.INCONSISTENT_STATE:
            log.info("dledger %s: %s answered 406 to APPEND %d; comparing again", self.config.self_id, d.peer,
                     req.first_entry_index)
            d.state, d.compare_index = _PushState.COMPARE, -1
            d.pending.clear()
            d.wake.set()

    # -- follower: the push queue -----------------------------------------------------------
    def _push_response(self, req: PushRequest, code: DLedgerCode | int) -> PushResponse:
        return PushResponse(code=int(code), group=req.group, term=req.term,
                            index=req.first_entry_index if req.type is not PushType.COMMIT else None,
                            count=req.count, begin_index=self.ledger.begin_index, end_index=self.ledger.end_index)

    def _on_push(self, channel: Channel, cmd: RemotingCommand) -> RemotingCommand | asyncio.Future:
        req = PushRequest.decode(cmd.body)
        bad = self._check_base(req.group, req.remote_id, req.term)
        if bad is None and req.batch_entry:
            bad = DLedgerCode.UNSUPPORTED  # enableBatchPush is off in 4.9.8
        if bad is None and req.type is PushType.APPEND and req.first_entry_index > self.ledger.end_index + MAX_QUEUED_APPENDS:
            bad = DLedgerCode.UNEXPECTED_ARGUMENT  # absurd index: would never be applied
        if bad is not None:
            return cmd.response(200, body=self._push_response(req, bad).encode())
        loop = asyncio.get_running_loop()
        fut: asyncio.Future = loop.create_future()
        if req.type is PushType.APPEND:
            index = req.first_entry_index
            if index in self.append_queue:
                return cmd.response(200, body=self._push_response(req, DLedgerCode.REPEATED_PUSH).encode())
            if len(self.append_queue) >= MAX_QUEUED_APPENDS:
                return cmd.response(200, body=self._push_response(req, DLedgerCode.PUSH_REQUEST_IS_FULL).encode())
            self.append_queue[index] = (req, fut, _now())
        else:
            if len(self.other_queue) >= self.config.max_push_queue:
                return cmd.response(200, body=self._push_response(req, DLedgerCode.PUSH_REQUEST_IS_FULL).encode())
            if req.type is not PushType.COMMIT:
                for _, f, _ in self.append_queue.values():  # discarded, never answered
                    f.cancel()
                self.append_queue.clear()
            self.other_queue.append((req, fut))
        self._follower_wake.set()
        out: asyncio.Future = loop.create_future()

        def done(f: asyncio.Future) -> None:
            if f.cancelled():
                out.cancel()
            else:
                out.set_result(cmd.response(200, body=f.result().encode()))
        fut.add_done_callback(done)
        return out

    async def _follower_loop(self) -> None:
        while self._running:
            try:
                worked = self._follower_step()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("dledger %s follower loop", self.config.self_id)
                worked = False
            if worked:
                await asyncio.sleep(0)
            else:
                await self._sleep(self._follower_wake, 100)

    def _follower_step(self) -> bool:
        if self.other_queue:
            req, fut = self.other_queue.popleft()
            if fut.done():
                return True
            if self.state.role is not Role.FOLLOWER:
                fut.set_result(self._push_response(req, DLedgerCode.NOT_FOLLOWER))
            elif req.type is PushType.COMPARE:
                fut.set_result(self._handle_compare(req))
            elif req.type is PushType.TRUNCATE:
                fut.set_result(self._handle_truncate(req))
            else:
                self._follow_commit(req)
                fut.set_result(self._push_response(req, DLedgerCode.SUCCESS))
            return True
        item = self.append_queue.pop(self.ledger.end_index + 1, None)
        if item is not None:
            req, fut, _ = item
            if not fut.done():
                fut.set_result(self._handle_append(req))
            return True
        self._check_abnormal()
        return False

    def _follow_commit(self, req: PushRequest) -> None:
        if req.term < self.term:
            return
        if self.ledger.update_committed(min(req.commit_index, self.ledger.end_index)):
            self._notify_commit()

    def _notify_commit(self) -> None:
        if self.on_commit is not None:
            try:
                self.on_commit(self.ledger.committed_index)
            except Exception:
                log.exception("dledger commit listener failed")

    def _valid_from_leader(self, req: PushRequest) -> bool:
        st = self.state
        return st.role is Role.FOLLOWER and req.term == st.curr_term and req.leader_id == st.leader_id

    def _handle_append(self, req: PushRequest) -> PushResponse:
        entry = req.entry
        if entry is None or not self._valid_from_leader(req) or entry.index != self.ledger.end_index + 1:
            return self._push_response(req, DLedgerCode.INCONSISTENT_STATE)
        return self._apply(req, "APPEND", self.ledger.append)

    def _apply(self, req: PushRequest, what: str, op: Callable[[DLedgerEntry], object]) -> PushResponse:
        """``op`` (the ledger's append or truncate) on the pushed entry, then the commit index:
        SUCCESS, or 406 when the ledger refuses it."""
        entry = req.entry
        assert entry is not None
        try:
            op(DLedgerEntry(entry.index, entry.term, entry.pos, entry.body))
        except (LedgerError, OSError) as exc:
            log.warning("dledger %s: %s at %d refused: %s", self.config.self_id, what, entry.index, exc)
            return self._push_response(req, DLedgerCode.INCONSISTENT_STATE)
        if what == "TRUNCATE":
            log.info("dledger %s: truncated after %d (term %d)", self.config.self_id, entry.index, entry.term)
        self._follow_commit(req)
        return self._push_response(req, DLedgerCode.SUCCESS)

    def _handle_compare(self, req: PushRequest) -> PushResponse:
        entry = req.entry
        assert entry is not None  # decode checks it
        try:
            local = self.ledger.get(entry.index)
        except LedgerError:
            return self._push_response(req, DLedgerCode.INCONSISTENT_STATE)
        code = DLedgerCode.SUCCESS if local.same_as(entry) else DLedgerCode.INCONSISTENT_STATE
        return self._push_response(req, code)

    def _handle_truncate(self, req: PushRequest) -> PushResponse:
        entry = req.entry
        assert entry is not None
        if not self._valid_from_leader(req):
            return self._push_response(req, DLedgerCode.INCONSISTENT_STATE)
        committed = self.ledger.committed_index
        if entry.index < committed or (entry.index == committed and not self._holds(entry)):
            # a leader never cuts committed entries: refuse rather than lose what consumers saw
            log.warning("dledger %s: TRUNCATE at %d below the committed index %d refused", self.config.self_id,
                        entry.index, committed)
            return self._push_response(req, DLedgerCode.INCONSISTENT_STATE)
        return self._apply(req, "TRUNCATE", self.ledger.truncate)

    def _holds(self, entry: DLedgerEntry) -> bool:
        try:
            return self.ledger.get(entry.index).same_as(entry)
        except LedgerError:
            return False

    def _check_abnormal(self) -> None:
        """Every push timeout: answer pushes for entries already held, and fail the oldest
        timed-out push beyond a gap so that the leader compares again."""
        now = _now()
        if now - self._last_abnormal_check < self.config.max_push_timeout_ms or not self.append_queue:
            return
        self._last_abnormal_check = now
        end = self.ledger.end_index
        for index in sorted(self.append_queue):
            req, fut, t = self.append_queue[index]
            if index <= end:
                del self.append_queue[index]
                try:
                    same = req.entry is not None and self.ledger.get(index).same_as(req.entry)
                except LedgerError:
                    same = False
                if not fut.done():
                    fut.set_result(self._push_response(req, DLedgerCode.SUCCESS if same
                                                       else DLedgerCode.INCONSISTENT_STATE))
            elif now - t > self.config.max_push_timeout_ms:
                del self.append_queue[index]
                if not fut.done():
                    fut.set_result(self._push_response(req, DLedgerCode.INCONSISTENT_STATE))
                break

    # -- housekeeping -----------------------------------------------------------------------
    async def _housekeeping_loop(self) -> None:
        cfg = self.config
        last_checkpoint = _now()
        while self._running:
            await asyncio.sleep(min(cfg.max_wait_ack_time_ms, 100) / 1000.0)
            now = _now()
            for index, p in list(self.pending.items()):
                if now - p.created > cfg.max_wait_ack_time_ms:
                    self._complete(index, DLedgerCode.WAIT_QUORUM_ACK_TIMEOUT)
            if self.state.role is Role.LEADER:
                self._check_quorum()
            if now - last_checkpoint > cfg.checkpoint_interval_ms:
                last_checkpoint = now
                try:
                    self.ledger.flush()
                    self.ledger.write_checkpoint()
                except OSError as exc:
                    log.warning("dledger checkpoint: %s", exc)

    # -- views ------------------------------------------------------------------------------
    def peer_status(self) -> dict[str, int]:
        """Leader: each member's water mark (highest index known stored there; -1 unknown)."""
        if self.water_mark_term != self.term:
            return {p: -1 for p in self.config.peers}
        return {p: self.water_marks.get(p, -1) for p in self.config.peers}

