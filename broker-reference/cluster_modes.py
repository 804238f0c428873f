"""The deployment modes of RocketMQ 4.x as local development clusters (issue 20).

=================  ===========================================================================
mode               brokers (``brokerName``, ``brokerId``, ``brokerRole``)
=================  ===========================================================================
``1m``             broker-a 0 ASYNC_MASTER (the single-process ``dev`` default)
``2m``             broker-a 0, broker-b 0, both ASYNC_MASTER
``2m-2s-async``    broker-a/broker-b 0 ASYNC_MASTER, each with a SLAVE 1 (asynchronous replication)
``2m-2s-sync``     broker-a/broker-b 0 SYNC_MASTER, each with a SLAVE 1 (synchronous double write)
``dledger``        broker-a n0/n1/n2: one DLedger group of three (automatic failover, issue 27)
``2x-dledger``     broker-a and broker-b, each a DLedger group of three
=================  ===========================================================================

In the DLedger modes the second field is the member number (``dLegerSelfId`` ``n<number>``), not
the broker id: the elected leader registers as brokerId 0, the others as number + 1.

Every mode other than ``1m`` runs the name server and each broker as **separate processes**
(``python -m rocketmq_broker namesrv`` / ``broker -c <conf>``), so that one broker can be killed
(SIGKILL) and started again while the others run. Each broker's ``broker.conf`` and store are in
``<store_dir>/<brokerName>-<brokerId>/``; after the first start the conf is rewritten with the
ports the broker got, so a restart reuses them (and its slave finds its HA port again).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

#: mode → [(brokerName, brokerId, brokerRole)], masters first
MODES: dict[str, list[tuple[str, int, str]]] = {
    "1m": [("broker-a", 0, "ASYNC_MASTER")],
    "2m": [("broker-a", 0, "ASYNC_MASTER"), ("broker-b", 0, "ASYNC_MASTER")],
    "2m-2s-async": [("broker-a", 0, "ASYNC_MASTER"), ("broker-b", 0, "ASYNC_MASTER"),
                    ("broker-a", 1, "SLAVE"), ("broker-b", 1, "SLAVE")],
    "2m-2s-sync": [("broker-a", 0, "SYNC_MASTER"), ("broker-b", 0, "SYNC_MASTER"),
                   ("broker-a", 1, "SLAVE"), ("broker-b", 1, "SLAVE")],
    "dledger": [("broker-a", i, "DLEDGER") for i in range(3)],
    "2x-dledger": [(name, i, "DLEDGER") for name in ("broker-a", "broker-b") for i in range(3)],
}


def dledger_confs(mode: str, free_port: Callable[[], int]) -> dict[tuple[str, int], dict[str, str]]:
    """broker.conf keys of the DLedger members of ``mode`` (none for other modes): group =
    brokerName, ids ``n0``…, a DLedger port per member from ``free_port()``."""
    members = [(name, i) for name, i, role in MODES[mode] if role == "DLEDGER"]
    ports = {m: free_port() for m in members}
    out = {}
    for name, i in members:
        peers = ";".join(f"n{j}-127.0.0.1:{ports[(n, j)]}" for n, j in members if n == name)
        out[(name, i)] = {"enableDLegerCommitLog": "true", "dLegerGroup": name, "dLegerPeers": peers,
                          "dLegerSelfId": f"n{i}", "brokerId": "0", "brokerRole": "ASYNC_MASTER"}
    return out


@dataclass
class DevBroker:
    """One broker process of a multi-process dev cluster.

    Attributes:
        name / broker_id / role: ``brokerName``, ``brokerId``, ``brokerRole``.
        addr: ``127.0.0.1:<listenPort>``; ha_addr: ``127.0.0.1:<haListenPort>``.
        store_dir: its store (``broker.conf`` and ``broker.log`` inside).
        proc: the running process (None while stopped).
    """

    name: str
    broker_id: int
    role: str
    store_dir: str
    addr: str = ""
    ha_addr: str = ""
    proc: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def conf_path(self) -> str:
        return os.path.join(self.store_dir, "broker.conf")

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def line(self) -> str:
        """``<role> <addr> ha=<ha addr> pid=<pid>``: what ``dev`` prints after ``BROKER.<name>.<id>``."""
        return f"{self.role} {self.addr} ha={self.ha_addr} pid={self.pid}"


def write_broker_conf(b: DevBroker, namesrv_addr: str, extra: dict[str, str]) -> None:
    """Write ``b``'s ``broker.conf`` (camelCase keys; ``extra`` may override any)."""
    os.makedirs(b.store_dir, exist_ok=True)
    props = {"brokerClusterName": "DefaultCluster", "brokerName": b.name, "brokerId": str(b.broker_id),
             "brokerRole": b.role, "listenPort": "0", "namesrvAddr": namesrv_addr, "storePathRootDir": b.store_dir,
             "mappedFileSizeCommitLog": str(64 * 1024 * 1024), **extra}
    with open(b.conf_path, "w", encoding="utf-8") as fh:
        fh.write("".join(f"{k}={v}\n" for k, v in props.items()))


def pin_ports(b: DevBroker) -> None:
    """Rewrite ``b``'s conf with the ports it got (``listenPort``, ``haListenPort``)."""
    with open(b.conf_path, encoding="utf-8") as fh:
        lines = [ln for ln in fh.read().splitlines() if not ln.startswith(("listenPort=", "haListenPort="))]
    lines += [f"listenPort={b.addr.rsplit(':', 1)[1]}", f"haListenPort={b.ha_addr.rsplit(':', 1)[1]}"]
    with open(b.conf_path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")


def spawn(args: list[str], log_path: str) -> subprocess.Popen:
    """``python -m rocketmq_broker <args>`` with stdout piped (announcements) and stderr to ``log_path``."""
    with open(log_path, "ab") as err:
        return subprocess.Popen([sys.executable, "-m", "rocketmq_broker", *args], stdout=subprocess.PIPE,
                                stderr=err, stdin=subprocess.DEVNULL, text=True)


def stop_process(proc: subprocess.Popen | None, timeout_s: float, sig: int = signal.SIGTERM) -> None:
    """Signal ``proc`` (SIGTERM: a clean stop) and wait; SIGKILL after ``timeout_s``."""
    if proc is None or proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(sig)
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
