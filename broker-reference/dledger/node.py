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
import logging
import os
import random
from collections.abc import Callable

from rocketmq_sdk.remoting.client import RemotingClient
from rocketmq_sdk.remoting.command import RemotingCommand
from rocketmq_sdk.remoting.server import RemotingServer

from .config import DLedgerConfig
from .election import MAX_TERM, Election, _Parse
from .errors import AppendError
from .errors import now_ms as _now
from .follower import MAX_QUEUED_APPENDS, FollowerReplication
from .leader import LeaderReplication, _Dispatcher, _Pending
from .ledger import DLedgerLedger
from .member_state import MemberState, Role
from .protocol import DLedgerCode, DLedgerRequestCode, PushRequest
from .transfer import LeadershipTransfer

__all__ = ["MAX_QUEUED_APPENDS", "MAX_TERM", "AppendError", "DLedgerNode", "Role"]

log = logging.getLogger("rocketmq_broker.dledger")


RoleListener = Callable[[Role, int, "str | None"], None]
CommitListener = Callable[[int], None]


class DLedgerNode(Election, LeaderReplication, FollowerReplication):
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
        self.transfer = LeadershipTransfer(self)
        self.server.register_processor(DLedgerRequestCode.METADATA, self.transfer.on_metadata)
        self.server.register_processor(DLedgerRequestCode.LEADERSHIP_TRANSFER, self.transfer.on_transfer)
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
        self.peers_live: dict[str, bool] = {}  # leader: did the member's last heartbeat succeed
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
        self.transfer.cancel()
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

    def _rand_vote_wait(self) -> float:
        cfg = self.config
        if self.transfer.is_taking_leadership():
            return random.randint(cfg.min_take_leadership_vote_interval_ms, cfg.max_take_leadership_vote_interval_ms)
        return random.randint(cfg.min_vote_interval_ms, cfg.max_vote_interval_ms)

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
        self.transfer.transferee = None
        if was is not Role.CANDIDATE:
            self._notify_role()
        self.transfer.on_role(Role.CANDIDATE, term)
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
        self.transfer.on_role(Role.LEADER, term)
        for d in self.dispatchers.values():
            d.wake.set()
        self._wake.set()

    def _change_to_follower(self, term: int, leader_id: str) -> None:
        if term < self.state.curr_term:
            return
        self.state.to_follower(term, leader_id)
        self.transfer.transferee = None
        self.last_leader_heartbeat = _now()
        self._notify_role()
        self.transfer.on_role(Role.FOLLOWER, term)
        self._follower_wake.set()

    async def _invoke(self, peer: str, code: int, body: bytes, timeout_ms: float | None = None) -> bytes:
        cmd = RemotingCommand.request(code, body=body)
        resp = await self.client.invoke(self.config.peers[peer], cmd, timeout_ms or self.config.rpc_timeout_ms)
        if resp.code != 200:
            raise AppendError(DLedgerCode.INTERNAL_ERROR, f"remoting code {resp.code} from {peer}: {resp.remark}")
        return resp.body

    async def _sleep(self, event: asyncio.Event, ms: float) -> None:
        event.clear()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(event.wait(), max(0.001, ms / 1000.0))

    async def _housekeeping_loop(self) -> None:
        cfg = self.config
        last_checkpoint = last_preferred_check = _now()
        while self._running:
            await asyncio.sleep(min(cfg.max_wait_ack_time_ms, 100) / 1000.0)
            now = _now()
            for index, p in list(self.pending.items()):
                if now - p.created > cfg.max_wait_ack_time_ms:
                    self._complete(index, DLedgerCode.WAIT_QUORUM_ACK_TIMEOUT)
            if self.state.role is Role.LEADER:
                self._check_quorum()
                if cfg.preferred_leader_ids and now - last_preferred_check > 1000:  # DLedger: every second
                    last_preferred_check = now
                    self.transfer.check_preferred_leader()
            if now - last_checkpoint > cfg.checkpoint_interval_ms:
                last_checkpoint = now
                try:
                    self.ledger.flush()
                    self.ledger.write_checkpoint()
                except OSError as exc:
                    log.warning("dledger checkpoint: %s", exc)
