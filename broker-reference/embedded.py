"""An embedded name server + broker for the demo, tests and examples (see docs/architecture.md)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rocketmq_sdk.properties import camel
from rocketmq_sdk.remoting.client import client_ssl_context
from rocketmq_sdk.remoting.loop import new_event_loop, resolve_event_loop

from .broker.config import BrokerConfig
from .broker.controller import BrokerController
from .cluster_modes import MODES, DevBroker, dledger_confs, pin_ports, spawn, stop_process, write_broker_conf
from .namesrv.server import NameServer, NamesrvConfig


class DevClusterError(RuntimeError):
    """The embedded cluster did not start (its stderr tail is in the message)."""


@dataclass
class DevCluster:
    """A running name server and broker(s) on 127.0.0.1. Use :func:`start_dev_cluster`.

    Attributes:
        namesrv_addr / broker_addr: the name server and the (first) master broker.
        store_dir: the store root.
        mode: ``1m``, ``2m``, ``2m-2s-async``, ``2m-2s-sync``, ``dledger`` or ``2x-dledger`` (see
            ``rocketmq_broker.cluster_modes``).
        brokers: every broker process of a multi-process mode (:class:`DevBroker`: name, id,
            role, addr, ha_addr, pid), masters first; ``[]`` in mode ``1m``.
    """

    namesrv_addr: str = ""
    broker_addr: str = ""
    store_dir: str = ""
    mode: str = "1m"
    brokers: list[DevBroker] = field(default_factory=list)
    _namesrv_proc: subprocess.Popen | None = None
    _timeout_s: float = 30.0
    _event_loop: str = "auto"
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
        if self.brokers or self._namesrv_proc is not None:
            for b in reversed(self.brokers):  # slaves first, then masters
                stop_process(b.proc, timeout_s)
            stop_process(self._namesrv_proc, timeout_s)
        elif self._proc is not None:
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

    def broker(self, name: str, broker_id: int = 0) -> DevBroker:
        """The broker ``name``/``broker_id`` of a multi-process mode (KeyError if none)."""
        for b in self.brokers:
            if b.name == name and b.broker_id == broker_id:
                return b
        raise KeyError(f"no broker {name}/{broker_id} in mode {self.mode}")

    def kill_broker(self, name: str, broker_id: int = 0, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` (default SIGKILL: no clean stop, the ``abort`` file stays) to one broker
        process and wait for it to exit."""
        b = self.broker(name, broker_id)
        stop_process(b.proc, self._timeout_s, sig)
        b.proc = None

    def start_broker(self, name: str, broker_id: int = 0) -> DevBroker:
        """Start a stopped broker again on its store and ports (recovery as after a crash when
        it was killed); waits for its READY."""
        b = self.broker(name, broker_id)
        if b.proc is not None and b.proc.poll() is None:
            return b
        _launch_broker(b, self._timeout_s, self._event_loop)
        return b

    def __enter__(self) -> DevCluster:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def start_dev_cluster(store_dir: str | None = None, *, in_process: bool = False,
                      broker_config: dict | None = None, start_timeout_s: float = 30.0,
                      ssl_context: ssl.SSLContext | None = None, event_loop: str = "auto",
                      cluster: str = "1m") -> DevCluster:
    """Start a name server and a broker on free 127.0.0.1 ports (or, with ``cluster``, the
    brokers of a deployment mode).

    Args:
        store_dir: store root; a temporary directory (removed at stop) when None.
        in_process: run on a background asyncio thread in this process instead of a child
            process (faster to start; shares this process's GIL).
        broker_config: extra :class:`BrokerConfig` fields (snake_case), in-process mode only,
            plus ``flush_disk_type``, ``mapped_file_size_commit_log``, ``busy_poll_us`` and
            ``enable_property_filter``, ``broker_version`` (``"5.3.3"``: POP and timers,
            docs/rocketmq5.md) and ``recall_message_enable`` in both modes (``busy_poll_us`` is meant for the child process:
            in-process, polling takes the GIL from this process's threads).
        start_timeout_s: how long to wait for both servers.
        ssl_context: serve TLS only, on both servers, with this server context (in-process
            mode only); the broker registers with the name server over TLS without verifying
            its certificate. Clients then need ``use_tls``/``ssl_context``.
        event_loop: the servers' loop, ``"auto"`` (uvloop when installed), ``"asyncio"`` or
            ``"uvloop"``; ``$ROCKETMQ_EVENT_LOOP`` overrides it.
        cluster: deployment mode, ``"1m"`` (default: one name server and one broker, as
            above), ``"2m"``, ``"2m-2s-async"``, ``"2m-2s-sync"``, ``"dledger"`` or
            ``"2x-dledger"`` (DLedger groups of three: a member's ``broker_id`` here is its
            number ``n<i>``, see
            ``rocketmq_broker.cluster_modes``): a name server process and one process per
            broker; ``broker_config`` then takes broker.conf keys (camelCase or snake_case)
            for every broker; ``in_process`` and ``ssl_context`` are not available, except
            ``"dledger"`` with ``in_process``: a name server and three DLedger members on one
            background thread, DLedger timers shortened (:data:`DLEDGER_DEV_TIMERS`, a failover
            in about 2.5 s) unless ``broker_config`` sets them; the call returns once a master is
            registered and both others follow it; ``broker_addr``/``broker`` are that master.

    Raises:
        DevClusterError: the servers did not come up in time.
        ValueError: ``ssl_context`` without ``in_process``; an unknown ``cluster``, or a
            multi-process ``cluster`` with ``in_process``/``ssl_context``.
        IllegalArgumentError: an unknown ``event_loop``, or ``"uvloop"`` without uvloop.
    """
    if cluster not in MODES:
        raise ValueError(f"unknown cluster mode {cluster!r}; one of {', '.join(MODES)}")
    if cluster == "dledger" and in_process and ssl_context is None:
        resolve_event_loop(event_loop)
        owns = store_dir is None
        return _start_in_process_dledger(store_dir or tempfile.mkdtemp(prefix="rocketmq-dledger-"), owns,
                                         dict(broker_config or {}), start_timeout_s, event_loop)
    if cluster != "1m":
        if in_process or ssl_context is not None:
            raise ValueError(f"cluster={cluster!r} runs one process per broker: no in_process/ssl_context")
        return _start_multi(cluster, store_dir, dict(broker_config or {}), start_timeout_s, event_loop)
    if ssl_context is not None and not in_process:
        raise ValueError("start_dev_cluster(ssl_context=...) needs in_process=True")
    resolve_event_loop(event_loop)  # fail before anything starts
    owns = store_dir is None
    store_dir = store_dir or tempfile.mkdtemp(prefix="rocketmq-store-")
    extra = dict(broker_config or {})
    if in_process:
        return _start_in_process(store_dir, owns, extra, start_timeout_s, ssl_context, event_loop)
    cmd = [sys.executable, "-m", "rocketmq_broker", "dev", "--store-dir", store_dir,
           "--namesrv-port", "0", "--broker-port", "0", "--event-loop", event_loop]  # free ports, not 9876
    if "flush_disk_type" in extra:
        cmd += ["--flush-disk-type", str(extra["flush_disk_type"])]
    if "mapped_file_size_commit_log" in extra:
        cmd += ["--commit-log-file-size", str(extra["mapped_file_size_commit_log"])]
    if extra.get("busy_poll_us"):
        cmd += ["--busy-poll-us", str(int(extra["busy_poll_us"]))]
    if extra.get("enable_property_filter"):
        cmd += ["--enable-property-filter"]
    if extra.get("broker_version"):
        cmd += ["--broker-version", str(extra["broker_version"])]
    if extra.get("recall_message_enable"):
        cmd += ["--recall-message-enable"]
    os.makedirs(store_dir, exist_ok=True)
    err_path = os.path.join(store_dir, "dev-cluster.log")
    err = open(err_path, "ab")  # noqa: SIM115 - handed to the child
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, text=True)
    err.close()
    cluster = DevCluster(store_dir=store_dir, _proc=proc, _owns_store=owns)
    try:
        lines = read_announcements(proc, start_timeout_s)
    except DevClusterError as exc:
        tail = ""
        if os.path.exists(err_path):
            with open(err_path, errors="replace") as fh:
                tail = fh.read()[-2000:]
        cluster.stop()
        raise DevClusterError(f"dev cluster did not start: {exc}: {tail}") from None
    cluster.namesrv_addr = lines["NAMESRV"]
    cluster.broker_addr = lines["BROKER"]
    return cluster


