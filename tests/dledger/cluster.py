"""Three in-process DLedger members on one event loop with scaled-down timers (test helper)."""

from __future__ import annotations

import asyncio
import os
import struct
import time
from collections.abc import Callable

from rocketmq_broker.dledger.config import DLedgerConfig
from rocketmq_broker.dledger.ledger import DLedgerLedger
from rocketmq_broker.dledger.node import DLedgerNode, Role
from rocketmq_broker.embedded import spaced_free_ports
from rocketmq_sdk.exceptions import RemotingConnectError

FILE_SIZE = 256 * 1024
SCALE = 0.1  # heartbeats every 200 ms
LEAK = 5  # heartbeats missed before a campaign or a step-down (DLedger: 3): 1 s, since the
# members share one loop on a loaded machine, where stalls over 600 ms made healthy leaders step down


free_ports = spaced_free_ports


class Group:
    def __init__(self, root: str, ids: tuple[str, ...] = ("n0", "n1", "n2")) -> None:
        self.root = root
        self.peers = {i: f"127.0.0.1:{p}" for i, p in zip(ids, free_ports(len(ids)), strict=True)}
        self.nodes: dict[str, DLedgerNode] = {}
        self.roles: list[tuple[str, Role, int]] = []
        self.isolated: set[str] = set()

    def make(self, node_id: str) -> DLedgerNode:
        cfg = DLedgerConfig("broker-a", node_id, dict(self.peers)).scaled(SCALE)
        cfg.max_heart_beat_leak = LEAK
        cfg.max_wait_ack_time_ms = 2500  # DLedger's: a quorum wait is no election timer
        ledger = DLedgerLedger(os.path.join(self.root, f"dledger-{node_id}"), FILE_SIZE)
        ledger.load()
        node = DLedgerNode(cfg, ledger, on_role_change=lambda role, term, leader: self.roles.append((node_id, role, term)))
        self.nodes[node_id] = node
        return node

    async def start(self, node_id: str) -> DLedgerNode:
        node = self.make(node_id)
        await node.start()
        return node

    async def stop(self, node_id: str) -> None:
        node = self.nodes.pop(node_id)
        await node.stop()
        node.ledger.shutdown()

    async def stop_all(self) -> None:
        for node_id in list(self.nodes):
            await self.stop(node_id)

    def partition(self, node_id: str, isolated: bool = True) -> None:
        """Cut (or heal) every DLedger link of ``node_id``: its requests and those to it fail
        as a dropped connection would (each member's outbound calls go through ``_invoke``)."""
        if isolated:
            self.isolated.add(node_id)
        else:
            self.isolated.discard(node_id)
        for nid, node in self.nodes.items():
            if "_invoke" not in vars(node):
                real = node._invoke

                async def cut(peer: str, code: int, body: bytes, _real=real, _me=nid) -> bytes:
                    if _me in self.isolated or peer in self.isolated:
                        raise RemotingConnectError(self.peers[peer], "partitioned by the test")
                    return await _real(peer, code, body)
                node._invoke = cut  # type: ignore[method-assign]

    def leaders(self) -> list[DLedgerNode]:
        return [n for n in self.nodes.values() if n.role is Role.LEADER]

    async def wait_for(self, cond: Callable[[], object], timeout_s: float, what: str) -> float:
        start = time.monotonic()
        while not cond():
            if time.monotonic() - start > timeout_s:
                state = {i: (n.role.value, n.term, n.ledger.begin_index, n.ledger.end_index, n.ledger.committed_index)
                         for i, n in self.nodes.items()}
                raise AssertionError(f"timed out after {timeout_s} s waiting for {what}; "
                                     f"(role, term, begin, end, committed): {state}")
            await asyncio.sleep(0.02)
        return time.monotonic() - start

    async def wait_leader(self, timeout_s: float = 20.0) -> DLedgerNode:
        def one() -> bool:
            ls = self.leaders()
            return len(ls) == 1 and all(n.role is Role.FOLLOWER and n.term == ls[0].term
                                        for n in self.nodes.values() if n is not ls[0])
        await self.wait_for(one, timeout_s, "one leader and followers in its term")
        return self.leaders()[0]


def record(template: bytes) -> Callable[[int], bytes]:
    """``build(physical_offset)`` for :meth:`DLedgerNode.append`: a message record with its
    PHYSICALOFFSET field set."""
    def build(phy: int) -> bytes:
        out = bytearray(template)
        struct.pack_into(">q", out, 28, phy)
        return bytes(out)
    return build


def log_bytes(node: DLedgerNode) -> bytes:
    ledger = node.ledger
    return b"".join(mf.read_raw(0, mf.wrote_position) for mf in ledger.data.files)
