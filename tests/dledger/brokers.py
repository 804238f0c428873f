"""A name server and a DLedger group of reference brokers on a background loop (test helper),
timers scaled down: heartbeats every 300 ms, a leader missed after 6 of them (1.8 s; not 3: all
members, the name server and the clients share one process and one GIL on a loaded 2-core
machine, where loop stalls of a second were seen at load 17 and made a healthy leader step
down), so a failover takes about 2.5 s."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

from rocketmq_broker.broker.config import BrokerConfig
from rocketmq_broker.broker.controller import BrokerController
from rocketmq_broker.namesrv.server import NameServer, NamesrvConfig

from .cluster import free_ports

FAST_TIMERS = {"heart_beat_time_interval_ms": 300, "max_heart_beat_leak": 6,
               "min_vote_interval_ms": 30, "max_vote_interval_ms": 100,
               "max_wait_ack_time_ms": 2500, "max_push_time_out_ms": 200, "slave_sync_interval": 300}


class DLedgerBrokers:
    def __init__(self, root: str, ids: tuple[str, ...] = ("n0", "n1", "n2"), group: str = "broker-a") -> None:
        self.root = root
        self.ids = ids
        self.group = group
        ports = free_ports(2 * len(ids))
        self.peers = ";".join(f"{i}-127.0.0.1:{p}" for i, p in zip(ids, ports[:len(ids)], strict=True))
        # fixed listen ports below the ephemeral range and the HA port left to the kernel: a
        # restarted member never needs a port (``listen_port + 1``) an outgoing socket may hold
        self.listen_ports: dict[str, int] = dict(zip(ids, ports[len(ids):], strict=True))
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.brokers: dict[str, BrokerController] = {}
        self.ns: NameServer | None = None

    def run(self, coro, timeout: float = 30):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    @property
    def namesrv_addr(self) -> str:
        assert self.ns is not None
        return self.ns.addr

    def start(self) -> None:
        async def go() -> None:
            self.ns = NameServer(NamesrvConfig(listen_port=0))
            await self.ns.start()
        self.run(go())
        for i in self.ids:
            self.start_broker(i)

    def start_broker(self, node_id: str) -> BrokerController:
        cfg = BrokerConfig(listen_port=self.listen_ports[node_id], ha_listen_port=0, namesrv_addr=self.namesrv_addr,
                           broker_name=self.group, store_path_root_dir=f"{self.root}/{node_id}",
                           mapped_file_size_commit_log=1024 * 1024, enable_d_leger_commit_log=True,
                           d_leger_group=self.group, d_leger_peers=self.peers, d_leger_self_id=node_id,
                           **FAST_TIMERS)
        broker = BrokerController(cfg)
        self.run(broker.start())
        self.listen_ports[node_id] = cfg.listen_port
        self.brokers[node_id] = broker
        return broker

    def stop_broker(self, node_id: str) -> None:
        broker = self.brokers.pop(node_id)
        self.run(broker.stop())

    def stop(self) -> None:
        for i in list(self.brokers):
            self.stop_broker(i)
        if self.ns is not None:
            self.run(self.ns.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)

    def master(self) -> BrokerController | None:
        ms = [b for b in self.brokers.values() if b.dledger is not None and b.dledger.is_master]
        return ms[0] if len(ms) == 1 else None

    def registered_master(self) -> str | None:
        assert self.ns is not None
        bd = self.ns.routes.broker_addr_table.get(self.group)
        return bd.broker_addrs.get(0) if bd is not None else None

    def wait_for(self, cond: Callable[[], object], timeout_s: float, what: str) -> float:
        start = time.monotonic()
        while not cond():
            if time.monotonic() - start > timeout_s:
                state = {i: (b.dledger.node.role.value, b.dledger.node.term, b.config.broker_id,
                             b.dledger.node.ledger.end_index, b.dledger.node.ledger.committed_index)
                         for i, b in self.brokers.items() if b.dledger is not None}
                raise AssertionError(f"timed out after {timeout_s} s waiting for {what}: {state}")
            time.sleep(0.02)
        return time.monotonic() - start

    def wait_master(self, timeout_s: float = 20) -> BrokerController:
        self.wait_for(lambda: self.master() is not None and self.registered_master() == self.master().config.broker_addr,
                      timeout_s, "a registered master")
        m = self.master()
        assert m is not None
        return m
