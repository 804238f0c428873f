"""LEADERSHIP_TRANSFER (51005) as DLedger 0.3.1.2 runs it: the leader stops accepting appends,
brings the transferee up to date, the transferee campaigns in term + 1 and wins; refusals
(unknown member, stale term, lagging transferee, not the leader) leave the leader leading."""

from __future__ import annotations

import asyncio

import pytest
from rocketmq_broker.dledger.node import AppendError, DLedgerNode, Role
from rocketmq_broker.dledger.protocol import (
    DLedgerCode,
    DLedgerRequestCode,
    LeadershipTransferRequest,
    LeadershipTransferResponse,
    MetadataRequest,
    MetadataResponse,
)
from rocketmq_sdk.remoting.client import RemotingClient
from rocketmq_sdk.remoting.command import RemotingCommand

from .cluster import Group, log_bytes, record
from .test_raft import in_group, send, templates

pytestmark = pytest.mark.timeout(120)


async def ask(addr: str, code: int, body: bytes, timeout_ms: float = 10_000) -> bytes:
    """One DLedger request over the wire, as an admin client sends it; the answer's body."""
    client = RemotingClient()
    try:
        resp = await client.invoke(addr, RemotingCommand.request(code, body=body), timeout_ms)
    finally:
        await client.close()
    assert resp.code == 200, resp
    return resp.body


async def transfer(g: Group, leader: DLedgerNode, transferee: str, term: int | None = None,
                   remote: str | None = None) -> LeadershipTransferResponse:
    lid = leader.config.self_id
    req = LeadershipTransferRequest(group="broker-a", remote_id=remote or lid, transfer_id=lid,
                                    transferee_id=transferee, term=leader.term if term is None else term)
    body = await ask(g.peers[remote or lid], DLedgerRequestCode.LEADERSHIP_TRANSFER, req.encode())
    return LeadershipTransferResponse.decode(body)


def test_transfer_under_appends_loses_nothing_and_moves_the_leader(tmp_path):
    async def scenario(g: Group, leader: DLedgerNode) -> None:
        bodies = templates()
        old_term = leader.term
        target = next(i for i in g.nodes if i != leader.config.self_id)
        acked: list[int] = []
        refused: dict[str, int] = {}
        stop = asyncio.Event()

        async def writer() -> None:  # appends to whoever leads, as the broker's sends do
            i = 0
            while not stop.is_set():
                lead = g.leaders()
                if not lead:
                    await asyncio.sleep(0.005)
                    continue
                b = bodies[i % len(bodies)]
                try:
                    entry, fut = lead[0].append(len(b), record(b))
                except AppendError as exc:
                    refused[exc.code.name] = refused.get(exc.code.name, 0) + 1
                    await asyncio.sleep(0.005)
                    continue
                try:
                    await fut
                except AppendError as exc:
                    refused[exc.code.name] = refused.get(exc.code.name, 0) + 1
                    continue
                acked.append(entry.index)
                i += 1
        task = asyncio.ensure_future(writer())
        await g.wait_for(lambda: len(acked) >= 30, 10, "30 acked appends before the transfer")
        resp = await transfer(g, leader, target)
        assert resp.code == DLedgerCode.SUCCESS, resp
        assert resp.term == old_term + 1
        new = g.nodes[target]
        assert new.role is Role.LEADER and new.term == old_term + 1
        n_before = len(acked)
        await g.wait_for(lambda: len(acked) >= n_before + 30, 10, "30 acked appends on the new leader")
        stop.set()
        await task
        await g.wait_leader()
        assert g.leaders() == [new]
        end = new.ledger.end_index
        await g.wait_for(lambda: all(n.ledger.end_index == end and n.ledger.committed_index == end
                                     for n in g.nodes.values()), 10, "every log complete and committed")
        assert len(set(log_bytes(n) for n in g.nodes.values())) == 1, "logs differ after the transfer"
        # every acked entry is in the final log, in its place, once
        assert len(acked) == len(set(acked)) and max(acked) <= end
        for index in acked:
            assert new.ledger.get(index).body  # still there
        print(f"transfer {leader.config.self_id} → {target} term {old_term} → {new.term}: {len(acked)} acked, "
              f"0 lost; appends refused meanwhile: {refused}")
    in_group(tmp_path, scenario)


def test_transfer_refusals_leave_the_leader_leading(tmp_path):
    async def scenario(g: Group, leader: DLedgerNode) -> None:
        assert all(r == 200 for r in await send(leader, templates()[:5]))
        follower = next(i for i in g.nodes if i != leader.config.self_id)
        # not a member
        assert (await transfer(g, leader, "n7")).code == DLedgerCode.UNKNOWN_MEMBER
        # a stale term
        assert (await transfer(g, leader, follower, term=leader.term - 1)).code == DLedgerCode.INCONSISTENT_TERM
        # sent to a follower as if it led
        f = g.nodes[follower]
        req = LeadershipTransferRequest(group="broker-a", remote_id=follower, transfer_id=follower,
                                        transferee_id=leader.config.self_id, term=f.term)
        resp = LeadershipTransferResponse.decode(await ask(g.peers[follower], DLedgerRequestCode.LEADERSHIP_TRANSFER,
                                                           req.encode()))
        assert resp.code == DLedgerCode.NOT_LEADER
        # wrong group
        req = LeadershipTransferRequest(group="other", remote_id=leader.config.self_id,
                                        transfer_id=leader.config.self_id, transferee_id=follower, term=leader.term)
        resp = LeadershipTransferResponse.decode(await ask(g.peers[leader.config.self_id],
                                                           DLedgerRequestCode.LEADERSHIP_TRANSFER, req.encode()))
        assert resp.code == DLedgerCode.UNKNOWN_GROUP
        # garbage body
        bad = await ask(g.peers[leader.config.self_id], DLedgerRequestCode.LEADERSHIP_TRANSFER, b'{"term":"x"}')
        assert LeadershipTransferResponse.decode(bad).code == DLedgerCode.UNEXPECTED_ARGUMENT
        assert g.leaders() == [leader] and leader.transfer.transferee is None
        assert all(r == 200 for r in await send(leader, templates()[5:8])), "appends accepted after refusals"
    in_group(tmp_path, scenario)