def _start_multi(mode: str, store_dir: str | None, extra: dict, timeout_s: float, event_loop: str) -> DevCluster:
    owns = store_dir is None
    store_dir = store_dir or tempfile.mkdtemp(prefix="rocketmq-dev-")
    os.makedirs(store_dir, exist_ok=True)
    props = {camel(k) if "_" in k else k: ("true" if v is True else "false" if v is False else str(v))
             for k, v in extra.items()}
    cluster = DevCluster(store_dir=store_dir, mode=mode, _owns_store=owns, _timeout_s=timeout_s,
                         _event_loop=event_loop)
    try:
        cluster._namesrv_proc = spawn(["namesrv", "-p", "0", "--event-loop", event_loop],
                                      os.path.join(store_dir, "namesrv.log"))
        cluster.namesrv_addr = read_announcements(cluster._namesrv_proc, timeout_s)["NAMESRV"]
        dledger = dledger_confs(mode, _free_port)
        for name, bid, role in MODES[mode]:
            b = DevBroker(name, bid, role, os.path.join(store_dir, f"{name}-{bid}"))
            # a fixed port below the ephemeral range: start_broker() restarts it there, and its
            # HA (listenPort + 1) and VIP (listenPort - 2) ports are free below that range too
            ports = {} if "listenPort" in props else {"listenPort": str(free_broker_port())}
            write_broker_conf(b, cluster.namesrv_addr, {**props, **dledger.get((name, bid), {}), **ports})
            cluster.brokers.append(b)
            _launch_broker(b, timeout_s, event_loop)
            pin_ports(b)
    except (DevClusterError, OSError) as exc:
        cluster.stop()
        raise DevClusterError(f"dev cluster {mode} did not start: {exc}") from None
    cluster.broker_addr = cluster.brokers[0].addr
    return cluster


