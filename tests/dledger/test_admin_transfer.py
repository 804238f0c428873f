"""``AdminClient.dledger_leadership_transfer`` / ``rocketmq-admin leadershipTransfer`` on a group
of reference brokers: under a steady producer no acknowledged message is lost or stored twice,
the name server lists the new master when the call returns, and transfers to an unknown or a
lagging member fail with a clear error and leave the master in place."""

from __future__ import annotations

import threading
import time

import pytest
from click.testing import CliRunner
from rocketmq_sdk import Message, Producer
from rocketmq_sdk.admin import AdminClient
from rocketmq_sdk.admin.cli import cli
from rocketmq_sdk.exceptions import IllegalArgumentError, MQBrokerError, MQError
from rocketmq_sdk.protocol.message_codec import decode_messages

pytestmark = pytest.mark.timeout(180)

TOPIC = "DLTransfer"


def wait_stable(group):
    """The master, once every member follows it in its term (a transferee that does not know the
    leader yet refuses with INCONSISTENT_LEADER, as DLedger's does)."""
    master = group.wait_master()
    node = master.dledger.node
    group.wait_for(lambda: all(b.dledger.node.leader_id == node.config.self_id and b.dledger.node.term == node.term
                               for b in group.brokers.values()), 20, "every member following the master")
    return master


def stored_bodies(broker) -> list[bytes]:
    """Bodies of every committed message of TOPIC in the broker's log (once per stored record)."""
    ledger = broker.dledger.node.ledger
    out = []
    for index in range(max(ledger.begin_index, 0), ledger.committed_index + 1):
        for m in decode_messages(ledger.get(index).body):
            if m.topic == TOPIC:
                out.append(m.body)
    return out


def test_transfer_under_load_loses_nothing_and_registers_at_once(group):
    master = wait_stable(group)
    old = master.dledger.node.config.self_id
    target = next(i for i in group.brokers if i != old)
    acked: list[bytes] = []
    ok_times: list[float] = []
    errors: list[str] = []
    stop = threading.Event()

    def sender(n: int) -> None:
        with Producer(f"dl_transfer_{n}", namesrv_addr=group.namesrv_addr) as producer:
            i = 0
            while not stop.is_set():
                body = f"t{n}-{i}".encode()
                i += 1
                try:
                    if producer.send(Message(TOPIC, body)).send_status.name == "SEND_OK":
                        acked.append(body)
                        ok_times.append(time.monotonic())
                except MQError as exc:
                    errors.append(type(exc).__name__)
    threads = [threading.Thread(target=sender, args=(n,)) for n in range(2)]
    for t in threads:
        t.start()
    try:
        group.wait_for(lambda: len(acked) >= 40, 30, "40 acked sends before the transfer")
        with AdminClient(group.namesrv_addr) as admin:
            t0 = time.monotonic()
            r = admin.dledger_leadership_transfer("broker-a", target)
        new = group.brokers[target]
        # the call returns once the name server lists the new master: it does, right now
        assert group.ns.routes.broker_addr_table["broker-a"].broker_addrs[0] == new.config.broker_addr
        assert r.old_leader == old and r.new_leader == target and r.master_addr == new.config.broker_addr
        assert r.term == new.dledger.node.term and new.dledger.is_master
        n_before = len(acked)
        group.wait_for(lambda: len(acked) >= n_before + 40, 30, "40 acked sends through the new master")
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    group.wait_for(lambda: len({b.dledger.node.ledger.committed_index for b in group.brokers.values()}) == 1,
                   20, "every member committed the whole log")
    for b in group.brokers.values():
        stored = stored_bodies(b)
        assert len(stored) == len(set(stored)), f"{b.dledger.node.config.self_id} stored a message twice"
        missing = set(acked) - set(stored)
        assert not missing, f"{len(missing)} acknowledged messages lost on {b.dledger.node.config.self_id}"
    times = sorted(ok_times)
    gap = max((b - a for a, b in zip(times, times[1:], strict=False) if b >= t0), default=0.0)
    print(f"transfer {old} -> {target} (term {r.term}) under 2 senders: {len(acked)} acked, 0 lost, 0 stored "
          f"twice; master registered {r.registered_ms:.0f} ms after the request; longest gap between "
          f"acknowledged sends {gap * 1000:.0f} ms; failed sends meanwhile: {len(errors)}")


def test_transfer_to_unknown_or_lagging_member_fails_clearly(group):
    master = wait_stable(group)
    leader = master.dledger.node
    with AdminClient(group.namesrv_addr) as admin:
        with pytest.raises(IllegalArgumentError, match="'n7' is not a member"):
            admin.dledger_leadership_transfer("broker-a", "n7")
        with pytest.raises(IllegalArgumentError, match="already leads"):
            admin.dledger_leadership_transfer("broker-a", leader.config.self_id)
        with pytest.raises(MQError, match="not found"):
            admin.dledger_leadership_transfer("no-such-broker", "n1")
        lagging = next(i for i in group.brokers if i != leader.config.self_id)
        leader.config.max_leadership_transfer_wait_index = 5
        group.stop_broker(lagging)
        with Producer("dl_lag", namesrv_addr=group.namesrv_addr) as producer:
            for i in range(10):
                producer.send(Message(TOPIC, f"l{i}".encode()))
        with pytest.raises(MQBrokerError, match="FALL_BEHIND_TOO_MUCH") as err:
            admin.dledger_leadership_transfer("broker-a", lagging)
        assert err.value.code == 417
    assert group.master() is master and leader.transfer.transferee is None
    result = CliRunner().invoke(cli, ["leadershipTransfer", "-n", group.namesrv_addr, "-b", "broker-a", "-t", lagging])
    assert result.exit_code == 1 and "FALL_BEHIND_TOO_MUCH" in result.output, result.output
    with Producer("dl_lag2", namesrv_addr=group.namesrv_addr) as producer:
        assert producer.send(Message(TOPIC, b"after")).send_status.name == "SEND_OK"


def test_cli_transfer_moves_the_master(group):
    master = wait_stable(group)
    target = next(i for i in group.brokers if i != master.dledger.node.config.self_id)
    result = CliRunner().invoke(cli, ["leadershipTransfer", "-n", group.namesrv_addr, "-b", "broker-a", "-t", target])
    assert result.exit_code == 0, result.output
    assert f"→ {target}" in result.output and group.brokers[target].config.broker_addr in result.output
    assert group.registered_master() == group.brokers[target].config.broker_addr
