"""Fixtures: an in-process name server + broker, a remoting client bound to a private loop, and
server processes (``python -m rocketmq_broker dev``, ``rocketmq-namesrv``, ``rocketmq-broker``)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator

import pytest
from rocketmq_broker.embedded import DevClusterError, read_announcements, start_dev_cluster
from rocketmq_sdk.protocol.codes import RequestCode
from rocketmq_sdk.remoting import RemotingClient, RemotingCommand


class SyncClient:
    """Blocking wrapper over ``RemotingClient`` on its own loop thread (test helper)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.client: RemotingClient = self.run(self._make())

    async def _make(self) -> RemotingClient:
        return RemotingClient()

    def run(self, coro, timeout: float = 30):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def invoke(self, addr: str, code: int, ext: dict | None = None, body: bytes = b"",
               timeout_ms: int = 5000, cmd: RemotingCommand | None = None) -> RemotingCommand:
        cmd = cmd or RemotingCommand.request(code, ext or {}, body)
        return self.run(self.client.invoke(addr, cmd, timeout_ms))

    def oneway(self, addr: str, code: int, ext: dict | None = None, body: bytes = b"") -> None:
        self.run(self.client.invoke_oneway(addr, RemotingCommand.request(code, ext or {}, body)))

    def notified_groups(self) -> list[str]:
        """A list the broker's NOTIFY_CONSUMER_IDS_CHANGED requests to this client append their
        ``consumerGroup`` to (registered now, filled from the loop thread)."""
        notified: list[str] = []

        async def on_notify(ch, cmd):
            notified.append(cmd.ext_fields["consumerGroup"])

        self.client.register_processor(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, on_notify)
        return notified

    def close(self) -> None:
        self.run(self.client.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


#: the broker feature tests: each test of these modules taking ``cluster`` (or the module's own
#: ``fast_cluster``) runs against a single broker ("1m") and against the master of an in-process
#: DLedger group of three ("dledger", issue 27)
DLEDGER_FEATURE_MODULES = {"test_send_pull", "test_transactions", "test_locks", "test_clients_offsets",
                           "test_groups_and_stats", "test_admin_and_persistence"}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.module.__name__.rsplit(".", 1)[-1] not in DLEDGER_FEATURE_MODULES:
        return
    modes = ["1m"] if metafunc.definition.get_closest_marker("single_master") else ["1m", "dledger"]
    for name in ("cluster", "fast_cluster"):
        if name in metafunc.fixturenames:
            metafunc.parametrize(name, modes, indirect=True)


def cluster_mode(request: pytest.FixtureRequest) -> str:
    """The deployment mode a ``cluster``-like fixture was parametrised with ("1m" by default)."""
    return getattr(request, "param", "1m")


@pytest.fixture
def cluster(tmp_path, request):
    c = start_dev_cluster(str(tmp_path / "store"), in_process=True, cluster=cluster_mode(request))
    yield c
    c.stop()


@pytest.fixture
def client():
    c = SyncClient()
    yield c
    c.close()


BIN = os.path.dirname(sys.executable)
"""Directory of the console scripts ``rocketmq-namesrv`` / ``rocketmq-broker`` of this venv."""


class ServerProcess:
    """A server child process started by the ``server_process`` fixture.

    Attributes:
        proc: the ``subprocess.Popen``.
        lines: what it announced on stdout up to READY (``{"NAMESRV": addr, "BROKER": addr, ...}``).
        log_path: file receiving its stderr (the logs).
    """

    def __init__(self, cmd: list[str], log_path: str, timeout_s: float) -> None:
        self.log_path = log_path
        with open(log_path, "ab") as err:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL,
                                         text=True)
        try:
            self.lines = read_announcements(self.proc, timeout_s)
        except DevClusterError as exc:
            self.kill()
            raise AssertionError(f"{cmd[0]} did not start: {exc}\n{self.log()[-3000:]}") from None

    def log(self) -> str:
        """Everything the process wrote on stderr so far."""
        with open(self.log_path, errors="replace") as fh:
            return fh.read()

    def stop(self, timeout_s: float = 20.0) -> int:
        """SIGTERM (clean shutdown), SIGKILL after ``timeout_s``; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.wait(5)

    def kill(self) -> int:
        """SIGKILL at once (a crash: no flush, the abort file stays); returns the exit code."""
        if self.proc.poll() is None:
            self.proc.kill()
        return self.proc.wait(5)


@pytest.fixture
def server_process(tmp_path) -> Iterator[Callable[..., ServerProcess]]:
    """Factory ``server_process(cmd, timeout_s=30)``: start ``cmd``, wait for its READY line and
    return a :class:`ServerProcess`; every process still running is stopped at teardown."""
    started: list[ServerProcess] = []

    def start(cmd: list[str], timeout_s: float = 30.0) -> ServerProcess:
        sp = ServerProcess(cmd, str(tmp_path / f"server-{len(started)}.log"), timeout_s)
        started.append(sp)
        return sp

    yield start
    for sp in reversed(started):
        sp.stop()


def assert_restartable(listen_port: int, ha_port: int) -> None:
    """A broker that a test restarts must own ports no outgoing socket can hold meanwhile: its
    listen port, its HA port and its VIP port (listen - 2) below the kernel's ephemeral range
    (``ip_local_port_range``), else the restart can fail with EADDRINUSE."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as fh:
            low = int(fh.read().split()[0])
    except OSError:
        low = 32768  # Linux's default
    ports = {"listen": listen_port, "HA": ha_port, "VIP": listen_port - 2}
    assert all(0 < p < low for p in ports.values()), f"{ports} not all below the ephemeral range ({low}-)"