def _free_port() -> int:
    """A free 127.0.0.1 port below the kernel's ephemeral range (so that no process binding
    port 0 meanwhile takes it before its broker does): a port that must be known before the
    process starts, as a DLedger member's address in every member's ``dLegerPeers``."""
    return free_fixed_port()


#: the ports a broker on a fixed ``listenPort`` p binds besides p, as offsets: p - 2 (the VIP
#: channel) and p + 1 (``haListenPort``'s default), as Java 4.9.8's broker
BROKER_PORT_OFFSETS = (-2, 1)


def free_fixed_port(low: int = 20000, high: int = 32000, *, also: Sequence[int] = ()) -> int:
    """A port p of [low, high) that is free now on 127.0.0.1 (random probes), with ``p + k``
    free too for each offset k of ``also``.

    The default range lies below Linux's ephemeral range (``ip_local_port_range``, 32768–60999
    by default), so an outgoing connection or a server binding port 0 never takes it: a server
    can stop and start again on it. A port the kernel chose (port 0) gives no such promise once
    released, and neither do its neighbours.

    Raises:
        OSError: no such port found in 200 probes.
    """
    import random
    for _ in range(200):
        port = random.randrange(low, high)
        probes = []
        try:
            for p in (port, *(port + k for k in also)):
                s = socket.socket()
                probes.append(s)
                s.bind(("127.0.0.1", p))
        except OSError:
            continue
        finally:
            for s in probes:
                s.close()
        return port
    raise OSError(f"no free port in [{low}, {high})" + (f" with offsets {tuple(also)} free" if also else ""))