def test_transfer_to_a_lagging_member_is_refused(tmp_path):
    async def scenario(g: Group, leader: DLedgerNode) -> None:
        lagging = next(i for i in g.nodes if i != leader.config.self_id)
        for n in g.nodes.values():
            n.config.max_leadership_transfer_wait_index = 10
        await g.stop(lagging)
        assert all(r == 200 for r in await send(leader, templates()[:20]))
        resp = await transfer(g, leader, lagging)
        assert resp.code == DLedgerCode.FALL_BEHIND_TOO_MUCH, resp
        assert g.leaders() == [leader] and leader.transfer.transferee is None
        # a member that lags less than the limit but is down: the take-leadership leg fails
        for n in g.nodes.values():
            n.config.max_leadership_transfer_wait_index = 1000
        resp = await transfer(g, leader, lagging)
        assert resp.code == DLedgerCode.NETWORK_ERROR, resp
        assert g.leaders() == [leader] and leader.transfer.transferee is None
        assert all(r == 200 for r in await send(leader, templates()[20:23])), "appends accepted again"
    in_group(tmp_path, scenario)


def test_metadata_names_group_leader_and_peers(tmp_path):
    async def scenario(g: Group, leader: DLedgerNode) -> None:
        follower = next(i for i in g.nodes if i != leader.config.self_id)
        req = MetadataRequest(group="broker-a", remote_id=follower, local_id="admin")
        resp = MetadataResponse.decode(await ask(g.peers[follower], DLedgerRequestCode.METADATA, req.encode()))
        assert resp.code == DLedgerCode.SUCCESS
        assert resp.leader_id == leader.config.self_id and resp.peers == g.peers and resp.group == "broker-a"
        req = MetadataRequest(group="broker-a", remote_id="n9", local_id="admin")
        resp = MetadataResponse.decode(await ask(g.peers[follower], DLedgerRequestCode.METADATA, req.encode()))
        assert resp.code == DLedgerCode.UNKNOWN_MEMBER
    in_group(tmp_path, scenario)


def test_a_member_that_lost_an_earlier_round_takes_leadership_in_exactly_the_next_term(tmp_path):
    """DLedger resets the last vote outcome when it moves to the next term: a member whose
    previous round ended "vote in the next term" must not skip a term when it takes over
    (it did: the transfer ended EXPIRED_TERM in term + 2)."""
    from rocketmq_broker.dledger.election import _Parse

    async def scenario(g: Group, leader: DLedgerNode) -> None:
        target = next(n for n in g.nodes.values() if n is not leader)
        target.last_parse = _Parse.WAIT_TO_VOTE_NEXT  # as after a lost cold-start round
        old = leader.term
        resp = await transfer(g, leader, target.config.self_id)
        assert resp.code == DLedgerCode.SUCCESS, resp
        assert resp.term == old + 1 and target.term == old + 1 and target.role is Role.LEADER
    in_group(tmp_path, scenario)


def test_preferred_leader_takes_over_and_keeps_leading(tmp_path):
    """preferredLeaderId=n2: whoever wins the first election hands its leadership to n2 as soon
    as n2 answers in its term (DLedger's checkPreferredLeader, every second); n2 then leads, and
    appends replicate as before. The broker key ``preferredLeaderId`` reaches the member."""
    from rocketmq_broker.dledger.store import dledger_config
    from rocketmq_broker.store.config import StoreConfig

    cfg = StoreConfig(enable_d_leger_commit_log=True, d_leger_group="g", d_leger_peers="n0-127.0.0.1:1;n1-127.0.0.1:2",
                      d_leger_self_id="n0", preferred_leader_id="n1")
    assert dledger_config(cfg).preferred_leaders == ["n1"]

    async def main() -> None:
        g = Group(str(tmp_path))
        try:
            for i in g.peers:
                g.make(i).config.preferred_leader_ids = "n2"
                await g.nodes[i].start()
            await g.wait_for(lambda: [n.config.self_id for n in g.leaders()] == ["n2"], 30, "n2 leading")
            leader = await g.wait_leader()
            assert leader.config.self_id == "n2"
            assert all(r == 200 for r in await send(leader, templates()[:10]))
            end = leader.ledger.end_index
            await g.wait_for(lambda: all(n.ledger.committed_index == end for n in g.nodes.values()), 10,
                             "every member committed")
            assert len({log_bytes(n) for n in g.nodes.values()}) == 1
            assert g.leaders() == [leader]
        finally:
            await g.stop_all()
    asyncio.run(main())
