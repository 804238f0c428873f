"""``python -m rocketmq_broker dev`` as a new user meets it (issue 17 item 1): Apache's default
ports when free, a paste-able ``export NAMESRV_ADDR=...`` when not, and no temporary store left
behind."""

from __future__ import annotations

import os
import socket
import sys

import pytest
from rocketmq_broker.__main__ import DEFAULT_BROKER_PORT, DEFAULT_NAMESRV_PORT, port_is_free

DEV = [sys.executable, "-m", "rocketmq_broker", "dev"]


def test_dev_takes_the_default_ports_when_free_and_removes_its_temporary_store(server_process):
    if not (port_is_free(DEFAULT_NAMESRV_PORT) and port_is_free(DEFAULT_BROKER_PORT)):
        pytest.skip("9876 or 10911 is in use on this machine")
    dev = server_process(DEV)
    store = dev.lines["STORE"]
    if dev.lines["NAMESRV"] != f"127.0.0.1:{DEFAULT_NAMESRV_PORT}":  # lost a race for the port
        assert "export NAMESRV_ADDR=" + dev.lines["NAMESRV"] in dev.log()
    assert os.path.isdir(store)
    assert dev.stop() == 0
    assert not os.path.exists(store), "the temporary store is deleted on exit"


def test_dev_says_which_port_it_took_when_9876_is_busy(server_process, tmp_path):
    blocker = socket.socket()
    try:
        try:
            blocker.bind(("127.0.0.1", DEFAULT_NAMESRV_PORT))
            blocker.listen()
        except OSError:
            pass  # already taken by someone else: the situation under test anyway
        dev = server_process(DEV + ["--store", str(tmp_path / "st"), "--broker-port", "0"])
        addr = dev.lines["NAMESRV"]
        assert addr.startswith("127.0.0.1:") and addr != f"127.0.0.1:{DEFAULT_NAMESRV_PORT}"
        assert f"export NAMESRV_ADDR={addr}\n" in dev.log()
        assert dev.stop() == 0
    finally:
        blocker.close()
    assert os.path.isdir(tmp_path / "st"), "--store DIR is kept"


def test_explicit_port_zero_picks_a_free_port_without_remarks(server_process, tmp_path):
    dev = server_process(DEV + ["--store-dir", str(tmp_path / "st"), "--namesrv-port", "0", "--broker-port", "0"])
    assert dev.lines["NAMESRV"] != f"127.0.0.1:{DEFAULT_NAMESRV_PORT}"
    assert "export NAMESRV_ADDR" not in dev.log()
    assert dev.stop() == 0
