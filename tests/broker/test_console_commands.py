"""``rocketmq-namesrv -c namesrv.conf`` and ``rocketmq-broker -c broker.conf`` as real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from rocketmq_sdk.protocol.codes import RequestCode, ResponseCode

BIN = os.path.dirname(sys.executable)


def _start(cmd: list[str]) -> tuple[subprocess.Popen, dict[str, str]]:
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: dict[str, str] = {}
    deadline = time.monotonic() + 30
    while "READY" not in lines and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        kind, _, value = line.strip().partition(" ")
        lines[kind] = value
    assert "READY" in lines, f"{cmd[0]} did not start: {proc.stderr.read() if proc.poll() is not None else ''}"
    return proc, lines


def _stop(proc: subprocess.Popen) -> str:
    proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate(timeout=5)
    return err


def test_console_commands_run_a_name_server_and_a_broker_from_conf_files(tmp_path, client):
    (tmp_path / "namesrv.conf").write_text("listenPort=0\n")
    ns, ns_lines = _start([os.path.join(BIN, "rocketmq-namesrv"), "-c", str(tmp_path / "namesrv.conf")])
    broker = None
    try:
        namesrv = ns_lines["NAMESRV"]
        (tmp_path / "broker.conf").write_text(
            "brokerClusterName=ConsoleCluster\nbrokerName=broker-console\nbrokerId=0\nlistenPort=0\n"
            f"namesrvAddr={namesrv}\nstorePathRootDir={tmp_path / 'store'}\nautoCreateTopicEnable=true\n"
            "mappedFileSizeCommitLog=1048576\nflushDiskType=ASYNC_FLUSH\n")
        broker, b_lines = _start([os.path.join(BIN, "rocketmq-broker"), "-c", str(tmp_path / "broker.conf")])
        assert b_lines["BROKER"].startswith("127.0.0.1:")
        r = client.invoke(namesrv, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"})
        assert r.code == ResponseCode.SUCCESS
        assert b"broker-console" in r.body and b_lines["BROKER"].encode() in r.body
        assert (tmp_path / "store" / "abort").exists()  # the store is open at storePathRootDir
    finally:
        if broker is not None:
            err = _stop(broker)
            assert "broker broker-console stopped" in err  # logs go to stderr
        _stop(ns)
