"""Fixtures for the interop tests: the reference cluster, unique names, route polling.

``reference_broker`` is deliberately small and self-contained so it can follow the reference
broker's API as it settles. Sources, first match wins:

1. ``ROCKETMQ_INTEROP_NAMESRV=host:port`` in the environment: an already running cluster (e.g. a
   real Apache RocketMQ 4.9.8, to check the tests themselves); nothing is started or stopped.
2. ``rocketmq_broker.embedded.start_dev_cluster(store_dir=...)`` (the documented contract).
3. ``python -m rocketmq_broker dev --store-dir DIR`` as a child process, whose output must show the
   name server address on a line mentioning "namesrv"/"name server" (read with a deadline).

When none is available the tests that use it are skipped.
"""

from __future__ import annotations

import importlib.util
import os
import re
import socket
import struct
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

START_TIMEOUT_S = 30.0
_NAMESRV_LINE = re.compile(r"(?i)(?:namesrv|name[ _-]?server)\D*?((?:\d{1,3}\.){3}\d{1,3}:\d+)")
_BROKER_LINE = re.compile(r"(?i)broker\D*?((?:\d{1,3}\.){3}\d{1,3}:\d+)")


@dataclass
class ExternalCluster:
    """A cluster the test run did not start (``namesrv_addr`` only)."""

    namesrv_addr: str
    broker_addr: str | None = None

    def stop(self) -> None:
        """Nothing to stop."""


class DevProcess:
    """``python -m rocketmq_broker dev`` as a child process (fallback when no embedded API)."""

    def __init__(self, store_dir: str) -> None:
        self.namesrv_addr = ""
        self.broker_addr: str | None = None
        self._lines: list[str] = []
        self._cond = threading.Condition()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rocketmq_broker", "dev", "--store-dir", store_dir,
             "--namesrv-port", "0", "--broker-port", "0"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        threading.Thread(target=self._read, daemon=True).start()
        deadline = time.monotonic() + START_TIMEOUT_S
        with self._cond:
            while not self.namesrv_addr:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("`python -m rocketmq_broker dev` printed no name server address:\n"
                                       + "\n".join(self._lines[-20:]))
                self._cond.wait(0.2)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._cond:
                self._lines.append(line.rstrip("\n"))
                if not self.namesrv_addr and (m := _NAMESRV_LINE.search(line)):
                    self.namesrv_addr = m.group(1)
                elif self.broker_addr is None and (m := _BROKER_LINE.search(line)):
                    self.broker_addr = m.group(1)
                self._cond.notify_all()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


@pytest.fixture(scope="module")
def reference_broker(tmp_path_factory) -> Iterator[object]:
    """A running name server + broker; ``.namesrv_addr`` is ``"127.0.0.1:port"``."""
    external = os.environ.get("ROCKETMQ_INTEROP_NAMESRV")
    if external:
        yield ExternalCluster(external)
        return
    store_dir = tmp_path_factory.mktemp("reference-store")
    try:
        from rocketmq_broker.embedded import start_dev_cluster
    except ImportError:
        start_dev_cluster = None
    if start_dev_cluster is not None:
        cluster = start_dev_cluster(store_dir=str(store_dir))
    elif importlib.util.find_spec("rocketmq_broker.__main__") is not None:
        cluster = DevProcess(str(store_dir))
    else:
        pytest.skip("reference broker not available yet (no rocketmq_broker.embedded nor __main__)")
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def unique() -> str:
    """A short suffix making topic and group names unique per test."""
    return uuid.uuid4().hex[:10]


def query_route(namesrv_addr: str, topic: str, timeout_s: float = 3.0) -> int:
    """Send one GET_ROUTEINFO_BY_TOPIC (105) and return the response code (0 = route known).

    A minimal blocking exchange (JSON header, no SDK), so it works before the SDK does.
    """
    import json

    host, port = namesrv_addr.rsplit(":", 1)
    header = json.dumps({"code": 105, "flag": 0, "language": "PYTHON", "opaque": 1, "version": 409,
                         "serializeTypeCurrentRPC": "JSON", "extFields": {"topic": topic}}).encode()
    frame = struct.pack(">II", 4 + len(header), len(header)) + header
    with socket.create_connection((host, int(port)), timeout=timeout_s) as sock:
        sock.sendall(frame)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack(">I", data[:4])[0]:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError(f"name server {namesrv_addr} closed the connection")
            data += chunk
    header_len = struct.unpack(">I", data[4:8])[0] & 0xFFFFFF
    return int(json.loads(data[8:8 + header_len])["code"])


def wait_for_route(namesrv_addr: str, topic: str, timeout_s: float = 15.0) -> None:
    """Poll the name server until it knows ``topic`` (after auto-creation by a first send).

    Raises:
        TimeoutError: the route did not appear within ``timeout_s`` seconds.
    """
    deadline = time.monotonic() + timeout_s
    code = None
    while time.monotonic() < deadline:
        code = query_route(namesrv_addr, topic)
        if code == 0:
            return
        threading.Event().wait(0.1)  # poll interval of a deadline-bounded condition poll
    raise TimeoutError(f"name server {namesrv_addr} has no route for {topic} after {timeout_s} s (last code {code})")
