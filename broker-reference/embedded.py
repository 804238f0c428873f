"""An embedded name server + broker for the demo, tests and examples (see docs/architecture.md)."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

from .broker.config import BrokerConfig
from .broker.controller import BrokerController
from .namesrv.server import NameServer, NamesrvConfig


class DevClusterError(RuntimeError):
    """The embedded cluster did not start (its stderr tail is in the message)."""


@dataclass
class DevCluster:
    """A running name server and broker on 127.0.0.1. Use :func:`start_dev_cluster`."""

    namesrv_addr: str = ""
    broker_addr: str = ""
    store_dir: str = ""
    _proc: subprocess.Popen | None = None
    _thread: threading.Thread | None = None
    _loop: asyncio.AbstractEventLoop | None = None
    _servers: list = field(default_factory=list)
    _owns_store: bool = False
    _stopped: bool = False

    def stop(self, timeout_s: float = 15.0) -> None:
        """Stop both servers (idempotent); the store is flushed and a temporary one removed."""
        if self._stopped:
            return
        self._stopped = True
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.send_signal(signal.SIGTERM)
                try:
                    self._proc.wait(timeout_s)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait(5)
        elif self._loop is not None:
            async def _stop() -> None:
                for s in reversed(self._servers):
                    await s.stop()

            fut = asyncio.run_coroutine_threadsafe(_stop(), self._loop)
            try:
                fut.result(timeout_s)
            finally:
                self._loop.call_soon_threadsafe(self._loop.stop)
                if self._thread is not None:
                    self._thread.join(timeout_s)
        if self._owns_store:
            shutil.rmtree(self.store_dir, ignore_errors=True)

    def __enter__(self) -> DevCluster:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def start_dev_cluster(store_dir: str | None = None, *, in_process: bool = False,
                      broker_config: dict | None = None, start_timeout_s: float = 30.0) -> DevCluster:
    """Start a name server and a broker on free 127.0.0.1 ports.

    Args:
        store_dir: store root; a temporary directory (removed at stop) when None.
        in_process: run on a background asyncio thread in this process instead of a child
            process (faster to start; shares this process's GIL).
        broker_config: extra :class:`BrokerConfig` fields (snake_case), in-process mode only,
            plus ``flush_disk_type`` and ``mapped_file_size_commit_log`` in both modes.
        start_timeout_s: how long to wait for both servers.

    Raises:
        DevClusterError: the servers did not come up in time.
    """
    owns = store_dir is None
    store_dir = store_dir or tempfile.mkdtemp(prefix="rocketmq-store-")
    extra = dict(broker_config or {})
    if in_process:
        return _start_in_process(store_dir, owns, extra, start_timeout_s)
    cmd = [sys.executable, "-m", "rocketmq_broker", "dev", "--store-dir", store_dir]
    if "flush_disk_type" in extra:
        cmd += ["--flush-disk-type", str(extra["flush_disk_type"])]
    if "mapped_file_size_commit_log" in extra:
        cmd += ["--commit-log-file-size", str(extra["mapped_file_size_commit_log"])]
    os.makedirs(store_dir, exist_ok=True)
    err_path = os.path.join(store_dir, "dev-cluster.log")
    err = open(err_path, "ab")  # noqa: SIM115 - handed to the child
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, text=True)
    err.close()
    cluster = DevCluster(store_dir=store_dir, _proc=proc, _owns_store=owns)
    deadline = time.monotonic() + start_timeout_s
    lines: dict[str, str] = {}

    def reader() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            kind, _, value = line.strip().partition(" ")
            lines[kind] = value
            if kind == "READY":
                break

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    t.join(max(0.0, deadline - time.monotonic()))
    if "READY" not in lines:
        cluster.stop()
        tail = ""
        if os.path.exists(err_path):
            with open(err_path, errors="replace") as fh:
                tail = fh.read()[-2000:]
        raise DevClusterError(f"dev cluster did not start within {start_timeout_s}s: {tail}")
    cluster.namesrv_addr = lines["NAMESRV"]
    cluster.broker_addr = lines["BROKER"]
    return cluster


def _start_in_process(store_dir: str, owns: bool, extra: dict, timeout_s: float) -> DevCluster:
    loop = asyncio.new_event_loop()
    cluster = DevCluster(store_dir=store_dir, _loop=loop, _owns_store=owns)
    t = threading.Thread(target=loop.run_forever, name="rocketmq-dev-cluster", daemon=True)
    cluster._thread = t
    t.start()

    async def start() -> None:
        ns = NameServer(NamesrvConfig(listen_port=0))
        await ns.start()
        cluster._servers.append(ns)
        cfg = BrokerConfig(listen_port=0, namesrv_addr=ns.addr, store_path_root_dir=store_dir,
                           mapped_file_size_commit_log=64 * 1024 * 1024, **extra)
        broker = BrokerController(cfg)
        await broker.start()
        cluster._servers.append(broker)
        cluster.namesrv_addr = ns.addr
        cluster.broker_addr = cfg.broker_addr
        cluster.broker = broker  # type: ignore[attr-defined]

    try:
        asyncio.run_coroutine_threadsafe(start(), loop).result(timeout_s)
    except Exception as exc:
        cluster.stop()
        raise DevClusterError(f"dev cluster did not start: {exc}") from exc
    return cluster