def free_broker_port() -> int:
    """A fixed ``listenPort`` for a broker that may restart on it: free now, below the
    ephemeral range, and so are the VIP and HA ports it implies (``BROKER_PORT_OFFSETS``).

    Raises:
        OSError: no such port found.
    """
    return free_fixed_port(also=BROKER_PORT_OFFSETS)


def _launch_broker(b: DevBroker, timeout_s: float, event_loop: str) -> None:
    b.proc = spawn(["broker", "-c", b.conf_path, "--event-loop", event_loop], os.path.join(b.store_dir, "broker.log"))
    try:
        lines = read_announcements(b.proc, timeout_s)
    except DevClusterError as exc:
        tail = ""
        with contextlib.suppress(OSError), open(os.path.join(b.store_dir, "broker.log"), errors="replace") as fh:
            tail = fh.read()[-1500:]
        raise DevClusterError(f"broker {b.name}/{b.broker_id}: {exc}: {tail}") from None
    b.addr, b.ha_addr = lines["BROKER"], lines.get("HA", "")


def read_announcements(proc: subprocess.Popen, timeout_s: float = 30.0) -> dict[str, str]:
    """Read the ``KIND value`` lines a server process prints on stdout, up to ``READY``.

    ``python -m rocketmq_broker dev``, ``rocketmq-namesrv`` and ``rocketmq-broker`` print
    ``NAMESRV host:port``, ``BROKER host:port``, ``STORE dir`` and then ``READY``. The process must
    have been started with ``stdout=subprocess.PIPE, text=True``; lines after READY are left unread.

    Args:
        proc: the server process.
        timeout_s: how long to wait for READY, in seconds (enforced even when the process prints
            nothing: the pipe is read on a helper thread).

    Returns:
        ``{kind: value}``, e.g. ``{"NAMESRV": "127.0.0.1:40123", ..., "READY": ""}``.

    Raises:
        DevClusterError: no READY line within ``timeout_s``, or stdout closed first (the process
            exited; its exit code is in the message).
    """
    lines: dict[str, str] = {}

    def reader() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            kind, _, value = line.strip().partition(" ")
            lines[kind] = value
            if kind == "READY":
                break

    t = threading.Thread(target=reader, name="rocketmq-announcements", daemon=True)
    t.start()
    t.join(timeout_s)
    if "READY" not in lines:
        if not t.is_alive():  # stdout closed: the process is exiting, let it finish
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(2)
        state = "still running" if proc.poll() is None else f"exit code {proc.returncode}"
        raise DevClusterError(f"{proc.args!r} printed no READY within {timeout_s}s ({state}; got {lines})")
    return dict(lines)


def _start_in_process(store_dir: str, owns: bool, extra: dict, timeout_s: float,
                      ssl_context: ssl.SSLContext | None = None, event_loop: str = "auto") -> DevCluster:
    loop = new_event_loop(event_loop)
    cluster = DevCluster(store_dir=store_dir, _loop=loop, _owns_store=owns)
    t = threading.Thread(target=loop.run_forever, name="rocketmq-dev-cluster", daemon=True)
    cluster._thread = t
    t.start()

    async def start() -> None:
        ns = NameServer(NamesrvConfig(listen_port=0))
        ns.server.ssl_context = ssl_context
        await ns.start()
        cluster._servers.append(ns)
        cfg = BrokerConfig(listen_port=0, namesrv_addr=ns.addr, store_path_root_dir=store_dir,
                           **{"mapped_file_size_commit_log": 64 * 1024 * 1024, **extra})
        broker = BrokerController(cfg)
        if ssl_context is not None:
            broker.server.ssl_context = ssl_context
            broker.namesrv_client.ssl_context = client_ssl_context(verify=False)
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


