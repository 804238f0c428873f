"""BlockingConnections deadlines (kernel SO_RCVTIMEO on Linux, Python socket timeouts elsewhere):
a silent broker times out near the deadline and the connection is dropped; an answer that
arrives in pieces, slower than the slack, is still read."""

from __future__ import annotations

import socket
import threading
import time

import pytest
from rocketmq_sdk.client import blocking
from rocketmq_sdk.client.blocking import BlockingConnections
from rocketmq_sdk.exceptions import RemotingSendRequestError, RemotingTimeoutError
from rocketmq_sdk.remoting import RemotingCommand


class OneShotServer:
    """Accepts connections on 127.0.0.1; ``answer(conn, frame_bytes)`` decides what to send."""

    def __init__(self, answer) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(10)
        self.addr = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.accepted = 0
        self.answer = answer
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(10)
        with conn:
            try:
                head = conn.recv(4)
                length = int.from_bytes(head, "big")
                data = b""
                while len(data) < length:
                    data += conn.recv(length - len(data))
                self.answer(conn, data)
                self._stop.wait(2)
            except OSError:
                pass

    def close(self) -> None:
        self._stop.set()
        self.sock.close()


@pytest.fixture
def silent():
    s = OneShotServer(lambda conn, frame: None)
    yield s
    s.close()


def test_a_silent_broker_times_out_near_the_deadline_and_the_connection_is_dropped(silent):
    conns = BlockingConnections(3000)
    try:
        for expected_accepts in (1, 2):
            cmd = RemotingCommand.request(310, {"b": "T"}, b"x")
            t0 = time.monotonic()
            with pytest.raises(RemotingTimeoutError):
                conns.invoke(silent.addr, cmd, 300)
            elapsed = time.monotonic() - t0
            assert 0.29 <= elapsed < 1.5
            deadline = time.monotonic() + 5
            while silent.accepted < expected_accepts and time.monotonic() < deadline:
                time.sleep(0.005)
            assert silent.accepted == expected_accepts  # a new connection after the timeout
    finally:
        conns.close()


def test_an_answer_in_slow_pieces_is_read():
    def answer(conn, frame):
        req = RemotingCommand.decode(frame)
        resp = req.response(0, ext_fields={"msgId": "X"})
        resp.flag |= 1
        data = resp.encode()
        conn.sendall(data[:5])
        time.sleep(0.05)  # the server is slow on purpose (not test synchronisation)
        conn.sendall(data[5:])

    server = OneShotServer(answer)
    conns = BlockingConnections(3000)
    try:
        cmd = RemotingCommand.request(310, {"b": "T"}, b"x")
        resp = conns.invoke(server.addr, cmd, 2000)
        assert resp.opaque == cmd.opaque and resp.ext_fields == {"msgId": "X"}
    finally:
        conns.close()
        server.close()


@pytest.mark.parametrize("check_idle", [True, False])
def test_a_connection_the_broker_closed_while_idle_is_replaced_before_the_send(monkeypatch, check_idle):
    """Brokers close idle client connections (120 s in Java); the caller-thread connections send
    no heartbeats, so the first send after a quiet spell must not meet the dead socket. Without
    the idle check (the control case) that send fails."""
    closed = threading.Event()

    def answer_then_close(conn, frame):
        req = RemotingCommand.decode(frame)
        resp = req.response(0, ext_fields={"msgId": "X"})
        resp.flag |= 1
        conn.sendall(resp.encode())
        conn.shutdown(socket.SHUT_RDWR)  # the broker's idle-channel close
        closed.set()

    server = OneShotServer(answer_then_close)
    monkeypatch.setattr(blocking, "IDLE_CHECK_S", 0.0 if check_idle else 1e9)
    conns = BlockingConnections(3000)
    try:
        first = RemotingCommand.request(310, {"b": "T"}, b"x")
        assert conns.invoke(server.addr, first, 2000).opaque == first.opaque
        assert closed.wait(10)
        second = RemotingCommand.request(310, {"b": "T"}, b"y")
        if check_idle:
            assert conns.invoke(server.addr, second, 2000).opaque == second.opaque
            assert server.accepted == 2  # a new connection, not the dead one
        else:
            with pytest.raises(RemotingSendRequestError):
                conns.invoke(server.addr, second, 2000)
    finally:
        conns.close()
        server.close()
