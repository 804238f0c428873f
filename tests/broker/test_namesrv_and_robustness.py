"""Name server expiry, malformed frames and the console commands."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import time

from rocketmq_broker.namesrv.server import NameServer, NamesrvConfig
from rocketmq_sdk.protocol.codes import RequestCode, ResponseCode
from rocketmq_sdk.remoting import RemotingClient, RemotingCommand


def test_name_server_expires_a_silent_broker():
    async def main():
        ns = NameServer(NamesrvConfig(listen_port=0, broker_channel_expired_time=200,
                                      scan_not_active_broker_interval=50))
        await ns.start()
        ns.routes.register_broker("C", "127.0.0.1:1", "b1", 0, "", {}, {})
        from rocketmq_sdk.protocol.bodies import TopicConfig
        ns.routes.register_broker("C", "127.0.0.1:1", "b1", 0, "", {"T": TopicConfig("T", 2, 2)}, {})
        cl = RemotingClient()
        try:
            r = await cl.invoke(ns.addr, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}), 2000)
            assert r.code == ResponseCode.SUCCESS
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and ns.routes.pick_route("T") is not None:
                await asyncio.sleep(0.02)
            r = await cl.invoke(ns.addr, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}), 2000)
            assert r.code == ResponseCode.TOPIC_NOT_EXIST
        finally:
            await cl.close()
            await ns.stop()

    asyncio.run(main())


def test_route_json_form_follows_request_version(cluster, client):
    """Version >= 401 gets quoted keys; the C++ 1.x client (version 63) gets fastjson's bare keys."""
    cmd = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"})
    assert b'{"0":' in client.invoke(cluster.namesrv_addr, 0, cmd=cmd).body
    old = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"})
    old.version = 63
    assert b"{0:" in client.invoke(cluster.namesrv_addr, 0, cmd=old).body


def test_malformed_frame_closes_only_that_connection(cluster, client):
    host, port = cluster.broker_addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(b"\x7f\xff\xff\xff garbage")
        s.settimeout(5)
        assert s.recv(10) == b""  # closed by the broker
    r = client.invoke(cluster.broker_addr, RequestCode.GET_MAX_OFFSET, {"topic": "TBW102", "queueId": "0"})
    assert r.code == ResponseCode.SUCCESS


def test_dev_command_prints_addresses_and_stops_on_sigterm(tmp_path, server_process):
    dev = server_process([sys.executable, "-m", "rocketmq_broker", "dev", "--store-dir", str(tmp_path / "st"),
                          "--namesrv-port", "0", "--broker-port", "0"])
    assert dev.lines["NAMESRV"].startswith("127.0.0.1:") and dev.lines["BROKER"].startswith("127.0.0.1:")
    assert dev.lines["STORE"] == str(tmp_path / "st")
    assert os.path.exists(tmp_path / "st" / "abort")
    assert dev.stop() == 0
    assert not os.path.exists(tmp_path / "st" / "abort"), "clean shutdown removes the abort file"


def test_broker_command_reads_standard_broker_conf(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerClusterName=C1\nbrokerName=bx\nbrokerId=0\nlistenPort=0\nnamesrvAddr=127.0.0.1:1\n"
                    f"storePathRootDir={tmp_path / 'st'}\nautoCreateTopicEnable=true\n"
                    "mappedFileSizeCommitLog=1048576\nflushDiskType=SYNC_FLUSH\nsomeUnknownKey=1\n")
    from rocketmq_broker.broker.config import BrokerConfig, read_properties
    cfg = BrokerConfig.from_properties(read_properties(str(conf)))
    assert (cfg.broker_cluster_name, cfg.broker_name, cfg.mapped_file_size_commit_log, cfg.flush_disk_type) == \
        ("C1", "bx", 1048576, "SYNC_FLUSH")
