"""A broker in DLedger mode: DLedger role changes → broker role, broker id and name-server
registration (Java ``DLedgerRoleChangeHandler``; dledger-protocol.md §9).

* CANDIDATE / FOLLOWER → SLAVE, ``brokerId`` = selfId number + 1, writes refused (code 14);
* LEADER → once its log is committed and dispatched: SYNC_MASTER, ``brokerId`` 0, writes accepted.

While not master, a member copies the master's topics, consumer offsets, delay offsets and
subscription groups every ``slaveSyncInterval`` (SlaveSynchronize, as a 4.9.8 DLedger slave),
so a new master knows the topics and offsets of the old one; the master's address is the
name server's brokerId 0 of this broker name.

Every switch ends with an immediate oneway REGISTER_BROKER (the name server moves the address
between ids in one step), so clients that refresh their route find the new master at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Protocol

from rocketmq_sdk.exceptions import MQError
from rocketmq_sdk.protocol import fastjson
from rocketmq_sdk.protocol.admin_bodies import ClusterInfo
from rocketmq_sdk.protocol.codes import RequestCode, ResponseCode
from rocketmq_sdk.remoting import Channel, RemotingCommand

from ..aio import cancel_and_wait
from ..broker.replication import SlaveSynchronize, slave_refusal
from .config import member_number
from .member_state import Role
from .store import DLedgerMessageStore

if TYPE_CHECKING:
    from rocketmq_sdk.remoting import RemotingClient, RemotingServer

    from ..broker.config import BrokerConfig
    from ..broker.context import BrokerContext
    from ..store.message_store import MessageStore


class DLedgerHost(Protocol):
    """What the DLedger role uses of its broker (the ``BrokerController``): its settings, store,
    server, name-server client and registration, and the context :class:`SlaveSynchronize` copies into."""

    config: BrokerConfig
    ctx: BrokerContext
    store: MessageStore
    server: RemotingServer
    namesrv_client: RemotingClient

    def _namesrvs(self) -> list[str]: ...

    async def register_all(self, oneway: bool) -> None: ...

__all__ = ["DLedgerBroker"]

log = logging.getLogger("rocketmq_broker.dledger")


class DLedgerBroker:
    """The DLedger side of one broker (created by the controller when
    ``enableDLegerCommitLog=true``; its store must be a :class:`DLedgerMessageStore`)."""

    def __init__(self, broker: DLedgerHost) -> None:
        store = broker.store
        if not isinstance(store, DLedgerMessageStore):
            raise TypeError("DLedger mode needs a DLedgerMessageStore")
        self.broker = broker
        self.store = store
        self.node = store.node
        self.slave_id = member_number(self.node.config.self_id) + 1
        self.node.on_role_change = self._on_role_change
        self._apply_task: asyncio.Task | None = None
        self._target: Role | None = None
        broker.config.broker_id = self.slave_id  # until elected: a slave (Java registers -1)
        broker.server.add_request_hook(self._refusal)
        self.sync = SlaveSynchronize(broker.ctx)
        self._sync_task: asyncio.Task | None = None

    @property
    def is_master(self) -> bool:
        return self.store.commit_log.writable  # type: ignore[attr-defined]

    def _refusal(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand | None:
        return None if self.is_master else slave_refusal(ch, cmd)

    async def start(self) -> None:
        await self.store.start_dledger(self.broker.config.bind_address)
        self._sync_task = asyncio.get_running_loop().create_task(self._sync_loop())

    async def _sync_loop(self) -> None:
        await asyncio.sleep(min(3.0, self.broker.config.slave_sync_interval / 1000.0))
        while True:
            if not self.is_master:
                try:
                    self.sync.master_addr = await self._master_addr()
                    await self.sync.sync_all()
                except asyncio.CancelledError:
                    raise
                except Exception:  # noqa: BLE001 - the next round retries
                    log.exception("dledger: copying the master's metadata failed")
            await asyncio.sleep(self.broker.config.slave_sync_interval / 1000.0)

    async def _master_addr(self) -> str | None:
        """brokerId 0 of this broker name at the first name server that answers."""
        for ns in self.broker._namesrvs():
            try:
                resp = await self.broker.namesrv_client.invoke(
                    ns, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), 3000)
            except MQError:
                continue
            if resp.code == ResponseCode.SUCCESS and resp.body:
                info = ClusterInfo.from_dict(fastjson.loads(resp.body.decode("utf-8")))
                bd = info.broker_addr_table.get(self.broker.config.broker_name)
                addr = bd.broker_addrs.get(0) if bd is not None else None
                return addr if addr != self.broker.config.broker_addr else None
        return None

    async def stop(self) -> None:
        await cancel_and_wait(self._sync_task)
        await self.sync.client.close()
        if self._apply_task is not None:
            self._apply_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._apply_task
        await self.store.stop_dledger()

    def _on_role_change(self, role: Role, term: int, leader_id: str | None) -> None:
        self._target = role
        if self._apply_task is None or self._apply_task.done():
            self._apply_task = asyncio.get_running_loop().create_task(self._apply())

    async def _apply(self) -> None:
        cfg = self.broker.config
        while self._target is not None:
            role, self._target = self._target, None
            if role is Role.LEADER:
                while self.node.is_leader and not self.node.leader_caught_up():
                    await asyncio.sleep(0.1)  # Java polls every 100 ms
                if not self.node.is_leader or self._target is not None:
                    continue
                self.store.become_master()
                cfg.broker_id, cfg.broker_role = 0, "SYNC_MASTER"
                # Java changeToMaster → startProcessorByHa: delayed delivery and transaction checks
                self.broker.schedule.load()  # the delay offsets copied from the old master
                loop = asyncio.get_running_loop()
                self.broker.schedule.start(loop)
                self.broker.transactions.start(loop)
            else:
                was_master = self.is_master or cfg.broker_id == 0
                self.store.become_slave()
                # Java changeToSlave → shutdownProcessorByHa
                await self.broker.schedule.stop()
                await self.broker.transactions.stop()
                if not was_master and cfg.broker_id == self.slave_id and cfg.broker_role == "SLAVE":
                    continue  # already a slave: nothing to register
                cfg.broker_id, cfg.broker_role = self.slave_id, "SLAVE"
            log.info("dledger broker %s: %s (brokerId %d, term %d)", cfg.broker_name, cfg.broker_role,
                     cfg.broker_id, self.node.term)
            try:
                await self.broker.register_all(oneway=True)
            except Exception:  # noqa: BLE001 - the periodic registration follows
                log.exception("registration after a role change failed")

    def status(self) -> dict[str, object]:
        """Group, self id, role, term, leader and (leader) each peer's log index and lag."""
        node = self.node
        marks = node.peer_status()
        end = node.ledger.end_index
        return {"group": node.config.group, "selfId": node.config.self_id, "role": node.role.value,
                "term": node.term, "leaderId": node.leader_id, "ledgerEndIndex": end,
                "committedIndex": node.ledger.committed_index,
                "peers": {p: {"index": m, "lag": end - m if m >= 0 else None} for p, m in marks.items()}}

    def runtime_info(self) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO keys of DLedger mode (not in 4.9.8's answer): ``dLegerGroup``,
        ``dLegerSelfId``, ``dLegerRole``, ``dLegerTerm``, ``dLegerLeaderId``,
        ``dLegerLedgerEndIndex``, ``dLegerCommittedIndex`` and, on the leader, ``dLegerPeerIndexes``
        (``id:index:lag`` per member, comma-separated; lag in entries)."""
        st = self.status()
        out = {"dLegerGroup": str(st["group"]), "dLegerSelfId": str(st["selfId"]), "dLegerRole": str(st["role"]),
               "dLegerTerm": str(st["term"]), "dLegerLeaderId": str(st["leaderId"] or ""),
               "dLegerLedgerEndIndex": str(st["ledgerEndIndex"]), "dLegerCommittedIndex": str(st["committedIndex"])}
        if self.node.is_leader:
            peers = st["peers"]
            assert isinstance(peers, dict)
            out["dLegerPeerIndexes"] = ",".join(f"{p}:{v['index']}:{'' if v['lag'] is None else v['lag']}"
                                                for p, v in sorted(peers.items()))
        return out
