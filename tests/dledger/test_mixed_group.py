"""A member of ours in a group of Apache RocketMQ 4.9.8 brokers: the captured leader (n0, Java)
drives our node as n1 with its real frames — heartbeats, COMPARE, TRUNCATE, 199 APPENDs and the
COMMIT pushes of the replication scenario — and every answer of ours is byte-identical to what
the Java n1 answered; our log ends up byte-identical to Java's."""

from __future__ import annotations

import asyncio
import base64
import os

import pytest
from rocketmq_broker.dledger.config import DLedgerConfig
from rocketmq_broker.dledger.entry import DLedgerEntry
from rocketmq_broker.dledger.ledger import DLedgerLedger
from rocketmq_broker.dledger.node import DLedgerNode, Role
from rocketmq_sdk.remoting import RemotingClient, RemotingCommand

from .cluster import free_ports
from .golden import frames, replicated_pushes

pytestmark = pytest.mark.timeout(120)


def test_our_follower_answers_a_java_leader_byte_for_byte(tmp_path):
    async def scenario() -> None:
        p0, p1, p2 = free_ports(3)
        peers = {"n0": f"127.0.0.1:{p0}", "n1": f"127.0.0.1:{p1}", "n2": f"127.0.0.1:{p2}"}  # n0, n2: nobody
        ledger = DLedgerLedger(os.path.join(str(tmp_path), "dledger-n1"), 256 * 1024)
        ledger.load()
        node = DLedgerNode(DLedgerConfig("broker-a", "n1", peers), ledger)
        await node.start()
        client = RemotingClient()
        try:
            async def replay(frame) -> bytes:
                resp = await client.invoke(peers["n1"], RemotingCommand.decode(frame.raw[4:]), 5000)
                assert resp.code == 200
                return resp.body

            hb = next(f for f in frames() if f.src == "dledger_election.jsonl" and f.seq == 48)  # n0 → n1, term 1
            assert await replay(hb) == b'{"code":416,"term":-1}'  # a higher term: not ready yet, as Java [P 246]
            for _ in range(200):
                if node.term == 1:
                    break
                await asyncio.sleep(0.01)
            assert await replay(hb) == b'{"code":200,"term":-1}'
            assert node.role is Role.FOLLOWER and node.leader_id == "n0"

            stream = [f for f in frames() if f.src == "dledger_replication.jsonl"]
            answers = {}
            commits, heartbeats = [], []
            for f in stream:
                if f.sender != "n1" or f.name != "RESPONSE":
                    continue
                kind = f.request_name
                if kind == "PUSH/COMMIT":
                    commits.append(f.body)
                elif kind == "HEART_BEAT":
                    heartbeats.append(f.body)
                else:
                    answers[(kind, f.json["index"])] = f.body
            counts = {"PUSH/COMMIT": 0, "HEART_BEAT": 0, "other": 0}
            for f in stream:
                if f.sender != "n0" or f.receiver != "n1":
                    continue
                ours = await replay(f)
                if f.name == "HEART_BEAT":
                    assert ours == heartbeats[counts["HEART_BEAT"]]
                    counts["HEART_BEAT"] += 1
                elif f.json["type"] == "COMMIT":
                    assert ours == commits[counts["PUSH/COMMIT"]], f.seq
                    counts["PUSH/COMMIT"] += 1
                else:
                    assert ours == answers[("PUSH/" + f.json["type"], f.json["entry"]["index"])], f.seq
                    counts["other"] += 1
            print(f"replayed {sum(counts.values())} Java leader frames, every answer byte-identical: {counts}")
            assert counts["other"] == 201 and counts["PUSH/COMMIT"] >= 1
            golden = b"".join(DLedgerEntry(e["index"], e["term"], e["pos"], base64.b64decode(e["body"])).encode()
                              for e in (f.json["entry"] for f in replicated_pushes()))
            assert ledger.data.files[0].read_raw(0, len(golden) + 16) == golden + bytes(16)
            assert (ledger.end_index, ledger.committed_index) == (199, 199)
        finally:
            await client.close()
            await node.stop()
            ledger.shutdown()
    asyncio.run(scenario())
