"""DLedger groups (``enableDLegerCommitLog=true``): leadership transfer.

Apache RocketMQ 4.9.8's mqadmin has no DLedger command; DLedger 0.3.1.2 ships its own
``leadershipTransfer`` command, which sends LEADERSHIP_TRANSFER (51005) to the leader's DLedger
port. This does the same, finding what that command takes as arguments: the group and members
from the brokers' configuration (``dLegerGroup``, ``dLegerPeers``), the leader from DLedger's
METADATA (50000), the term from the reference broker's runtime info (``dLegerTerm``; Apache
brokers do not report it: pass ``term``).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from rocketmq_sdk.exceptions import IllegalArgumentError, MQBrokerError, MQClientError
from rocketmq_sdk.properties import parse_properties
from rocketmq_sdk.protocol.admin_bodies import KVTable
from rocketmq_sdk.protocol.codes import RequestCode
from rocketmq_sdk.protocol.dledger import (
    DLedgerCode,
    DLedgerProtocolError,
    DLedgerRequestCode,
    LeadershipTransferRequest,
    LeadershipTransferResponse,
    MetadataRequest,
    MetadataResponse,
    parse_peers,
)
from rocketmq_sdk.remoting.command import RemotingCommand

from .core import MASTER_ID, REQUEST_FAILED, AdminCore, log

__all__ = ["DLedgerAdmin", "LeadershipTransferResult"]

_HINTS = {
    DLedgerCode.FALL_BEHIND_TOO_MUCH: "the transferee's log lags too far behind the leader's",
    DLedgerCode.TAKE_LEADERSHIP_FAILED: "the transferee did not catch up or lost the election",
    DLedgerCode.LEADER_TRANSFERRING: "another transfer is under way",
    DLedgerCode.INCONSISTENT_TERM: "the term changed (an election happened): retry",
    DLedgerCode.NOT_LEADER: "the leader changed: retry",
    DLedgerCode.UNKNOWN_MEMBER: "not a member of the group",
    DLedgerCode.NETWORK_ERROR: "the leader could not reach the transferee",
}


@dataclass(slots=True)
class LeadershipTransferResult:
    """A completed transfer: ``group`` (``dLegerGroup``), the old and new leader ids, the new
    ``term``, the new master's broker address and the milliseconds from the request until the
    name server listed it as brokerId 0 (``registered_ms``)."""

    broker_name: str
    group: str
    old_leader: str
    new_leader: str
    term: int
    master_addr: str
    registered_ms: float


@dataclass(slots=True)
class _Member:
    broker_addr: str
    dledger_addr: str


class DLedgerAdmin(AdminCore):
    """DLedger groups: leadership transfer."""

    async def dledger_leadership_transfer(self, broker_name: str, transferee_id: str, *, term: int | None = None,
                                          wait_ms: float = 10_000.0) -> LeadershipTransferResult:
        """Hand the leadership (and so the master role) of DLedger group ``broker_name`` to member
        ``transferee_id`` (``n1``...), as DLedger 0.3.1.2's ``leadershipTransfer`` command: the
        leader stops accepting writes (sends are answered SYSTEM_ERROR, code 1, which producers
        retry), brings the transferee's log up to date, the transferee campaigns in the next term and wins; the
        call returns once the name server lists the new master.

        Args:
            broker_name: the broker name (= ``dLegerGroup``'s group of brokers).
            transferee_id: the member to lead (its ``dLegerSelfId``).
            term: the leader's current term; default: read from the broker's runtime info
                (``dLegerTerm``, reference brokers only).
            wait_ms: how long to wait for the transfer and for the name server (ms, default 10000).

        Raises:
            IllegalArgumentError: ``transferee_id`` is not a member or already leads; no ``term``
                and the broker does not report it.
            MQClientError: unknown broker name, not in DLedger mode, no leader (an election is
                under way), or the name server did not list the new master within ``wait_ms``.
            MQBrokerError: the leader refused the transfer; ``code`` is DLedger's (e.g. 417
                FALL_BEHIND_TOO_MUCH for a lagging transferee, 401 UNKNOWN_MEMBER).
        """
        started = time.monotonic()
        members, group = await self._dledger_members(broker_name)
        if transferee_id not in members:
            raise IllegalArgumentError(f"{transferee_id!r} is not a member of DLedger group {group!r} "
                                       f"(members: {', '.join(sorted(members))})")
        leader = await self._dledger_leader(group, members)
        if leader == transferee_id:
            raise IllegalArgumentError(f"{transferee_id} already leads DLedger group {group!r}")
        if term is None:
            term = await self._dledger_term(members[leader].broker_addr, leader)
        req = LeadershipTransferRequest(group=group, remote_id=leader, transfer_id=leader,
                                        transferee_id=transferee_id, term=term)
        addr = members[leader].dledger_addr
        self.check_open()
        resp = await self._remoting.invoke(addr, RemotingCommand.request(DLedgerRequestCode.LEADERSHIP_TRANSFER, body=req.encode()), wait_ms)
        if resp.code != 200:
            raise MQBrokerError(resp.code, f"LEADERSHIP_TRANSFER answered remoting code {resp.code}: {resp.remark}",
                                addr)
        try:
            answer = LeadershipTransferResponse.decode(resp.body)
        except DLedgerProtocolError as exc:
            raise MQBrokerError(-1, f"garbled LEADERSHIP_TRANSFER answer: {exc}", addr) from None
        if answer.code != DLedgerCode.SUCCESS:
            name = DLedgerCode(answer.code).name if answer.code in DLedgerCode._value2member_map_ else "?"
            hint = _HINTS.get(DLedgerCode(answer.code)) if name != "?" else None
            raise MQBrokerError(answer.code, f"leadership transfer {leader} → {transferee_id} refused: {name}"
                                f"{' (' + hint + ')' if hint else ''}", addr)
        master = members[transferee_id].broker_addr
        await self._wait_registered(broker_name, master, started + wait_ms / 1000.0)
        return LeadershipTransferResult(broker_name, group, leader, transferee_id, answer.term, master,
                                        (time.monotonic() - started) * 1000.0)

    async def _dledger_members(self, broker_name: str) -> tuple[dict[str, _Member], str]:
        """{member id: addresses} of every registered broker of ``broker_name`` and the group."""
        info = await self._cluster()
        bd = info.broker_addr_table.get(broker_name)
        if bd is None or not bd.broker_addrs:
            raise MQClientError(f"broker name {broker_name!r} not found on the name server")
        members: dict[str, _Member] = {}
        group = ""
        for bid in sorted(bd.broker_addrs):
            addr = bd.broker_addrs[bid]
            try:
                cfg = await self._broker_config(addr)
            except REQUEST_FAILED as exc:
                log.debug("broker config of %s: %s", addr, exc)
                continue
            if cfg.get("enableDLegerCommitLog", "false").lower() != "true":
                raise MQClientError(f"broker {broker_name!r} ({addr}) is not in DLedger mode "
                                    "(enableDLegerCommitLog=false)")
            group = cfg.get("dLegerGroup", "")
            try:
                peers = parse_peers(cfg.get("dLegerPeers", ""))
            except ValueError as exc:
                raise MQClientError(f"broker {addr}: {exc}") from None
            self_id = cfg.get("dLegerSelfId", "")
            for mid, dledger_addr in peers.items():
                members.setdefault(mid, _Member("", dledger_addr))
            if self_id in members:
                members[self_id].broker_addr = addr
        if not members or not group:
            raise MQClientError(f"no broker of {broker_name!r} answered with its DLedger configuration")
        return members, group

    async def _broker_config(self, addr: str) -> dict[str, str]:
        resp = await self._broker(addr, RequestCode.GET_BROKER_CONFIG)
        return parse_properties(resp.body.decode("utf-8", "replace"))

    async def _dledger_leader(self, group: str, members: dict[str, _Member]) -> str:
        for mid, m in sorted(members.items()):
            req = MetadataRequest(group=group, remote_id=mid)
            try:
                resp = await self._remoting.invoke(m.dledger_addr, RemotingCommand.request(DLedgerRequestCode.METADATA, body=req.encode()),
                                                   self.timeout_ms)
                meta = MetadataResponse.decode(resp.body) if resp.code == 200 else None
            except (*REQUEST_FAILED, DLedgerProtocolError) as exc:
                log.debug("DLedger METADATA of %s: %s", m.dledger_addr, exc)
                continue
            if meta is not None and meta.code == DLedgerCode.SUCCESS and meta.leader_id in members:
                return meta.leader_id
        raise MQClientError(f"DLedger group {group!r} has no leader now (an election is under way?): retry")

    async def _dledger_term(self, broker_addr: str, leader: str) -> int:
        table: dict[str, str] = {}
        if broker_addr:
            resp = await self._broker(broker_addr, RequestCode.GET_BROKER_RUNTIME_INFO)
            table = dict(KVTable.from_json(resp.body).table)
        if table.get("dLegerSelfId") != leader or not table.get("dLegerTerm", "").lstrip("-").isdigit():
            raise IllegalArgumentError(f"the broker of leader {leader} does not report its DLedger term "
                                       "(Apache brokers do not): pass term")
        return int(table["dLegerTerm"])

    async def _wait_registered(self, broker_name: str, master: str, deadline: float) -> None:
        while True:
            info = await self._cluster()
            bd = info.broker_addr_table.get(broker_name)
            if bd is not None and bd.broker_addrs.get(MASTER_ID) == master:
                return
            if time.monotonic() > deadline:
                raise MQClientError(f"leadership moved, but the name server does not list {master} as the master "
                                    f"of {broker_name!r} yet")
            await asyncio.sleep(0.05)

