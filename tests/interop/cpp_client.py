"""Drive the official Apache RocketMQ C++ client (PyPI ``rocketmq==0.4.4``) from tests, safely.

Every call runs the C++ client in a separate ``python _cpp_worker.py <json>`` process, so a crash,
deadlock or endless retry inside ``librocketmq.so`` can never take pytest down: each process has
a hard deadline after which it is killed, and its stdout is a stream of JSON events (see the
worker's docstring). Each process gets its own temporary ``HOME`` (the library's only log
location) and an environment without ``NAMESRV_ADDR`` / ``ROCKETMQ_HOME``.

API::

    cpp_produce(namesrv_addr, topic, messages, group=..., mode="sync") -> list[SendOutcome]
    with CppConsumer(namesrv_addr, topic, group=..., expression="*") as consumer:
        ...                                   # produce
        consumer.wait_for(3, timeout_s=20)    # -> list[ConsumedMessage]
    cpp_pull(namesrv_addr, topic, group=...) -> PullOutcome

A message spec is a dict: ``body`` (str or bytes) or ``body_b64``, ``tags`` (str), ``keys`` (str
or list of str), ``properties`` (dict[str, str]), ``delay_level`` (int), ``arg`` (int, queue
selector argument for the orderly modes: the queue is ``arg % queue_count``).

What the C++ client does on this machine (binary banner ``VERSION: 1.0.1``, wire version 63),
measured with this harness:

* Start-up is instant (~50 ms) and never fails for lack of a name server: ``Producer.start()``
  and ``PushConsumer.start()`` succeed even when nothing listens on the address.
* Name server refusing connections (nothing listening): ``send_sync`` fails at once (<20 ms) with
  ``ProducerSendSyncFailed: No route info of this topic: <topic>``.
* Name server accepting but silent: each GET_ROUTEINFO_BY_TOPIC waits a hard-coded 5 s,
  unaffected by ``set_timeout``; a ``send_sync`` looks the route up twice per attempt (topic,
  then TBW102) over 5 attempts, so it gives up after about **50 s**, and ``shutdown()`` then
  takes another ~5 s. Tests against a hung name server must use a worker timeout above 55 s or
  expect :class:`CppWorkerTimeout`.
* Push consumer start-up against a live cluster: rebalance, QUERY_CONSUMER_OFFSET and the first
  PULL_MESSAGE happen within ~10 ms of ``start()`` when the topic's route exists. If the topic
  does not exist yet (TOPIC_NOT_EXIST), the consumer only picks it up at its next periodic
  rebalance/route refresh, about **10 s** later: create the topic (send once) before starting.
* New consumer groups: the C++ client declares CONSUME_FROM_LAST_OFFSET. When
  QUERY_CONSUMER_OFFSET succeeds (a 4.9.8 broker answers offset 0 for a queue whose minimum
  offset is 0) it starts there; when the broker answers an error (QUERY_NOT_FOUND, 22) it sends
  GET_MAX_OFFSET and starts at the end, skipping what was produced before.
* Retry: RECONSUME_LATER sends CONSUMER_SEND_MSG_BACK (delayLevel 0, numeric extFields); the
  message comes back through ``%RETRY%<group>`` about 10 s later with ``reconsume_times`` 1.
* Every C++ request carries ``AccessKey``/``Signature``/``OnsChannel`` extFields (empty key when
  no credentials), and SEND_MESSAGE (10), never SEND_MESSAGE_V2, with numeric ``queueId``,
  ``flag``, ``defaultTopicQueueNums`` values in the JSON header.
* Log: ``$HOME/logs/rocketmq-cpp/<pid>_rocketmq-cpp.log.0`` (written as it goes, INFO by
  default; :meth:`CppConsumer.wait_assigned` reads it, so keep ``log_level="info"`` for that).
  BROADCASTING consumers also keep offsets under ``$HOME/.rocketmq_offsets/``. Both are why every worker runs with a temporary ``HOME``.
* Settings exposed by the C API: producer group (``SetProducerGroupName``), instance name
  (``Set{Producer,PushConsumer}InstanceName``; the client id is ``<pid>-<ip>@<instance>``,
  ``DEFAULT`` by default), name server address or domain, session credentials (access key,
  secret key, ONS channel, default ``ALIYUN``: it always sends ``AccessKey``/``Signature``/
  ``OnsChannel`` extFields, empty key when unset), send timeout (ms), compress level and the
  "compress bodies over N bytes" threshold, max message size, log level/path/file size and
  count; push consumer thread count, message batch max size, message model (CLUSTERING,
  BROADCASTING), orderly listener. No consume-from-where setting: a group without a committed
  offset starts where the broker's QUERY_CONSUMER_OFFSET/GET_MAX_OFFSET answers put it.
* Bodies: ``Message.set_body`` (char*) cuts at the first NUL byte; the worker uses
  ``SetByteMessageBody`` so any bytes reach the broker intact (verified), but on receive
  ``GetMessageBody`` is a char* again, so received bodies are cut at the first NUL. Keep
  bodies NUL-free when the C++ side consumes. Bodies of 4096 bytes or more are
  zlib-compressed by the C++ producer (sysFlag bit 0; 4095 bytes are sent as they are), and
  its consumer inflates them.
* Received messages expose no "all properties" accessor: pass ``property_keys`` to
  :class:`CppConsumer` to read user properties back (system ones are always read).
"""

