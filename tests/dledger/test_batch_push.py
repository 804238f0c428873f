"""``enableBatchPush`` (DLedger 0.3.1.2): the leader pushes APPEND requests whose ``batchEntry``
holds several entries (up to ``maxBatchPushSize``, 4 KiB, per push); every member accepts such
pushes whatever its own setting (a Java leader may send them), and the logs stay identical."""

from __future__ import annotations

import asyncio

import pytest
from rocketmq_broker.dledger.node import DLedgerNode
from rocketmq_broker.dledger.protocol import DLedgerRequestCode, PushRequest, PushType

from .cluster import Group, log_bytes, record
from .test_raft import templates

pytestmark = pytest.mark.timeout(120)


def test_batch_pushes_replicate_identical_logs(tmp_path):
    async def main() -> None:
        g = Group(str(tmp_path))
        counts: list[int] = []
        try:
            for i in g.peers:
                node = g.make(i)
                node.config.enable_batch_push = True
                real = node._invoke

                async def spy(peer: str, code: int, body: bytes, timeout_ms=None, _real=real) -> bytes:
                    if code == DLedgerRequestCode.PUSH:
                        req = PushRequest.decode(body)
                        if req.type is PushType.APPEND:
                            counts.append(req.count)
                            assert req.batch_entry and req.entry is None
                    return await _real(peer, code, body, timeout_ms)
                node._invoke = spy  # type: ignore[method-assign]
                await node.start()
            leader: DLedgerNode = await g.wait_leader()
            bodies = templates()[:120]
            futs = [leader.append(len(b), record(b))[1] for b in bodies]  # appended together: batched
            assert all(r == 200 for r in await asyncio.gather(*futs))
            end = leader.ledger.end_index
            await g.wait_for(lambda: all(n.ledger.end_index == end and n.ledger.committed_index == end
                                         for n in g.nodes.values()), 10, "every log complete and committed")
            assert len({log_bytes(n) for n in g.nodes.values()}) == 1, "logs differ"
            assert max(counts) > 1, counts
            size = len(bodies[0]) + 48
            assert max(counts) <= 4096 // size + 1, "a push carries at most maxBatchPushSize bytes (+ one entry)"
            print(f"{len(bodies)} entries replicated in {len(counts)} APPEND pushes (max {max(counts)} a push)")
        finally:
            await g.stop_all()
    asyncio.run(main())
