"""The leader side of DLedger replication (Java ``DLedgerEntryPusher``; dledger-protocol.md §6, §7):
in-process appends, water marks and the commit rule, one dispatcher per follower (COMPARE →
TRUNCATE → APPEND, one entry per PUSH, pipelined → idle COMMIT pushes).

The commit index is the water mark held by a majority (no current-term rule); appends wait for
it up to ``max_wait_ack_time_ms``.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from .entry import DLedgerEntry
from .errors import AppendError
from .errors import now_ms as _now
from .ledger import LedgerError
from .member_state import Role
from .protocol import DLedgerCode, DLedgerRequestCode, PushRequest, PushResponse, PushType

__all__ = ["LeaderReplication"]

log = logging.getLogger("rocketmq_broker.dledger")


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
    pending: dict[int, tuple[float, int]] = field(default_factory=dict)  # first index → (send time ms, count)
    last_commit_push: float = 0.0
    wake: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class _Pending:
    future: asyncio.Future
    term: int
    created: float


class LeaderReplication:
    """The leader's replication part of :class:`~.node.DLedgerNode` (a mixin: the node holds the state)."""

    def append(self, body_size: int, build: Callable[[int], bytes]) -> tuple[DLedgerEntry, asyncio.Future]:
        """Append one entry as leader (in-process, the broker's put). ``build(physical_offset)``
        returns the message record (``body_size`` bytes) with PHYSICALOFFSET = entry pos + 48.

        Returns the stored entry and a future completed with :attr:`DLedgerCode.SUCCESS` once a
        majority holds it, or an :class:`AppendError` (WAIT_QUORUM_ACK_TIMEOUT after
        ``max_wait_ack_time_ms``, TERM_CHANGED).

        Raises:
            AppendError: NOT_LEADER, LEADER_TRANSFERRING (a leadership transfer is under way),
                LEADER_PENDING_FULL, or DISK_ERROR (nothing appended).
        """
        if self.state.role is not Role.LEADER:
            raise AppendError(DLedgerCode.NOT_LEADER)
        if self.transfer.transferee is not None:
            raise AppendError(DLedgerCode.LEADER_TRANSFERRING, f"to {self.transfer.transferee}")
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
        for i in [i for i, (_, n) in d.pending.items() if i + n - 1 <= mark]:
            del d.pending[i]
        sent = False
        resend = d.pending.get(mark + 1)
        if resend is not None and now - resend[0] > cfg.max_push_timeout_ms:
            self._append_push(d, mark + 1, resend[1])
            sent = True
        while d.write_index <= ledger.end_index and len(d.pending) < cfg.max_pending_pushes:
            count, size = 1, 0
            if cfg.enable_batch_push:  # DLedger: entries until maxBatchPushSize bytes or the end
                count, size = 0, 0
                while d.write_index + count <= ledger.end_index and size < cfg.max_batch_push_size:
                    size += ledger.get(d.write_index + count).size
                    count += 1
            self._append_push(d, d.write_index, count)
            d.write_index += count
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

    def _append_push(self, d: _Dispatcher, index: int, count: int = 1) -> None:
        d.pending[index] = (_now(), count)
        if self.config.enable_batch_push:
            req = self._push(d, PushType.APPEND, None)
            req.batch_entry = [self.ledger.get(i) for i in range(index, index + count)]
        else:
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

    def peer_status(self) -> dict[str, int]:
        """Leader: each member's water mark (highest index known stored there; -1 unknown)."""
        if self.water_mark_term != self.term:
            return {p: -1 for p in self.config.peers}
        return {p: self.water_marks.get(p, -1) for p in self.config.peers}