from __future__ import annotations

import base64
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

WORKER = Path(__file__).with_name("_cpp_worker.py")
DEFAULT_PRODUCER_GROUP = "cpp_interop_producer"
DEFAULT_CONSUMER_GROUP = "cpp_interop_consumer"


class CppClientError(RuntimeError):
    """The C++ worker process failed (crash, fatal event, unexpected exit)."""


class CppWorkerTimeout(CppClientError):
    """The C++ worker did not finish or answer within its deadline and was killed."""


@dataclass(frozen=True)
class SendOutcome:
    """Result of one send (or of the whole batch in ``mode="batch"``).

    ``ok`` is False when the C++ client raised; ``error_type`` is then the
    ``rocketmq.exceptions`` class name (e.g. ``ProducerSendSyncFailed``). ``status``, ``msg_id``
    and ``offset`` are None for oneway sends.
    """

    index: int
    ok: bool
    status: str | None = None
    msg_id: str | None = None
    offset: int | None = None
    error_type: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class ConsumedMessage:
    """One delivery seen by a C++ consumer callback (``status`` = what the callback returned)."""

    topic: str
    tags: str
    keys: str
    body: bytes
    properties: dict[str, str]
    msg_id: str
    queue_id: int
    queue_offset: int
    reconsume_times: int
    status: str
    raw: dict = field(repr=False, compare=False)

    @property
    def born_timestamp(self) -> int:
        """Epoch ms the producer stamped."""
        return int(self.raw["born_timestamp"])

    @property
    def store_timestamp(self) -> int:
        """Epoch ms the broker stored the message."""
        return int(self.raw["store_timestamp"])

    @property
    def received_ms(self) -> int | None:
        """Epoch ms the C++ callback ran (push consumer only)."""
        return self.raw.get("received_ms")

    @property
    def key_list(self) -> list[str]:
        return self.keys.split()

    @classmethod
    def from_event(cls, event: dict) -> ConsumedMessage:
        return cls(
            topic=event["topic"], tags=event["tags"], keys=event["keys"],
            body=base64.b64decode(event["body_b64"]), properties=dict(event["properties"]),
            msg_id=event["msg_id"], queue_id=event["queue_id"], queue_offset=event["queue_offset"],
            reconsume_times=event["reconsume_times"], status=event["status"], raw=event,
        )


@dataclass(frozen=True)
class PullOutcome:
    queues: list[dict]
    pulls: list[dict]
    messages: list[ConsumedMessage]


