"""``start_dev_cluster(cluster="dledger", in_process=True)``: three members and a name server in
this process; a DLedger port taken by someone else between choosing and binding it (other
processes bind ports too) starts the group again on fresh ports."""

from __future__ import annotations

import socket

import pytest
from rocketmq_broker import embedded

pytestmark = pytest.mark.timeout(120)


def test_a_port_taken_before_the_group_binds_it_starts_the_group_again(tmp_path, monkeypatch):
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen()
    taken = squatter.getsockname()[1]
    real = embedded.spaced_free_ports
    calls: list[list[int]] = []

    def ports(n: int) -> list[int]:
        out = real(n)
        if not calls:
            out[0] = taken  # the first member's DLedger port: already in use
        calls.append(out)
        return out

    monkeypatch.setattr(embedded, "spaced_free_ports", ports)
    try:
        with embedded.start_dev_cluster(str(tmp_path), in_process=True, cluster="dledger") as c:
            assert len(calls) == 2 and taken not in calls[1]
            assert c.broker.dledger.is_master and c.broker_addr == c.broker.config.broker_addr
    finally:
        squatter.close()
