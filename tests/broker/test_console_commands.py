"""``rocketmq-namesrv -c namesrv.conf`` and ``rocketmq-broker -c broker.conf`` as real processes."""

from __future__ import annotations

import os

from rocketmq_sdk.protocol.codes import RequestCode, ResponseCode

from tests.broker.conftest import BIN


def test_console_commands_run_a_name_server_and_a_broker_from_conf_files(tmp_path, client, server_process):
    (tmp_path / "namesrv.conf").write_text("listenPort=0\n")
    ns = server_process([os.path.join(BIN, "rocketmq-namesrv"), "-c", str(tmp_path / "namesrv.conf")])
    namesrv = ns.lines["NAMESRV"]
    (tmp_path / "broker.conf").write_text(
        "brokerClusterName=ConsoleCluster\nbrokerName=broker-console\nbrokerId=0\nlistenPort=0\n"
        f"namesrvAddr={namesrv}\nstorePathRootDir={tmp_path / 'store'}\nautoCreateTopicEnable=true\n"
        "mappedFileSizeCommitLog=1048576\nflushDiskType=ASYNC_FLUSH\n")
    broker = server_process([os.path.join(BIN, "rocketmq-broker"), "-c", str(tmp_path / "broker.conf")])
    assert broker.lines["BROKER"].startswith("127.0.0.1:")
    r = client.invoke(namesrv, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"})
    assert r.code == ResponseCode.SUCCESS
    assert b"broker-console" in r.body and broker.lines["BROKER"].encode() in r.body
    assert (tmp_path / "store" / "abort").exists()  # the store is open at storePathRootDir
    assert broker.stop() == 0
    assert "broker broker-console stopped" in broker.log()  # logs go to stderr
    assert not (tmp_path / "store" / "abort").exists()


def test_namesrv_conf_with_tls_off_and_unset_paths_serves_plaintext(tmp_path, client, server_process):
    # regression: the CLI converted with type(default)(value): bool("false") is True (TLS on), and
    # a key whose default is None (tlsServerCertPath) crashed with NoneType(value)
    (tmp_path / "namesrv.conf").write_text("listenPort=0\ntlsEnable=false\ntlsServerCertPath=\n"
                                           "tlsServerKeyPath=\norderMessageEnable=true\n")
    ns = server_process([os.path.join(BIN, "rocketmq-namesrv"), "-c", str(tmp_path / "namesrv.conf")])
    r = client.invoke(ns.lines["NAMESRV"], RequestCode.GET_NAMESRV_CONFIG)  # a plaintext client
    assert r.code == ResponseCode.SUCCESS
    lines = r.body.decode().splitlines()
    assert "tlsEnable=false" in lines and "tlsServerCertPath=" in lines and "orderMessageEnable=true" in lines
    assert ns.stop() == 0


def test_namesrv_conf_with_a_bad_value_is_refused_naming_the_key(tmp_path):
    import subprocess

    (tmp_path / "namesrv.conf").write_text("listenPort=0\ntlsEnable=yes\n")
    done = subprocess.run([os.path.join(BIN, "rocketmq-namesrv"), "-c", str(tmp_path / "namesrv.conf")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "tlsEnable" in done.stderr and "not a boolean" in done.stderr
