"""What a new user sees when something is wrong (issue 17 items 3 and 4): one concise exception
that says what to do next, and nothing on stderr unless the application configures logging."""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import threading
import traceback
from collections.abc import Iterator

import pytest
from rocketmq_broker.embedded import start_dev_cluster
from rocketmq_sdk import Message, Producer
from rocketmq_sdk.exceptions import (
    RemotingConnectError,
    RemotingError,
    RemotingTimeoutError,
    TopicNotExistError,
)
from rocketmq_sdk.remoting.frame import FrameDecoder, foreign_protocol


class OneShotServer:
    """Accepts connections on 127.0.0.1 and answers the first bytes received with ``reply``
    (None: never answers); closes after ``reply``."""

    def __init__(self, reply: bytes | None) -> None:
        self.reply = reply
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.addr = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.conns: list[socket.socket] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            if self.reply is not None:
                try:
                    conn.recv(65536)
                    conn.sendall(self.reply)
                except OSError:
                    pass

    def close(self) -> None:
        self.sock.close()
        for c in self.conns:
            c.close()


@pytest.fixture
def server() -> Iterator[type[OneShotServer]]:
    made: list[OneShotServer] = []

    def make(reply: bytes | None) -> OneShotServer:
        s = OneShotServer(reply)
        made.append(s)
        return s

    yield make  # type: ignore[misc]
    for s in made:
        s.close()


def _send(addr: str, **config) -> BaseException:
    config = {"mq_client_api_timeout": 1500, "send_msg_timeout": 3000, **config}
    with Producer("first_hour_pg", addr, **config) as p:
        with pytest.raises(Exception) as info:
            p.send(Message("orders", b"x"))
    return info.value


def test_refused_name_server_is_one_concise_exception():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    exc = _send(f"127.0.0.1:{port}")
    assert isinstance(exc, RemotingConnectError)
    assert str(exc).startswith(f"cannot connect to name server 127.0.0.1:{port}: ")
    assert exc.__cause__ is None and exc.__suppress_context__
    frames = traceback.extract_tb(exc.__traceback__)
    assert not [f for f in frames if "asyncio" in f.filename or f.filename.endswith("remoting/client.py")], \
        "no I/O-loop frames in what the user sees"


def test_an_http_server_is_named_as_such(server):
    http = server(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
    exc = _send(http.addr)
    assert isinstance(exc, RemotingError)
    assert "this is not a RocketMQ name server/broker (looks like HTTP)" in str(exc)


def test_tls_bytes_are_named_as_such():
    alert = bytes([0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x46])  # a TLS alert record
    with pytest.raises(Exception) as info:
        FrameDecoder().feed(alert + b"\x00" * 8)
    assert "(looks like TLS" in str(info.value)
    assert foreign_protocol(b"\x00\x00\x00\x10abc") == ""


def test_timeout_names_the_operation(server):
    silent = server(None)
    # two route lookups (the topic's, then the default topic's) of 1.5 s each: the send's own
    # bound (send_msg_timeout + 1 s) must not race them on a loaded machine
    exc = _send(silent.addr, send_msg_timeout=8000)
    assert isinstance(exc, RemotingTimeoutError)
    assert str(exc).startswith(f"get route of topic orders from name server {silent.addr}: no answer within")
    assert "GET_ROUTEINFO_BY_TOPIC (105)" in str(exc)


def test_missing_topic_without_auto_creation_says_what_to_do(tmp_path, caplog):
    cluster = start_dev_cluster(str(tmp_path / "store"), in_process=True,
                                broker_config={"auto_create_topic_enable": False})
    try:
        with caplog.at_level(logging.DEBUG, logger="rocketmq_sdk"):
            exc = _send(cluster.namesrv_addr)
    finally:
        cluster.stop()
    assert isinstance(exc, TopicNotExistError)
    assert "topic orders does not exist" in str(exc)
    assert "rocketmq-admin updateTopic -t orders -c CLUSTER" in str(exc)
    assert "autoCreateTopicEnable=true" in str(exc)
    loud = [r for r in caplog.records if r.levelno >= logging.WARNING and "TBW102" in r.getMessage()]
    assert not loud, [r.getMessage() for r in loud]


def test_library_logs_reach_stderr_only_when_the_application_configures_logging():
    code = ("import logging, rocketmq_sdk, rocketmq_broker\n"
            "logging.getLogger('rocketmq_sdk.producer').warning('sdk-warning')\n"
            "logging.getLogger('rocketmq_broker.x').error('broker-error')\n")
    quiet = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert quiet.returncode == 0 and quiet.stderr == ""
    loud = subprocess.run([sys.executable, "-c", "import logging; logging.basicConfig()\n" + code],
                          capture_output=True, text=True, timeout=60)
    assert loud.stderr.count("sdk-warning") == 1 and loud.stderr.count("broker-error") == 1


def test_cli_logging_is_configured_once():
    code = ("import logging\nfrom rocketmq_broker.runner import setup_logging\n"
            "setup_logging('INFO'); setup_logging('INFO')\n"
            "logging.getLogger('rocketmq_broker').info('once')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stderr.count("once") == 1, proc.stderr
