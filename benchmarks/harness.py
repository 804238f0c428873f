"""Helpers shared by the benchmark scripts (``run.py``, ``broker_send.py``, ``spark_writer.py``,
``backlog.py`` and the tools in ``profiling/``): CPU of processes, the git commit and machine a
result was measured on, the run-time line of a results header (C accelerators, event loop, zlib),
writing a result's ``.json`` and ``.md``, and the pipelined load generator of pre-encoded SDK send
frames.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import resource
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CLK_TCK = os.sysconf("SC_CLK_TCK")
_LEN = struct.Struct(">I")
_OK = b'{"code":0,'
DISTINCT_FRAMES = 1024


def parse_args_and_log(ap: argparse.ArgumentParser, results_dir: Path) -> argparse.Namespace:
    """Add the options every Spark benchmark has (``--out-dir``, default ``results_dir``;
    ``--no-write``), parse the command line and log warnings to stderr."""
    ap.add_argument("--out-dir", default=str(results_dir))
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return args


def machine_info(load_before: tuple[float, float, float]) -> dict:
    """The ``machine`` record of a results file: cores, Python, platform, CPU model, load average
    before (given) and now."""
    return {"cores": os.cpu_count(), "python": platform.python_version(),
            "implementation": platform.python_implementation(), "platform": platform.platform(),
            "processor": cpu_model(), "loadavg_before": load_before, "loadavg_after": os.getloadavg()}


def proc_cpu_s(pid: int) -> float:
    """utime + stime of ``pid`` in seconds (all threads)."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def settle(broker_pid: int, limit_s: float = 30.0) -> float:
    """Wait until the broker is idle (under 5% of a core over 0.3 s) so a scenario does not
    inherit the previous one's backlog; return the seconds waited (bounded by ``limit_s``)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit_s:
        c0 = proc_cpu_s(broker_pid)
        time.sleep(0.3)
        if proc_cpu_s(broker_pid) - c0 < 0.015:
            break
    return time.monotonic() - t0


def runtime_info() -> dict:
    """What this Python runs the SDK and broker with: the optional C accelerators
    (``rocketmq_sdk._speedups``; every ``*.c`` of the tree, built or not), the switch, and the
    event loop the SDK's I/O thread and the broker pick here (``auto`` + ``$ROCKETMQ_EVENT_LOOP``),
    and the zlib module of message bodies (``rocketmq_sdk.protocol.deflate``)."""
    from rocketmq_sdk import _speedups
    from rocketmq_sdk.protocol import deflate
    from rocketmq_sdk.remoting.loop import resolve_event_loop

    roots = {"sdk": "rocketmq_sdk", "broker-reference": "rocketmq_broker"}
    built = {}
    for folder, package in roots.items():
        for src in sorted((HERE.parent / folder).rglob("*.c")):
            name = ".".join((package, *src.relative_to(HERE.parent / folder).with_suffix("").parts))
            built[name] = _speedups.load(name) is not None
    return {"pure_python": _speedups.PURE_PYTHON, "accelerators": built,
            "event_loop": resolve_event_loop("auto"), "zlib": deflate.IMPLEMENTATION}


def runtime_line(info: dict) -> str:
    """One Markdown line for :func:`runtime_info`."""
    acc = info.get("accelerators", {})
    loop = f" Event loop: {info['event_loop']}." if info.get("event_loop") else ""
    if info.get("zlib"):
        loop += f" Message bodies: {info['zlib']}."
    if info.get("pure_python"):
        return f"Code: pure Python (ROCKETMQ_PURE_PYTHON set).{loop}  "
    if not acc:
        return f"Code: pure Python (no C accelerators in the tree).{loop}  "
    on = [n.rsplit(".", 1)[1] for n, ok in acc.items() if ok]
    off = [n.rsplit(".", 1)[1] for n, ok in acc.items() if not ok]
    return (f"Code: C accelerators in use: {', '.join(on) or 'none'}"
            + (f"; not built: {', '.join(off)}" if off else "") + f".{loop}  ")


def write_results(out_dir: str | Path, stem: str, doc: dict, md: str) -> Path:
    """A result as ``<out_dir>/<stem>.json`` (``doc``, indented) and ``<stem>.md`` (``md``),
    creating ``out_dir``; returns ``<out_dir>/<stem>``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.json").write_text(json.dumps(doc, indent=1) + "\n")
    (out / f"{stem}.md").write_text(md)
    return out / stem


