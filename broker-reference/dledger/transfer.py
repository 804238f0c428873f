"""Leadership transfer and METADATA of one DLedger member (DLedger 0.3.1.2's
``DLedgerServer.handleLeadershipTransfer`` / ``DLedgerLeaderElector.handleLeadershipTransfer`` /
``handleTakeLeadership``; request code 51005, dledger-protocol.md §3).

One request code, two legs:

1. **admin → leader** (``transferId`` = the leader = ``remoteId``): the leader checks that the
   transferee is a member (``401 UNKNOWN_MEMBER``), that ``term`` is its current term
   (``407 INCONSISTENT_TERM``), that it leads (``404 NOT_LEADER``), that no transfer is under way
   (``506 LEADER_TRANSFERRING``) and that the transferee's water mark is less than
   ``max_leadership_transfer_wait_index`` entries behind (``417 FALL_BEHIND_TOO_MUCH``). It then
   refuses appends (``LEADER_TRANSFERRING``; the broker answers a send with SYSTEM_ERROR), keeps
   pushing its log, and sends leg 2 with its ledger end index.
2. **leader → transferee** (``transfereeId`` = ``remoteId``): the transferee waits up to
   ``leadership_transfer_wait_timeout_ms`` until its log reaches that index
   (``418 TAKE_LEADERSHIP_FAILED`` otherwise), becomes a candidate in ``term + 1`` and campaigns;
   it answers once the election of that term ended: SUCCESS with the new term when it won,
   ``418`` when another member won, ``403 EXPIRED_TERM`` when the group moved past that term.

The leader answers the admin with the transferee's answer; a failed transfer lets it accept
appends again. A transferee that cannot be reached gives ``302 NETWORK_ERROR``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Protocol

from rocketmq_sdk.remoting.channel import Channel
from rocketmq_sdk.remoting.command import RemotingCommand

from .config import DLedgerConfig
from .ledger import DLedgerLedger
from .member_state import MemberState, Role
from .protocol import (
    DLedgerCode,
    DLedgerProtocolError,
    DLedgerRequestCode,
    LeadershipTransferRequest,
    LeadershipTransferResponse,
    MetadataRequest,
    MetadataResponse,
)

__all__ = ["LeadershipTransfer", "TransferHost"]

log = logging.getLogger("rocketmq_broker.dledger")


class TransferHost(Protocol):
    """What a transfer reads and drives on its member (:class:`~.node.DLedgerNode` is one)."""

    config: DLedgerConfig
    ledger: DLedgerLedger
    state: MemberState
    dispatchers: dict[str, Any]
    peers_live: dict[str, bool]
    need_increase_term: bool
    _wake: asyncio.Event

    @property
    def term(self) -> int: ...
    @property
    def leader_id(self) -> str | None: ...
    @property
    def is_leader(self) -> bool: ...
    def peer_status(self) -> dict[str, int]: ...
    def _check_base(self, group: str | None, remote_id: str | None, term: int = 0) -> DLedgerCode | None: ...
    def _change_to_candidate(self, term: int) -> None: ...
    async def _invoke(self, peer: str, code: int, body: bytes, timeout_ms: float | None = None) -> bytes: ...


class LeadershipTransfer:
    """The transfer state of one member: ``transferee`` (leader side, appends refused while set)
    and the pending take-leadership answer (transferee side)."""

    def __init__(self, node: TransferHost) -> None:
        self.node = node
        #: leader: the member leadership is being handed to (None: no transfer under way)
        self.transferee: str | None = None
        #: transferee: the term it campaigns in to take leadership (-1: none)
        self.term_to_take = -1
        #: old leader: the term its transferee campaigns in (-1: none); in that term it waits a
        #: leader timeout longer before campaigning itself, so that its own candidacy (a vote for
        #: itself) does not split the transferee's election (not in DLedger 0.3.1.2, whose longer
        #: vote intervals make that race rarer)
        self.handed_over_term = -1
        self._answer: asyncio.Future[LeadershipTransferResponse] | None = None
        self._preferred_task: asyncio.Future[LeadershipTransferResponse] | None = None

    # -- wire handlers --------------------------------------------------------------------
    def on_metadata(self, channel: Channel, cmd: RemotingCommand) -> RemotingCommand:
        node = self.node
        try:
            req = MetadataRequest.decode(cmd.body)
        except DLedgerProtocolError as exc:
            return cmd.response(200, body=MetadataResponse(code=DLedgerCode.UNEXPECTED_ARGUMENT,
                                                           leader_id=node.leader_id).encode(), remark=str(exc))
        bad = node._check_base(req.group, req.remote_id)
        if bad is not None:
            resp = MetadataResponse(group=req.group, remote_id=req.remote_id, local_id=req.local_id,
                                    term=req.term, code=int(bad), leader_id=node.leader_id)
        else:
            resp = MetadataResponse(group=node.config.group, leader_id=node.leader_id, peers=dict(node.config.peers))
        return cmd.response(200, body=resp.encode())

    async def on_transfer(self, channel: Channel, cmd: RemotingCommand) -> RemotingCommand:
        try:
            req = LeadershipTransferRequest.decode(cmd.body)
        except DLedgerProtocolError as exc:
            resp = LeadershipTransferResponse(code=DLedgerCode.UNEXPECTED_ARGUMENT, term=self.node.term)
            return cmd.response(200, body=resp.encode(), remark=str(exc))
        resp = await self.handle(req)
        return cmd.response(200, body=resp.encode())

    async def handle(self, req: LeadershipTransferRequest) -> LeadershipTransferResponse:
        """Either leg of a transfer (see the module doc); never raises."""
        node = self.node
        bad = node._check_base(req.group, req.remote_id, req.term)
        if bad is None:
            if req.transfer_id == node.config.self_id:
                bad = self._check_as_leader(req)
                if bad is None:
                    return await self._transfer(req)
            elif req.transferee_id == node.config.self_id:
                if req.transfer_id != node.leader_id:
                    bad = DLedgerCode.INCONSISTENT_LEADER
                else:
                    return await self._take_leadership(req)
            else:
                return LeadershipTransferResponse(term=node.term, code=DLedgerCode.UNEXPECTED_ARGUMENT)
        log.warning("dledger %s: leadership transfer %s → %s refused: %s", node.config.self_id, req.transfer_id,
                    req.transferee_id, DLedgerCode(bad).name)
        return LeadershipTransferResponse(group=req.group, remote_id=req.remote_id, local_id=req.local_id,
                                          term=req.term, code=int(bad), leader_id=node.leader_id)

    # -- leader side ----------------------------------------------------------------------
    def _check_as_leader(self, req: LeadershipTransferRequest) -> DLedgerCode | None:
        node = self.node
        if not node.state.is_member(req.transferee_id) or req.transferee_id == node.config.self_id:
            return DLedgerCode.UNKNOWN_MEMBER
        if req.term != node.term:
            return DLedgerCode.INCONSISTENT_TERM
        if not node.is_leader:
            return DLedgerCode.NOT_LEADER
        if self.transferee is not None:
            return DLedgerCode.LEADER_TRANSFERRING
        assert req.transferee_id is not None
        behind = node.ledger.end_index - node.peer_status()[req.transferee_id]
        if behind >= node.config.max_leadership_transfer_wait_index:
            log.warning("dledger %s: transferee %s is %d entries behind", node.config.self_id, req.transferee_id,
                        behind)
            return DLedgerCode.FALL_BEHIND_TOO_MUCH
        return None

    async def _transfer(self, req: LeadershipTransferRequest) -> LeadershipTransferResponse:
        node, cfg = self.node, self.node.config
        assert req.transferee_id is not None
        term = node.term
        self.transferee = req.transferee_id  # appends refused from here on
        log.info("dledger %s: transferring leadership of term %d to %s (ledger end %d)", cfg.self_id, term,
                 req.transferee_id, node.ledger.end_index)
        take = LeadershipTransferRequest(group=cfg.group, leader_id=cfg.self_id, local_id=cfg.self_id,
                                         remote_id=req.transferee_id, term=term, transfer_id=cfg.self_id,
                                         transferee_id=req.transferee_id,
                                         take_leadership_ledger_index=node.ledger.end_index)
        for d in node.dispatchers.values():
            d.wake.set()
        self.handed_over_term = term + 1
        try:
            body = await node._invoke(req.transferee_id, DLedgerRequestCode.LEADERSHIP_TRANSFER, take.encode(),
                                      timeout_ms=cfg.leadership_transfer_wait_timeout_ms + 2 * cfg.rpc_timeout_ms)
            resp = LeadershipTransferResponse.decode(body)
        except Exception as exc:  # noqa: BLE001 - unreachable, timed out, refused (AppendError) or garbled
            log.warning("dledger %s: leadership transfer to %s failed: %s", cfg.self_id, req.transferee_id, exc)
            resp = LeadershipTransferResponse(term=node.term, code=DLedgerCode.NETWORK_ERROR)
        if resp.code != DLedgerCode.SUCCESS:
            self.handed_over_term = -1
        if resp.code != DLedgerCode.SUCCESS or (node.term == term and self.transferee is not None):
            self.transferee = None  # appends accepted again
        log.info("dledger %s: leadership transfer to %s: %s (term %d)", cfg.self_id, req.transferee_id,
                 _name(resp.code), resp.term)
        return resp

    # -- preferred leaders (preferredLeaderId) ---------------------------------------------
    def is_taking_leadership(self) -> bool:
        """A preferred member campaigning in the term it was handed (DLedger's isTakingLeadership)."""
        node = self.node
        return (self.term_to_take == node.term and node.config.self_id in node.config.preferred_leaders)

    def check_preferred_leader(self) -> None:
        """Leader, every second (DLedger's checkPreferredLeader): when this member is not a
        preferred one, hand leadership to the online preferred member least behind, if it is less
        than ``max_leadership_transfer_wait_index`` entries behind ("online": its last heartbeat
        succeeded; an unknown water mark counts as everything behind)."""
        node = self.node
        preferred = node.config.preferred_leaders
        if not node.is_leader or self.transferee is not None or not preferred or node.config.self_id in preferred:
            return
        if self._preferred_task is not None and not self._preferred_task.done():
            return
        marks = node.peer_status()
        behind = {p: node.ledger.end_index - marks.get(p, -1) for p in preferred if node.peers_live.get(p)}
        if not behind:
            return
        target = min(behind, key=lambda p: behind[p])
        if behind[target] >= node.config.max_leadership_transfer_wait_index:
            return
        log.info("dledger %s: handing leadership to preferred member %s (%d entries behind)", node.config.self_id,
                 target, behind[target])
        req = LeadershipTransferRequest(group=node.config.group, remote_id=node.config.self_id,
                                        transfer_id=node.config.self_id, transferee_id=target, term=node.term)
        self._preferred_task = asyncio.ensure_future(self.handle(req))

    # -- transferee side ------------------------------------------------------------------
    async def _take_leadership(self, req: LeadershipTransferRequest) -> LeadershipTransferResponse:
        node = self.node
        deadline = time.monotonic() + node.config.leadership_transfer_wait_timeout_ms / 1000.0
        while node.ledger.end_index < req.take_leadership_ledger_index:
            if time.monotonic() > deadline:
                behind = req.take_leadership_ledger_index - node.ledger.end_index
                log.warning("dledger %s: %d entries behind the leader after %d ms; not taking leadership",
                            node.config.self_id, behind, node.config.leadership_transfer_wait_timeout_ms)
                return LeadershipTransferResponse(group=req.group, remote_id=req.remote_id, local_id=req.local_id,
                                                  term=req.term, code=DLedgerCode.TAKE_LEADERSHIP_FAILED,
                                                  leader_id=node.leader_id)
            await asyncio.sleep(0.01)  # DLedger polls every 10 ms
        if node.term != req.term:
            return LeadershipTransferResponse(term=node.term, code=DLedgerCode.INCONSISTENT_TERM)
        if self._answer is not None and not self._answer.done():
            self._answer.set_result(LeadershipTransferResponse(term=node.term, code=DLedgerCode.INTERNAL_ERROR))
        self.term_to_take = req.term + 1
        answer: asyncio.Future[LeadershipTransferResponse] = asyncio.get_running_loop().create_future()
        self._answer = answer
        log.info("dledger %s: taking leadership in term %d", node.config.self_id, self.term_to_take)
        node._change_to_candidate(self.term_to_take)
        node.need_increase_term = True
        node._wake.set()
        return await answer

    def on_role(self, role: Role, term: int) -> None:
        """Every role change: end a pending take-leadership once the election of its term ended."""
        if role is not Role.CANDIDATE and term >= self.handed_over_term:
            self.handed_over_term = -1  # that election is over: no more waiting in it
        answer = self._answer
        if self.term_to_take == -1 or answer is None:
            return
        if term > self.term_to_take:
            resp = LeadershipTransferResponse(term=term, code=DLedgerCode.EXPIRED_TERM)
        elif term == self.term_to_take:
            if role is Role.LEADER:
                resp = LeadershipTransferResponse(term=term, code=DLedgerCode.SUCCESS)
            elif role is Role.FOLLOWER:
                resp = LeadershipTransferResponse(term=term, code=DLedgerCode.TAKE_LEADERSHIP_FAILED)
            else:
                return
        elif role is Role.FOLLOWER:  # followed a leader of an older term before reaching its own
            resp = LeadershipTransferResponse(term=term, code=DLedgerCode.TAKE_LEADERSHIP_FAILED)
        else:
            return
        self.term_to_take, self._answer = -1, None
        if not answer.done():
            answer.set_result(resp)

    def cancel(self) -> None:
        """Stop: a pending take-leadership answer fails with INTERNAL_ERROR."""
        if self._answer is not None and not self._answer.done():
            self._answer.set_result(LeadershipTransferResponse(term=self.node.term, code=DLedgerCode.INTERNAL_ERROR))
        if self._preferred_task is not None:
            self._preferred_task.cancel()
        self.term_to_take, self._answer, self.transferee, self._preferred_task = -1, None, None, None


def _name(code: int) -> str:
    try:
        return DLedgerCode(code).name
    except ValueError:
        return str(code)