#: DLedger timers of the in-process ``dledger`` dev cluster: heartbeats every 300 ms, a leader
#: missed after 6 of them (all members share one process and one GIL), votes 30–100 ms apart
DLEDGER_DEV_TIMERS = {"heart_beat_time_interval_ms": 300, "max_heart_beat_leak": 6, "min_vote_interval_ms": 30,
                      "max_vote_interval_ms": 100, "max_push_time_out_ms": 200, "slave_sync_interval": 300}


def spaced_free_ports(n: int) -> list[int]:
    """``n`` free ports of :func:`free_fixed_port`, at least 3 apart (a broker on a fixed port
    also binds ``port - 2``, its VIP channel), so servers binding port 0 meanwhile, or a restarted
    member, cannot take them before the server that owns them starts."""
    ports: set[int] = set()
    while len(ports) < n:
        port = free_fixed_port()
        if all(abs(port - p) > 2 for p in ports):
            ports.add(port)
    return sorted(ports)


def _start_in_process_dledger(store_dir: str, owns: bool, extra: dict, timeout_s: float,
                              event_loop: str, attempts: int = 3) -> DevCluster:
    """The in-process ``dledger`` cluster; its ports are chosen before anything binds them (every
    member's ``dLegerPeers`` names them), so a port taken meanwhile by another process
    (EADDRINUSE) starts the whole group again on fresh ports, up to ``attempts`` times."""
    for attempt in range(attempts):
        try:
            return _start_dledger_group(store_dir if attempt == 0 else os.path.join(store_dir, f"retry-{attempt}"),
                                        owns, extra, timeout_s, event_loop)
        except DevClusterError as exc:
            cause = exc.__cause__
            if not (isinstance(cause, OSError) and cause.errno == errno.EADDRINUSE) or attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def _start_dledger_group(store_dir: str, owns: bool, extra: dict, timeout_s: float, event_loop: str) -> DevCluster:
    loop = new_event_loop(event_loop)
    cluster = DevCluster(store_dir=store_dir, mode="dledger", _loop=loop, _owns_store=owns)
    t = threading.Thread(target=loop.run_forever, name="rocketmq-dev-dledger", daemon=True)
    cluster._thread = t
    t.start()
    ports = iter(spaced_free_ports(6))
    confs = dledger_confs("dledger", lambda: next(ports))

    async def start() -> None:
        ns = NameServer(NamesrvConfig(listen_port=0))
        await ns.start()
        cluster._servers.append(ns)
        cluster.namesrv_addr = ns.addr
        members: list[BrokerController] = []
        for (name, i), conf in sorted(confs.items()):
            cfg = BrokerConfig(listen_port=next(ports), ha_listen_port=0, namesrv_addr=ns.addr, broker_name=name,
                               store_path_root_dir=os.path.join(store_dir, f"{name}-n{i}"),
                               enable_d_leger_commit_log=True, d_leger_group=conf["dLegerGroup"],
                               d_leger_peers=conf["dLegerPeers"], d_leger_self_id=conf["dLegerSelfId"],
                               **{"mapped_file_size_commit_log": 64 * 1024 * 1024, **DLEDGER_DEV_TIMERS, **extra})
            broker = BrokerController(cfg)
            try:
                await broker.start()
            except Exception:
                with contextlib.suppress(Exception):
                    await broker.stop()
                raise
            members.append(broker)
            cluster._servers.append(broker)  # stopped by cluster.stop() if a later one fails
        while True:  # a master registered, both others following it in its term
            masters = [b for b in members if b.dledger is not None and b.dledger.is_master]
            bd = ns.routes.broker_addr_table.get(members[0].config.broker_name)
            if len(masters) == 1 and bd is not None and bd.broker_addrs.get(0) == masters[0].config.broker_addr:
                node = masters[0].dledger.node  # type: ignore[union-attr]
                if all(b.dledger is not None and b.dledger.node.leader_id == node.config.self_id
                       and b.dledger.node.term == node.term for b in members):
                    break
            await asyncio.sleep(0.02)
        master = masters[0]
        cluster._servers = [ns, *[b for b in members if b is not master], master]  # the master last
        cluster.broker_addr = master.config.broker_addr
        cluster.broker = master  # type: ignore[attr-defined]

    try:
        asyncio.run_coroutine_threadsafe(asyncio.wait_for(start(), timeout_s), loop).result(timeout_s + 5)
    except Exception as exc:
        cluster.stop()
        raise DevClusterError(f"dledger dev cluster did not start: {exc!r}") from exc
    return cluster


