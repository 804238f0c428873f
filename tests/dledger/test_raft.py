"""Three DLedger members elect, replicate, commit by majority, fail over and bring a returning
member in line (COMPARE / TRUNCATE / APPEND), with timers scaled to a tenth of DLedger's."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from rocketmq_broker.dledger.entry import DLedgerEntry
from rocketmq_broker.dledger.node import AppendError, DLedgerNode, Role

from .cluster import Group, log_bytes, record
from .golden import replicated_pushes

pytestmark = pytest.mark.timeout(120)


def templates() -> list[bytes]:
    import base64
    return [base64.b64decode(f.json["entry"]["body"]) for f in replicated_pushes()]


async def send(leader, bodies) -> list:
    futs = []
    for b in bodies:
        _, fut = leader.append(len(b), record(b))
        futs.append(fut)
    return await asyncio.gather(*futs, return_exceptions=True)


def in_group(tmp_path, scenario: Callable[[Group, DLedgerNode], Awaitable[None]]) -> None:
    """Run ``scenario(group, leader)`` on a started three-member group, stopped afterwards."""
    async def main() -> None:
        g = Group(str(tmp_path))
        try:
            for i in g.peers:
                await g.start(i)
            await scenario(g, await g.wait_leader())
        finally:
            await g.stop_all()
    asyncio.run(main())


def test_election_replication_and_commit(tmp_path):
    async def scenario(g: Group, leader: DLedgerNode) -> None:
        assert leader.term >= 0
        results = await send(leader, templates()[:60])
        assert all(r == 200 for r in results), results
        await g.wait_for(lambda: all(n.ledger.committed_index == 59 for n in g.nodes.values()), 10,
                         "followers learn the commit index (COMMIT push)")
        logs = {i: log_bytes(n) for i, n in g.nodes.items()}
        assert len(set(logs.values())) == 1, "logs differ"
        first = g.nodes[next(iter(g.nodes))].ledger.get(0)
        assert first.term == leader.term and first.pos == 0
        # the record's PHYSICALOFFSET is pos + 48 on every node
        import struct
        assert struct.unpack_from(">q", first.body, 28)[0] == 48
        print(f"leader {leader.config.self_id} term {leader.term}; 60 entries committed on 3 nodes")
    in_group(tmp_path, scenario)


def test_append_refused_when_not_leader_and_fails_without_quorum(tmp_path):
    async def scenario(g: Group, leader: DLedgerNode) -> None:
        follower = next(n for n in g.nodes.values() if n is not leader)
        with pytest.raises(AppendError) as err:
            follower.append(10, lambda phy: bytes(10))
        assert err.value.code == 404
        for i in [i for i in g.nodes if g.nodes[i] is not leader]:
            await g.stop(i)
        _, fut = leader.append(len(templates()[0]), record(templates()[0]))
        with pytest.raises(AppendError) as err:
            await asyncio.wait_for(fut, 5)
        assert err.value.code == 502  # WAIT_QUORUM_ACK_TIMEOUT
        assert leader.ledger.committed_index == -1
    in_group(tmp_path, scenario)


def test_leader_stop_new_leader_and_catch_up_of_returning_member(tmp_path):
    async def scenario(g: Group, leader: DLedgerNode) -> None:
        bodies = templates()
        assert all(r == 200 for r in await send(leader, bodies[:40]))
        old_id, old_term = leader.config.self_id, leader.term
        await g.stop(old_id)
        elapsed = await g.wait_for(lambda: len(g.leaders()) == 1, 20, "a new leader")
        new = g.leaders()[0]
        assert new.term > old_term and new.ledger.end_index == 39
        print(f"new leader {new.config.self_id} in term {new.term} {elapsed:.2f} s after the stop")
        assert all(r == 200 for r in await send(new, bodies[40:100]))
        await g.start(old_id)  # the old leader returns with its log and catches up
        await g.wait_for(lambda: g.nodes[old_id].ledger.end_index == 99 and g.nodes[old_id].role is Role.FOLLOWER
                         and g.nodes[old_id].ledger.committed_index == 99, 20, "catch-up")
        logs = {i: log_bytes(n) for i, n in g.nodes.items()}
        assert len(set(logs.values())) == 1
        assert g.nodes[old_id].ledger.get(40).term == new.term
    in_group(tmp_path, scenario)


def test_divergent_tail_is_truncated_and_empty_member_filled(tmp_path):
    """The partition shape: the old leader appended entries no one else got, a new leader (higher
    term) wrote on; on return the old tail is compared away and truncated. Then a member that
    lost its whole store is filled from the first entry (COMPARE 406 → TRUNCATE at begin → APPEND)."""
    async def scenario(g: Group, leader: DLedgerNode) -> None:
        import shutil

        from rocketmq_broker.dledger.ledger import DLedgerLedger

        from .cluster import FILE_SIZE
        bodies = templates()
        assert all(r == 200 for r in await send(leader, bodies[:30]))
        old_id, old_term = leader.config.self_id, leader.term
        await g.stop(old_id)
        lone = DLedgerLedger(str(tmp_path / f"dledger-{old_id}"), FILE_SIZE)
        lone.load()
        for b in bodies[100:103]:  # its unreplicated tail
            pos = lone.next_pos(len(b))
            lone.append(DLedgerEntry(lone.end_index + 1, old_term, pos, record(b)(pos + 48)))
        lone.shutdown()
        await g.wait_for(lambda: len(g.leaders()) == 1, 20, "a new leader")
        new = g.leaders()[0]
        assert all(r == 200 for r in await send(new, bodies[30:50]))
        await g.start(old_id)
        await g.wait_for(lambda: all(n.ledger.end_index == 49 and n.ledger.committed_index == 49
                                     for n in g.nodes.values()), 20, "truncate + catch-up")
        assert g.nodes[old_id].ledger.get(30).term == new.term
        assert len({log_bytes(n) for n in g.nodes.values()}) == 1
        empty = next(i for i, n in g.nodes.items() if n is not new and i != old_id)
        await g.stop(empty)
        shutil.rmtree(tmp_path / f"dledger-{empty}")
        await g.start(empty)
        await g.wait_for(lambda: g.nodes[empty].ledger.end_index == 49
                         and g.nodes[empty].ledger.committed_index == 49, 20, "empty member filled")
        assert len({log_bytes(n) for n in g.nodes.values()}) == 1
        # The group still takes writes. Not necessarily through `new`: DLedger has no pre-vote, so a
        # restarted member whose election timer fires before the leader's first heartbeat reaches
        # it (a loaded machine) starts an election in a higher term and the leader steps down.
        await g.wait_for(lambda: len(g.leaders()) == 1, 20, "one leader after the refill")
        assert all(r == 200 for r in await send(g.leaders()[0], bodies[50:55]))
        await g.wait_for(lambda: all(n.ledger.committed_index == 54 for n in g.nodes.values()), 20,
                         "the last writes committed everywhere")
    in_group(tmp_path, scenario)


def test_partitioned_leader_steps_down_and_its_unacknowledged_tail_is_truncated(tmp_path):
    """The partition scenario of the 4.9.8 capture: the leader's links are cut while it keeps
    taking appends; they fail (WAIT_QUORUM_ACK_TIMEOUT, the broker's code 1), it steps down after
    max_heart_beat_leak heartbeats (then NOT_LEADER, the broker's 14), the others elect a leader in
    a higher term and write on; on heal the old leader's tail is compared away and truncated."""
    async def scenario(g: Group, leader: DLedgerNode) -> None:
        bodies = templates()
        assert all(r == 200 for r in await send(leader, bodies[:20]))
        old = leader.config.self_id
        await g.wait_for(lambda: all(n.ledger.committed_index == 19 for n in g.nodes.values()), 10, "commit")
        g.partition(old)
        results = await send(leader, bodies[20:23])  # appended on the isolated leader only
        assert [getattr(r, "code", None) for r in results] == [502, 502, 502]
        assert leader.ledger.end_index == 22 and leader.ledger.committed_index == 19
        await g.wait_for(lambda: leader.role is not Role.LEADER, 10, "the isolated leader steps down")
        with pytest.raises(AppendError) as err:
            leader.append(10, lambda phy: bytes(10))
        assert err.value.code == 404
        await g.wait_for(lambda: any(n.role is Role.LEADER for i, n in g.nodes.items() if i != old), 10,
                         "a new leader among the others")
        new = next(n for i, n in g.nodes.items() if i != old and n.role is Role.LEADER)
        assert new.term > leader.ledger.end_term
        assert all(r == 200 for r in await send(new, bodies[30:40]))  # indexes 20..29 in the new term
        g.partition(old, isolated=False)
        await g.wait_for(lambda: leader.role is Role.FOLLOWER and leader.ledger.end_index == 29
                         and leader.ledger.committed_index == 29, 20, "heal: truncate and catch up")
        assert leader.ledger.get(20).term == new.term  # the old tail (term of the old leader) is gone
        assert len({log_bytes(n) for n in g.nodes.values()}) == 1
        print(f"partitioned {old}: 3 unacknowledged entries truncated on heal, new leader "
              f"{new.config.self_id} in term {new.term}")
    in_group(tmp_path, scenario)