def git_span(commit: dict, changed_note: str = "") -> str:
    """``start`` or ``start → end`` (plus ``changed_note``) of a results file's ``git_commit``."""
    if commit["end"] == commit["start"]:
        return commit["start"]
    return f"{commit['start']} → {commit['end']}{changed_note}"


def git_head() -> str:
    """The repository's HEAD (``+dirty`` with uncommitted changes), or "" outside git."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True,
                              text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=HERE,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return head + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return ""


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def cpu_self_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def build_frames(producer, topic: str, size: int, batch: int, broker_name: str, queue_ids: list[int],
                 distinct: int = DISTINCT_FRAMES) -> list[bytes]:
    """``distinct`` encoded requests of ``batch`` messages each, ``queue_ids`` round robin."""
    from rocketmq_sdk import Message
    from rocketmq_sdk.producer.prepare import MessagePreparer
    from rocketmq_sdk.remoting.command import RemotingCommand

    preparer = MessagePreparer(producer.group, producer.config)  # what the producer's sends prepare
    body = (b"b" * size)[:size]
    frames = []
    for i in range(distinct):
        if batch == 1:
            p = preparer.prepare(Message(topic, body))
        else:
            p = preparer.prepare_batch([Message(topic, body) for _ in range(batch)])
        ext = dict(p.ext)
        ext["e"] = str(queue_ids[i % len(queue_ids)])
        ext["n"] = broker_name
        frames.append(RemotingCommand.request(p.code, ext, p.body).encode())
    return frames


def recv_exact(sock: socket.socket, n: int, buf: bytearray) -> memoryview:
    if len(buf) < n:
        buf.extend(bytes(n - len(buf)))
    view = memoryview(buf)[:n]
    got = 0
    while got < n:
        k = sock.recv_into(view[got:])
        if not k:
            raise ConnectionError("broker closed the connection")
        got += k
    return view


class Generator:
    """``connections`` threads, each writing ``window`` requests then reading their answers."""

    def __init__(self, addr: str, frames: list[bytes], batch: int, connections: int, window: int,
                 limit: int | None = None) -> None:
        host, port = addr.rsplit(":", 1)
        self.addr = (host, int(port))
        self.bursts = [b"".join(frames[(i + k) % len(frames)] for k in range(window))
                       for i in range(0, len(frames), window)]
        self.burst_bytes = [len(b) for b in self.bursts]
        self.batch, self.window = batch, window
        self.done = [0] * connections      # messages acknowledged, per connection
        self.sent_bytes = [0] * connections
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.limit = limit  # messages per connection, then the connection stops (None: until join)
        self.threads = [threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(connections)]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def join(self, timeout_s: float) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout_s)

    def _run(self, n: int) -> None:
        # answers are read into views of buf, which cannot grow while one is alive: room for the
        # longest (a 256-message batch's msgId list, ~9 KB)
        buf = bytearray(1 << 16)
        try:
            with socket.create_connection(self.addr, timeout=30) as sock:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                i = n
                while not self.stop.is_set() and (self.limit is None or self.done[n] < self.limit):
                    k = i % len(self.bursts)
                    sock.sendall(self.bursts[k])
                    for _ in range(self.window):
                        (length,) = _LEN.unpack(recv_exact(sock, 4, buf))
                        frame = recv_exact(sock, length, buf)
                        if frame[4:14] != _OK:
                            from rocketmq_sdk.remoting.command import RemotingCommand

                            self.errors.append(repr(RemotingCommand.decode(bytes(frame))))
                            return
                    self.done[n] += self.window * self.batch
                    self.sent_bytes[n] += self.burst_bytes[k]
                    i += 1
        except Exception as exc:  # reported in the results, the run goes on
            self.errors.append(f"{type(exc).__name__}: {exc}")

    def snapshot(self) -> tuple[int, int]:
        return sum(self.done), sum(self.sent_bytes)