def _encode_specs(messages: Iterable[dict]) -> list[dict]:
    specs = []
    for spec in messages:
        spec = dict(spec)
        body = spec.pop("body", b"")
        if "body_b64" not in spec:
            raw = body.encode("utf-8") if isinstance(body, str) else bytes(body)
            spec["body_b64"] = base64.b64encode(raw).decode("ascii")
        specs.append(spec)
    return specs


class _Worker:
    """One worker process: JSON events collected by a reader thread, stderr kept (bounded)."""

    def __init__(self, args: dict, home: str | os.PathLike | None) -> None:
        self._own_home = home is None
        self.home = Path(tempfile.mkdtemp(prefix="cpp-client-home-") if home is None else home)
        env = {k: v for k, v in os.environ.items() if k not in ("NAMESRV_ADDR", "ROCKETMQ_HOME")}
        env["HOME"] = str(self.home)
        env["PYTHONUNBUFFERED"] = "1"
        self.events: list[dict] = []
        self._cond = threading.Condition()
        self._stderr: collections.deque[str] = collections.deque(maxlen=200)
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKER), json.dumps(args)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=env, text=True, encoding="utf-8", errors="replace", start_new_session=True,
        )
        self._threads = [
            threading.Thread(target=self._read_stdout, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                event = {"event": "garbage", "line": line.rstrip("\n")}
            with self._cond:
                self.events.append(event)
                self._cond.notify_all()
        with self._cond:
            self.events.append({"event": "eof"})
            self._cond.notify_all()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr.append(line.rstrip("\n"))

    def wait_event(self, predicate: Callable[[list[dict]], Any], timeout_s: float, what: str) -> Any:
        """Block until ``predicate(events)`` is truthy; fail on timeout, fatal event or exit."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                result = predicate(self.events)
                if result:
                    return result
                fatal = next((e for e in self.events if e["event"] == "fatal"), None)
                if fatal is not None:
                    raise CppClientError(f"C++ worker failed while waiting for {what}: "
                                         f"{fatal['error_type']}: {fatal['error']}\n{self.diagnostics()}")
                if self.events and self.events[-1]["event"] == "eof":
                    raise CppClientError(f"C++ worker exited (rc={self.proc.poll()}) before {what}\n"
                                         f"{self.diagnostics()}")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise CppWorkerTimeout(f"no {what} from the C++ worker within {timeout_s} s\n"
                                           f"{self.diagnostics()}")
                self._cond.wait(remaining)

    def of(self, name: str) -> list[dict]:
        with self._cond:
            return [e for e in self.events if e["event"] == name]

    def log_text(self) -> str:
        """The native client's log(s) written under this worker's HOME."""
        logs = sorted((self.home / "logs" / "rocketmq-cpp").glob("*_rocketmq-cpp.log*"))
        return "".join(p.read_text(encoding="utf-8", errors="replace") for p in logs)

    def diagnostics(self, log_lines: int = 30) -> str:
        log_tail = "\n".join(self.log_text().splitlines()[-log_lines:])
        return ("--- worker stderr (tail) ---\n" + "\n".join(list(self._stderr)[-30:])
                + "\n--- native log (tail) ---\n" + log_tail)

    def stop(self, timeout_s: float) -> int:
        """Ask the worker to finish (stdin EOF), then SIGTERM, then SIGKILL; return its exit code."""
        if self.proc.poll() is None and self.proc.stdin is not None:
            try:
                self.proc.stdin.write("stop\n")
                self.proc.stdin.close()
            except OSError:
                pass
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.terminate()
        try:
            return self.proc.wait(2.0)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(5.0)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5.0)

    def cleanup(self) -> None:
        for thread in self._threads:
            thread.join(2.0)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        if self._own_home:
            shutil.rmtree(self.home, ignore_errors=True)


def _common_args(namesrv_addr: str, group: str, log_level: str, credentials: dict | None,
                 instance_name: str | None) -> dict:
    return {"namesrv_addr": namesrv_addr, "group": group, "log_level": log_level,
            "credentials": credentials, "instance_name": instance_name}


def _run_to_completion(args: dict, timeout_s: float, home: str | os.PathLike | None, what: str) -> _Worker:
    """Run a worker that ends by itself; return it once it exited with a ``done`` event.

    The caller reads the events; the worker's files are already cleaned up.
    """
    worker = _Worker(args, home)
    try:
        try:
            worker.wait_event(lambda ev: ev and ev[-1]["event"] == "eof", timeout_s, "completion")
        except CppWorkerTimeout:
            worker.kill()
            raise
        worker.stop(5.0)
        fatal = worker.of("fatal")
        if fatal or not worker.of("done"):
            detail = (f"{fatal[0]['error_type']}: {fatal[0]['error']}" if fatal
                      else f"exit code {worker.proc.returncode}")
            raise CppClientError(f"C++ {what} worker failed: {detail}\n{worker.diagnostics()}")
    finally:
        if worker.proc.poll() is None:
            worker.stop(5.0)
        worker.cleanup()
    return worker


def cpp_produce(namesrv_addr: str, topic: str, messages: Iterable[dict], group: str = DEFAULT_PRODUCER_GROUP,
                mode: str = "sync", *, timeout_s: float = 60.0, send_timeout_ms: int | None = None,
                compress_level: int | None = None, max_message_size: int | None = None,
                credentials: dict | None = None, instance_name: str | None = None,
                log_level: str = "info", home: str | os.PathLike | None = None) -> list[SendOutcome]:
    """Send ``messages`` to ``topic`` with a C++ ``Producer`` in a worker process.

    Args:
        namesrv_addr: ``"host:port"`` (``;``-separated for several).
        messages: message specs (see the module docstring).
        mode: ``sync`` | ``oneway`` | ``orderly`` | ``oneway_orderly`` | ``async`` | ``batch``
            (one outcome for the whole batch).
        timeout_s: hard deadline for the whole process (start, sends, shutdown), seconds.
        send_timeout_ms: ``SetProducerSendMsgTimeout`` (C++ default 3000 ms); name server
            lookups ignore it.
        credentials: ``{"access_key", "secret_key", "channel"}`` for the C++ signer.
        home: HOME of the worker (kept); default a temporary directory removed afterwards.

    Returns:
        One :class:`SendOutcome` per message (per batch), in index order; a failed send is an
        outcome with ``ok=False``, not an exception.

    Raises:
        CppWorkerTimeout: the process did not finish in ``timeout_s`` (it was killed).
        CppClientError: the worker crashed or reported a fatal error (e.g. start failed).
    """
    args = {"role": "produce", "topic": topic, "mode": mode, "messages": _encode_specs(messages),
            "send_timeout_ms": send_timeout_ms, "compress_level": compress_level,
            "max_message_size": max_message_size,
            **_common_args(namesrv_addr, group, log_level, credentials, instance_name)}
    worker = _run_to_completion(args, timeout_s, home, "producer")
    sent = sorted(worker.of("sent"), key=lambda e: e["index"])
    return [SendOutcome(**{k: v for k, v in e.items() if k != "event"}) for e in sent]


class CppConsumer:
    """A C++ ``PushConsumer`` running in a worker process; a context manager.

    Args:
        namesrv_addr: name server address.
        topic: subscribed topic; ``extra_subscriptions`` adds ``(topic, expression)`` pairs.
        group: consumer group.
        expression: tag expression (``"*"``, ``"TagA || TagB"``).
        model: ``"CLUSTERING"`` or ``"BROADCASTING"``.
        orderly: register an orderly listener (LOCK_BATCH_MQ traffic) instead of a concurrent one.
        fail_keys: ``{key: n}``: the first ``n`` deliveries of a message carrying ``key`` return
            RECONSUME_LATER (CONSUMER_SEND_MSG_BACK), later ones CONSUME_SUCCESS.
        property_keys: user property names to read back from received messages.
        start_timeout_s: how long ``start()`` waits for the READY event, seconds.
        home: HOME of the worker (kept); default a temporary directory removed on ``stop()``.

    ``start()`` returns once the native ``start()`` returned; the client then still has to
    rebalance (route lookup, heartbeat, offsets) before it pulls. Use :meth:`wait_assigned`
    (from the native log) or :meth:`wait_live` (probe messages) before producing when the test
    depends on the consumer seeing the first messages.
    """

    PROBE_KEY_PREFIX = "__cpp_probe__"

    def __init__(self, namesrv_addr: str, topic: str, group: str = DEFAULT_CONSUMER_GROUP, expression: str = "*",
                 *, model: str = "CLUSTERING", orderly: bool = False, fail_keys: dict[str, int] | None = None,
                 property_keys: Iterable[str] = (), extra_subscriptions: Iterable[tuple[str, str]] = (),
                 thread_count: int | None = None, batch_max_size: int | None = None,
                 credentials: dict | None = None, instance_name: str | None = None, log_level: str = "info",
                 start_timeout_s: float = 20.0, home: str | os.PathLike | None = None) -> None:
        self.args = {
            "role": "push", "subscriptions": [[topic, expression], *map(list, extra_subscriptions)],
            "model": model, "orderly": orderly, "fail_keys": fail_keys or {},
            "property_keys": list(property_keys), "thread_count": thread_count,
            "batch_max_size": batch_max_size,
            **_common_args(namesrv_addr, group, log_level, credentials, instance_name),
        }
        self.start_timeout_s = start_timeout_s
        self._home = home
        self._worker: _Worker | None = None
        self.returncode: int | None = None

    # lifecycle -----------------------------------------------------------------------------
    def start(self) -> CppConsumer:
        """Start the worker and wait for READY. Raises CppWorkerTimeout / CppClientError."""
        if self._worker is not None:
            raise CppClientError("CppConsumer already started")
        self._worker = _Worker(self.args, self._home)
        try:
            self._worker.wait_event(lambda ev: any(e["event"] == "ready" for e in ev), self.start_timeout_s, "READY")
        except CppClientError:
            self._worker.kill()
            self._worker.cleanup()
            raise
        return self

    def stop(self, timeout_s: float = 15.0) -> int:
        """Shut the consumer down (clean shutdown, then SIGTERM, then SIGKILL); idempotent.

        Returns the worker's exit code (0 after a clean shutdown).
        """
        if self._worker is None or self.returncode is not None:
            return self.returncode if self.returncode is not None else 0
        self.returncode = self._worker.stop(timeout_s)
        self._worker.cleanup()
        return self.returncode

    def __enter__(self) -> CppConsumer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # observation ----------------------------------------------------------------------------
    @property
    def worker(self) -> _Worker:
        if self._worker is None:
            raise CppClientError("CppConsumer not started")
        return self._worker

    @property
    def home(self) -> Path:
        return self.worker.home

    @property
    def deliveries(self) -> list[ConsumedMessage]:
        """Every callback invocation so far (retries included, probes excluded), in order."""
        return [m for m in (ConsumedMessage.from_event(e) for e in self.worker.of("message"))
                if not m.keys.startswith(self.PROBE_KEY_PREFIX)]

    @property
    def messages(self) -> list[ConsumedMessage]:
        """Deliveries acknowledged with CONSUME_SUCCESS (probes excluded)."""
        return [m for m in self.deliveries if m.status == "CONSUME_SUCCESS"]

    def wait_for(self, n: int, timeout_s: float = 30.0, *, successful_only: bool = True,
                 predicate: Callable[[ConsumedMessage], bool] | None = None) -> list[ConsumedMessage]:
        """Wait until at least ``n`` matching deliveries were seen; return all matching ones.

        Raises:
            CppWorkerTimeout: fewer than ``n`` within ``timeout_s`` seconds (the message says
                how many arrived and shows the native log tail).
            CppClientError: the worker died.
        """
        def matching() -> list[ConsumedMessage]:
            found = self.messages if successful_only else self.deliveries
            return [m for m in found if predicate is None or predicate(m)]

        try:
            self.worker.wait_event(lambda _ev: len(matching()) >= n, timeout_s, f"{n} messages")
        except CppWorkerTimeout as exc:
            got = matching()
            raise CppWorkerTimeout(f"C++ consumer got {len(got)} of {n} messages in {timeout_s} s: "
                                   f"{[m.keys for m in got]}\n{exc}") from None
        return matching()

    def wait_assigned(self, n_queues: int, timeout_s: float = 20.0, topic: str | None = None) -> list[dict]:
        """Wait until the rebalance gave this consumer ``n_queues`` queues of ``topic`` (default:
        the subscribed topic) with a resolved start offset; return those ``assigned`` events.

        The C++ client pulls right after this point, so messages produced afterwards are seen
        (read from its INFO log line ``add mq:... request initiall offset:N``).
        """
        topic = topic or self.args["subscriptions"][0][0]

        def assigned(_ev: list[dict]) -> list[dict]:
            found = {(e["broker_name"], e["queue_id"]): e for e in self.worker.of("assigned") if e["topic"] == topic}
            return list(found.values()) if len(found) >= n_queues else []

        return self.worker.wait_event(assigned, timeout_s, f"{n_queues} queue assignments of {topic}")

    def wait_live(self, send_probe: Callable[[str], None], timeout_s: float = 30.0,
                  interval_s: float = 1.0) -> None:
        """Call ``send_probe(key)`` until one probe is consumed, proving the consumer pulls.

        ``send_probe`` must send a message with keys ``key`` (and a tag the expression accepts)
        to the subscribed topic. Probes are hidden from :attr:`messages`.
        """
        deadline = time.monotonic() + timeout_s
        n = 0
        while True:
            key = f"{self.PROBE_KEY_PREFIX}{n}"
            send_probe(key)
            n += 1
            try:
                self.worker.wait_event(
                    lambda ev: any(e["event"] == "message" and e["keys"].startswith(self.PROBE_KEY_PREFIX)
                                   for e in ev),
                    min(interval_s, max(0.01, deadline - time.monotonic())), "a probe message")
                return
            except CppWorkerTimeout:
                if time.monotonic() >= deadline:
                    raise CppWorkerTimeout(f"C++ consumer consumed none of {n} probes in {timeout_s} s\n"
                                           f"{self.worker.diagnostics()}") from None


def cpp_pull(namesrv_addr: str, topic: str, group: str = "cpp_interop_puller", expression: str = "*", *,
             offsets: dict[int, int] | None = None, max_num: int = 32, timeout_s: float = 60.0,
             credentials: dict | None = None, log_level: str = "info",
             home: str | os.PathLike | None = None) -> PullOutcome:
    """Pull every queue of ``topic`` once with a C++ ``PullConsumer`` (from ``offsets``, default 0).

    Pulls each queue until NO_NEW_MSG (synchronous pulls, no suspend, as the C++ client does).

    Raises:
        CppWorkerTimeout: the process did not finish in ``timeout_s``.
        CppClientError: the worker crashed or the queue lookup failed.
    """
    args = {"role": "pull", "topic": topic, "expression": expression, "max_num": max_num,
            "offsets": {str(k): v for k, v in (offsets or {}).items()},
            **_common_args(namesrv_addr, group, log_level, credentials, None)}
    worker = _run_to_completion(args, timeout_s, home, "pull")
    queues = worker.of("queues")
    return PullOutcome(queues=queues[0]["queues"] if queues else [], pulls=worker.of("pull"),
                       messages=[ConsumedMessage.from_event(e) for e in worker.of("message")])
