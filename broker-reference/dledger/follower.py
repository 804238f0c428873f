"""The follower side of DLedger replication (Java ``DLedgerEntryPusher.EntryHandler``;
dledger-protocol.md §6.3, §7): the PUSH queue, APPENDs applied in index order at exactly
``entry.pos``, COMPARE / TRUNCATE / COMMIT handled only by a FOLLOWER (else ``405 NOT_FOLLOWER``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from rocketmq_sdk.remoting.channel import Channel
from rocketmq_sdk.remoting.command import RemotingCommand

from .entry import DLedgerEntry
from .errors import now_ms as _now
from .ledger import LedgerError
from .member_state import Role
from .protocol import DLedgerCode, PushRequest, PushResponse, PushType

__all__ = ["MAX_QUEUED_APPENDS", "FollowerReplication"]

log = logging.getLogger("rocketmq_broker.dledger")

MAX_QUEUED_APPENDS = 10_000  # follower: APPEND pushes waiting for their turn


class FollowerReplication:
    """The follower's replication part of :class:`~.node.DLedgerNode` (a mixin: the node holds the state)."""

    def _push_response(self, req: PushRequest, code: DLedgerCode | int) -> PushResponse:
        return PushResponse(code=int(code), group=req.group, term=req.term,
                            index=req.first_entry_index if req.type is not PushType.COMMIT else None,
                            count=req.count, begin_index=self.ledger.begin_index, end_index=self.ledger.end_index)

    def _on_push(self, channel: Channel, cmd: RemotingCommand) -> RemotingCommand | asyncio.Future:
        req = PushRequest.decode(cmd.body)
        bad = self._check_base(req.group, req.remote_id, req.term)
        if bad is None and req.batch_entry and (req.type is not PushType.APPEND or any(
                e.index != req.batch_entry[0].index + i for i, e in enumerate(req.batch_entry))):
            bad = DLedgerCode.UNEXPECTED_ARGUMENT  # a batch only of APPENDs, indexes in a row
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
        if req.batch_entry:
            return self._handle_batch_append(req)
        entry = req.entry
        if entry is None or not self._valid_from_leader(req) or entry.index != self.ledger.end_index + 1:
            return self._push_response(req, DLedgerCode.INCONSISTENT_STATE)
        return self._apply(req, "APPEND", self.ledger.append)

    def _handle_batch_append(self, req: PushRequest) -> PushResponse:
        """A batch push (``enableBatchPush`` on the leader): the entries in order, as DLedger's
        handleDoBatchAppend (a refused entry ends it with 406; the leader compares again)."""
        if not self._valid_from_leader(req) or req.first_entry_index != self.ledger.end_index + 1:
            return self._push_response(req, DLedgerCode.INCONSISTENT_STATE)
        for entry in req.batch_entry:
            try:
                self.ledger.append(DLedgerEntry(entry.index, entry.term, entry.pos, entry.body))
            except (LedgerError, OSError) as exc:
                log.warning("dledger %s: batch APPEND at %d refused: %s", self.config.self_id, entry.index, exc)
                return self._push_response(req, DLedgerCode.INCONSISTENT_STATE)
        self._follow_commit(req)
        return self._push_response(req, DLedgerCode.SUCCESS)

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
            if req.last_entry_index <= end:
                del self.append_queue[index]
                entries = req.batch_entry or ([req.entry] if req.entry is not None else [])
                try:
                    same = bool(entries) and all(self.ledger.get(e.index).same_as(e) for e in entries)
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