class EmbeddedCluster:
    """Name servers and brokers of one cluster on a background asyncio thread of this process.

    Use :func:`start_cluster`. Attributes:
        namesrv_addrs: ``["127.0.0.1:<port>", ...]``, one per name server.
        namesrv_addr: the same joined with ``;`` (what clients and brokers take).
        brokers: ``{broker_name: BrokerController}`` in start order (the masters).
        slaves: ``{broker_name: [BrokerController, ...]}``, brokerId 1, 2, ... (``slaves=``).
        namesrvs: the :class:`NameServer` objects.
        store_dir: store root; broker ``<name>`` stores under ``<store_dir>/<name>``.
    """

    def __init__(self, store_dir: str, owns_store: bool, timeout_s: float, event_loop: str = "auto") -> None:
        self.store_dir = store_dir
        self.timeout_s = timeout_s
        self.namesrvs: list[NameServer] = []
        self.brokers: dict[str, BrokerController] = {}
        self.slaves: dict[str, list[BrokerController]] = {}
        self._owns_store = owns_store
        self._stopped_brokers: set[str] = set()
        self._stopped_slaves: set[int] = set()
        self._stopped = False
        self.loop = new_event_loop(event_loop)
        self._thread = threading.Thread(target=self.loop.run_forever, name="rocketmq-embedded-cluster",
                                        daemon=True)
        self._thread.start()

    @property
    def namesrv_addrs(self) -> list[str]:
        return [ns.addr for ns in self.namesrvs]

    @property
    def namesrv_addr(self) -> str:
        return ";".join(self.namesrv_addrs)

    def addr(self, broker_name: str) -> str:
        """``127.0.0.1:<port>`` of broker ``broker_name`` (KeyError when there is no such broker)."""
        return self.brokers[broker_name].config.broker_addr

    def run(self, coro: Any) -> Any:
        """Run ``coro`` on the cluster's loop and return its result (waits ``timeout_s``)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(self.timeout_s)

    def stop_broker(self, broker_name: str) -> None:
        """Stop one broker cleanly (store flushed, unregistered from the name servers). Idempotent."""
        if broker_name not in self._stopped_brokers:
            self._stopped_brokers.add(broker_name)
            self.run(self.brokers[broker_name].stop())

    def stop_slave(self, broker_name: str, index: int = 0) -> None:
        """Stop slave ``index`` (brokerId ``index + 1``) of ``broker_name`` cleanly. Idempotent."""
        broker = self.slaves[broker_name][index]
        if id(broker) not in self._stopped_slaves:
            self._stopped_slaves.add(id(broker))
            self.run(broker.stop())

    def restart_slave(self, broker_name: str, index: int = 0) -> BrokerController:
        """Start slave ``index`` of ``broker_name`` again on its store and ports (stopping it
        first if needed); it resumes replication from its own max offset."""
        self.stop_slave(broker_name, index)
        old = self.slaves[broker_name][index]
        cfg = dataclasses.replace(old.config, ha_listen_port=old.ha.port)
        broker = BrokerController(cfg)
        self.run(broker.start())
        self.slaves[broker_name][index] = broker
        return broker

    def stop(self) -> None:
        """Stop every broker, then the name servers and the loop; a temporary store is removed.
        Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        try:
            for name, slaves in self.slaves.items():
                for i in range(len(slaves)):
                    self.stop_slave(name, i)
            for name in list(self.brokers):
                self.stop_broker(name)
            for ns in reversed(self.namesrvs):
                self.run(ns.stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(self.timeout_s)
            if self._owns_store:
                shutil.rmtree(self.store_dir, ignore_errors=True)

    def __enter__(self) -> EmbeddedCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_cluster(broker_names: Sequence[str] = ("broker-a", "broker-b"), *, namesrvs: int = 1,
                  cluster_name: str = "DefaultCluster", store_dir: str | None = None,
                  broker_config: dict | None = None, start_timeout_s: float = 30.0,
                  event_loop: str = "auto", slaves: int = 0, broker_role: str = "ASYNC_MASTER") -> EmbeddedCluster:
    """Start ``namesrvs`` name servers and one master broker per name in ``broker_names``, all of
    cluster ``cluster_name`` on free 127.0.0.1 ports, in this process (one background loop thread).

    Every broker registers with every name server (``namesrvAddr`` = all of them, ``;``-joined), so
    a topic created on several brokers has a route listing each of them, as in a real cluster of
    masters ``broker-a``, ``broker-b``.

    Args:
        broker_names: brokerName of each broker (unique), default ``("broker-a", "broker-b")``.
        namesrvs: number of name servers (at least 1).
        cluster_name: brokerClusterName of every broker.
        store_dir: store root, broker ``<name>`` under ``<store_dir>/<name>``; a temporary
            directory (removed at stop) when None.
        broker_config: extra :class:`BrokerConfig` fields (snake_case) for every broker; the
            CommitLog file size defaults to 16 MiB here.
        start_timeout_s: how long to wait for all servers, in seconds.
        event_loop: the servers' loop, as :func:`start_dev_cluster`'s.
        slaves: SLAVE brokers per master (brokerId 1, 2, ...; store ``<store_dir>/<name>-s<id>``),
            started after all masters; they replicate over the HA protocol (docs/protocol.md §8).
        broker_role: the masters' ``brokerRole``, ``ASYNC_MASTER`` or ``SYNC_MASTER``.

    Raises:
        ValueError: no broker name, a repeated name, or ``namesrvs < 1`` (an unknown
            ``event_loop`` or a missing uvloop: ``IllegalArgumentError``, a ValueError too).
        DevClusterError: a server did not start (everything started so far is stopped).
    """
    names = list(broker_names)
    if not names or len(set(names)) != len(names):
        raise ValueError(f"broker_names must be non-empty and unique, got {names}")
    if namesrvs < 1:
        raise ValueError(f"namesrvs must be at least 1, got {namesrvs}")
    owns = store_dir is None
    store_dir = store_dir or tempfile.mkdtemp(prefix="rocketmq-cluster-")
    cluster = EmbeddedCluster(store_dir, owns, start_timeout_s, event_loop)
    extra = {"mapped_file_size_commit_log": 16 * 1024 * 1024, **(broker_config or {})}

    async def start() -> None:
        for _ in range(namesrvs):
            ns = NameServer(NamesrvConfig(listen_port=0))
            await ns.start()
            cluster.namesrvs.append(ns)
        for name in names:
            cfg = BrokerConfig(listen_port=0, namesrv_addr=cluster.namesrv_addr, broker_name=name,
                               broker_cluster_name=cluster_name,
                               store_path_root_dir=os.path.join(store_dir, name),
                               **{"broker_role": broker_role, **extra})
            broker = BrokerController(cfg)
            await broker.start()
            cluster.brokers[name] = broker
        for name in names:
            for bid in range(1, slaves + 1):
                # a fixed port below the ephemeral range: restart_slave() starts it there again
                cfg = BrokerConfig(listen_port=free_broker_port(), namesrv_addr=cluster.namesrv_addr,
                                   broker_name=name, broker_cluster_name=cluster_name, broker_id=bid,
                                   broker_role="SLAVE",
                                   store_path_root_dir=os.path.join(store_dir, f"{name}-s{bid}"), **extra)
                slave = BrokerController(cfg)
                await slave.start()
                cluster.slaves.setdefault(name, []).append(slave)

    try:
        cluster.run(start())
    except Exception as exc:
        cluster.stop()
        raise DevClusterError(f"embedded cluster did not start: {exc!r}") from exc
    return cluster
