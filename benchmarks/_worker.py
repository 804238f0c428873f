"""One benchmark scenario for one client, in its own process (started by ``benchmarks/run.py``).

Usage: ``python benchmarks/_worker.py '<json args>'``. Args: ``client`` (``sdk`` | ``cpp``),
``scenario`` (``sync`` | ``async`` | ``oneway`` | ``batch`` | ``consume`` | ``latency``),
``namesrv``, ``topic``, ``size`` (body bytes), ``threads``, ``batch``, ``inflight``,
``max_count`` (messages), ``max_seconds`` (measured phase), ``rate`` (latency, msg/s),
``group``, ``deadline_s`` (hard stop of the whole process); optional ``producer`` (latency:
``process``, the default, or ``thread``) and ``pull_batch_size`` (SDK consumers; default 32).

The last stdout line is one JSON object: ``count`` (messages done in the measured phase),
``errors``, ``elapsed_s``, ``cpu_s`` (this process's user+system CPU during the measured phase,
every thread, native ones included), ``latencies_us`` summary for ``latency``, or ``error``.
The native C++ library writes to fd 1 on some paths, so the result channel is a duplicate of
the original stdout and fd 1 points at stderr (as in tests/interop/_cpp_worker.py).

C++ shutdown (librocketmq bug, see ``cpp_shutdown``): librocketmq 0.4.4 aborts the process
(SIGABRT, ``terminate called after throwing an instance of 'boost::thread_interrupted'``) when
``shutdown()`` meets its first topic-route refresh, 3 s after ``start()``. Every C++ client here is
started by ``cpp_start`` and shut down by ``cpp_shutdown``, which, when the process is 2 s or more
past its first ``start()``, first waits (polled, bounded) until that refresh is over. The wait is
outside the measured phase (both clients' measured phases end as before: the send loop's end or
the drain target); it adds wall time and a few polls of ``/proc/self/task`` to the C++ process
totals only.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

_OUT = os.fdopen(os.dup(1), "w", buffering=1)
os.dup2(2, 1)


def cpu_now() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def body_of(size: int, tag: int = 0) -> bytes:
    """``size`` bytes, printable and NUL-free (the C++ consumer cuts bodies at NUL)."""
    return (b"%020d" % tag + b"x" * size)[:size] if size >= 20 else b"x" * size


class Measure:
    """Wall and CPU time of the measured phase."""

    def __enter__(self) -> Measure:
        self.t0, self.c0 = time.perf_counter(), cpu_now()
        return self

    def __exit__(self, *exc: object) -> None:
        self.elapsed, self.cpu = time.perf_counter() - self.t0, cpu_now() - self.c0


def percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    v = sorted(values)

    def p(q: float) -> float:
        return v[min(len(v) - 1, int(q * len(v)))]

    return {"n": len(v), "p50": p(0.50), "p99": p(0.99), "p999": p(0.999), "max": v[-1]}


# ------------------------------------------------------------------------------------------ SDK

def warm_up(send: Any, limit_s: float = 20.0) -> None:
    """First send (route lookup, connection), retried while a busy broker times it out."""
    deadline = time.monotonic() + limit_s
    while True:
        try:
            send()
            return
        except Exception:
            if time.monotonic() > deadline:
                raise


def sdk_producer(a: dict) -> Any:
    from rocketmq_sdk import Producer

    p = Producer(a["group"], a["namesrv"], instance_name=f"bench-{os.getpid()}")
    p.start()
    return p


def sdk_send_loop(a: dict, send_one: Any) -> dict:
    """``threads`` threads call ``send_one()`` until max_count or max_seconds."""
    threads, max_count, max_s = a["threads"], a["max_count"], a["max_seconds"]
    per = max_count // threads
    counts = [0] * threads
    errors = [0] * threads
    first_error: list[str] = []
    stop_at = time.perf_counter() + max_s

    def worker(i: int) -> None:
        n = e = 0
        while n + e < per:
            try:
                send_one()
                n += 1
            except Exception as exc:  # counted; the run goes on
                e += 1
                if not first_error:
                    first_error.append(f"{type(exc).__name__}: {exc}"[:300])
            if (n & 63) == 0 and time.perf_counter() > stop_at:
                break
        counts[i], errors[i] = n, e

    ths = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    with Measure() as m:
        for t in ths:
            t.start()
        for t in ths:
            t.join()
    res = {"count": sum(counts), "errors": sum(errors), "elapsed_s": m.elapsed, "cpu_s": m.cpu}
    if first_error:
        res["first_error"] = first_error[0]
    return res


def async_send_loop(a: dict, send: Callable[[int, Callable[[bool], None]], None]) -> dict:
    """Up to ``max_count`` asynchronous sends (for ``max_seconds`` at most) with ``inflight``
    outstanding: ``send(i, finish)`` starts send ``i`` and has ``finish(ok)`` called once it
    completes (a send that raises counts as failed); then waits up to 30 s for the last ones."""
    total, inflight, max_s = a["max_count"], a["inflight"], a["max_seconds"]
    sem = threading.BoundedSemaphore(inflight)
    done = [0, 0]
    lock = threading.Lock()

    def finish(ok: bool) -> None:
        with lock:
            done[0 if ok else 1] += 1
        sem.release()

    stop_at = time.perf_counter() + max_s
    with Measure() as m:
        n = 0
        for i in range(total):
            if not sem.acquire(timeout=30):
                break
            try:
                send(i, finish)
            except Exception:
                finish(False)
            n += 1
            if (i & 255) == 0 and time.perf_counter() > stop_at:
                break
        end = time.monotonic() + 30
        while time.monotonic() < end and done[0] + done[1] < n:
            time.sleep(0.002)
    return {"count": done[0], "errors": done[1], "elapsed_s": m.elapsed, "cpu_s": m.cpu}


def run_sdk_send(a: dict) -> dict:
    from rocketmq_sdk import Message

    p = sdk_producer(a)
    topic, body = a["topic"], body_of(a["size"])
    try:
        warm_up(lambda: p.send(Message(topic, body)))  # route + connection, outside the measured phase
        scen = a["scenario"]
        if scen == "sync":
            return sdk_send_loop(a, lambda: p.send(Message(topic, body)))
        if scen == "batch":
            k = a["batch"]
            res = sdk_send_loop({**a, "max_count": max(1, a["max_count"] // k)},
                                lambda: p.send_batch([Message(topic, body) for _ in range(k)]))
            res["count"] *= k
            return res
        if scen == "oneway":
            return sdk_send_loop(a, lambda: p.send_oneway(Message(topic, body)))
        if scen == "async":  # Producer.send_async -> concurrent Future, ``inflight`` outstanding
            return async_send_loop(a, lambda i, finish: p.send_async(Message(topic, body)).add_done_callback(
                lambda fut: finish(fut.exception() is None)))
        raise ValueError(f"unsupported sdk scenario {scen}")
    finally:
        p.shutdown()


def sdk_consumer(a: dict, on_msgs: Any) -> Any:
    from rocketmq_sdk import ConsumeConcurrentlyStatus, PushConsumer

    extra = {k: int(a[k]) for k in ("pull_batch_size", "consume_thread_max") if a.get(k)}
    if "consume_thread_max" in extra:  # arg.consume_thread_max=N (ab.py): the listener pool size
        extra["consume_thread_min"] = min(20, extra["consume_thread_max"])
    c = PushConsumer(a["group"], a["namesrv"], instance_name=f"bench-{os.getpid()}",
                     consume_from_where="CONSUME_FROM_FIRST_OFFSET", **extra)
    c.subscribe(a["topic"], "*")

    def listener(msgs: list, ctx: Any) -> Any:
        on_msgs(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    c.register_message_listener(listener)
    return c


def run_sdk_lite_consume(a: dict) -> dict:
    """``arg.consumer=lite`` (ab.py): a ``LitePullConsumer`` polling the backlog in this thread."""
    from rocketmq_sdk import LitePullConsumer

    extra = {k: int(a[k]) for k in ("pull_batch_size",) if a.get(k)}
    c = LitePullConsumer(a["group"], a["namesrv"], instance_name=f"bench-{os.getpid()}",
                         consume_from_where="CONSUME_FROM_FIRST_OFFSET", **extra)
    c.subscribe(a["topic"], "*")
    target, deadline = a["max_count"], time.monotonic() + a["max_seconds"]
    count = 0
    with Measure() as m:  # start-up (route, rebalance, offsets) is part of draining a backlog
        c.start()
        while count < target and time.monotonic() < deadline:
            count += len(c.poll(200))
    c.shutdown()
    return {"count": count, "errors": 0, "elapsed_s": m.elapsed, "cpu_s": m.cpu}


class Consumed:
    """A consume scenario's count (listeners add from any thread); ``done`` is set once it
    reaches ``target``."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.count = 0
        self.done = threading.Event()
        self._lock = threading.Lock()

    def add(self, n: int) -> None:
        with self._lock:
            self.count += n
            if self.count >= self.target:
                self.done.set()


def run_sdk_consume(a: dict) -> dict:
    if a.get("consumer") == "lite":
        return run_sdk_lite_consume(a)
    got = Consumed(a["max_count"])
    c = sdk_consumer(a, lambda msgs: got.add(len(msgs)))
    with Measure() as m:  # start-up (route, rebalance, offsets) is part of draining a backlog
        c.start()
        got.done.wait(a["max_seconds"])
    count = got.count
    c.shutdown()
    return {"count": count, "errors": 0, "elapsed_s": m.elapsed, "cpu_s": m.cpu}


def paced(rate: float, max_count: int, max_s: float, send: Any) -> int:
    """Call ``send(i, scheduled_ns)`` at ``rate``/s (scheduled times, so a stall shows in latency)."""
    interval = 1e9 / rate
    start = time.monotonic_ns() + 50_000_000
    end = start + int(max_s * 1e9)
    i = 0
    while i < max_count:
        due = start + int(i * interval)
        if due > end:
            break
        now = time.monotonic_ns()
        if due > now:
            time.sleep((due - now) / 1e9)
        send(i, due)
        i += 1
    return i


# ------------------------------------------------------------------------------------------ C++
#
# librocketmq 0.4.4 (rocketmq-client-cpp 1.2.x) puts a placeholder TopicPublishInfo for "TBW102"
# in a new client factory; each TopicPublishInfo owns a boost::thread. The factory's scheduler
# thread refreshes every known topic's route 3 s after start() (then every 30 s); the first refresh
# finds TBW102's route "changed" (none before) and replaces the placeholder, whose destructor
# interrupts and joins its thread. MQClientFactory::shutdown() interrupts the scheduler thread and
# joins it: when that lands while the refresh is running (it waits for the name server's answers,
# slow while the dev cluster's process works through a oneway backlog), the destructor's join()
# throws boost::thread_interrupted out of a noexcept destructor -> std::terminate -> SIGABRT.
# Core dump stack of the aborting thread: join_noexcept <- ~TopicPublishInfo <- addTopicInfoToTable
# <- updateTopicRouteInfoFromNameServer <- updateTopicRouteInfo <- startScheduledTask; the main
# thread in ShutdownProducer -> MQClientFactory::shutdown -> join. Later refreshes replace nothing
# while routes stay the same, so only the first one is a hazard. Observable end of that refresh:
# the placeholder's thread, one of the threads the first start() created, exits.

ROUTE_REFRESH_S = 3.0  # librocketmq's first route refresh, seconds after start()
SHUTDOWN_SAFE_S = 2.0  # a shutdown begun before this stops the scheduler before that refresh starts
_native_start: list[tuple[float, frozenset[str]]] = []  # (monotonic s, thread ids) of the first start()


def native_tids() -> frozenset[str]:
    """This process's thread ids (``/proc/self/task``; empty where there is no /proc)."""
    try:
        return frozenset(os.listdir("/proc/self/task"))
    except OSError:
        return frozenset()


def cpp_start(c: Any) -> None:
    """``c.start()``; the first native start in this process records the threads it created."""
    before, t0 = native_tids(), time.monotonic()
    c.start()
    if not _native_start:
        _native_start.append((t0, native_tids() - before))


def cpp_shutdown(c: Any, limit_s: float = 12.0) -> float:
    """``c.shutdown()`` once it cannot meet librocketmq's first route refresh; seconds waited.

    From ``SHUTDOWN_SAFE_S`` after the first ``cpp_start`` on, waits (polls every 10 ms) until one
    of the threads that start created has exited (the TBW102 placeholder's, replaced by the
    refresh; the benchmark's topics sort before "TBW102", so nothing after it in that refresh
    replaces a TopicPublishInfo), at most until ``ROUTE_REFRESH_S + limit_s`` after the start
    (two name server requests of 5 s timeout each, and a name server without a TBW102 route
    never replaces the placeholder).
    """
    waited = 0.0
    if _native_start:
        t0, threads = _native_start[0]
        if threads and time.monotonic() - t0 >= SHUTDOWN_SAFE_S:
            w0, deadline = time.monotonic(), t0 + ROUTE_REFRESH_S + limit_s
            while threads <= native_tids() and time.monotonic() < deadline:
                time.sleep(0.01)
            waited = time.monotonic() - w0
    c.shutdown()
    return waited


def cpp_producer(a: dict) -> tuple[Any, Any, Any]:
    from rocketmq import client
    from rocketmq.ffi import dll

    p = client.Producer(a["group"])
    dll.SetProducerLogLevel(p._handle, 2)  # errors only
    p.set_namesrv_addr(a["namesrv"])
    if a["scenario"] == "batch":
        # librocketmq zlib-compresses a whole batch body over 4 KiB, which no broker can split
        # ("malformed batch body"): batches are sent uncompressed, as the SDK sends them
        import ctypes

        fn = dll.SetProducerCompressMsgBodyOverHowmuch
        fn.argtypes, fn.restype = [ctypes.c_void_p, ctypes.c_int], ctypes.c_int
        fn(p._handle, 1 << 30)
    cpp_start(p)
    return client, dll, p


def cpp_message(client: Any, dll: Any, topic: str, body: bytes) -> Any:
    msg = client.Message(topic)
    dll.SetByteMessageBody(msg, body, len(body))
    return msg


def run_cpp_send(a: dict) -> dict:
    client, dll, p = cpp_producer(a)
    topic, body, scen = a["topic"], body_of(a["size"]), a["scenario"]
    try:
        warm_up(lambda: p.send_sync(cpp_message(client, dll, topic, body)))
        if scen in ("sync", "oneway"):
            fn = p.send_sync if scen == "sync" else p.send_oneway
            return sdk_send_loop(a, lambda: fn(cpp_message(client, dll, topic, body)))
        if scen == "batch":
            k = a["batch"]
            res = sdk_send_loop({**a, "max_count": max(1, a["max_count"] // k)},
                                lambda: p.send_batch([cpp_message(client, dll, topic, body) for _ in range(k)]))
            res["count"] *= k
            return res
        if scen == "async":
            keep: dict[int, Any] = {}  # the messages in flight stay referenced until their callback

            def send(i: int, finish: Callable[[bool], None]) -> None:
                def done(ok: bool) -> None:
                    keep.pop(i, None)
                    finish(ok)

                keep[i] = msg = cpp_message(client, dll, topic, body)
                try:
                    p.send_async(msg, lambda _r: done(True), lambda _e: done(False))
                except Exception:
                    keep.pop(i, None)
                    raise

            return async_send_loop(a, send)
        raise ValueError(f"unsupported cpp scenario {scen}")
    finally:
        cpp_shutdown(p)


def cpp_consumer(a: dict, on_body: Any) -> tuple[Any, Any]:
    from rocketmq import client
    from rocketmq.ffi import MSG_CALLBACK_FUNC, dll

    c = client.PushConsumer(a["group"])
    dll.SetPushConsumerLogLevel(c._handle, 2)
    c.set_namesrv_addr(a["namesrv"])

    def on_message(_consumer: Any, msg_handle: Any) -> int:
        try:
            on_body(dll.GetMessageBody(msg_handle))
        except Exception:
            pass
        return 0

    callback = MSG_CALLBACK_FUNC(on_message)
    dll.Subscribe(c._handle, a["topic"].encode(), b"*")
    dll.RegisterMessageCallback(c._handle, callback)
    return c, callback


def run_cpp_consume(a: dict) -> dict:
    got = Consumed(a["max_count"])
    c, cb = cpp_consumer(a, lambda _body: got.add(1))
    with Measure() as m:
        cpp_start(c)
        got.done.wait(a["max_seconds"])
    count = got.count
    cpp_shutdown(c)
    del cb
    return {"count": count, "errors": 0, "elapsed_s": m.elapsed, "cpu_s": m.cpu}


# ------------------------------------------------------------------------------------ latency
#
# Send (scheduled time) to listener latency at a fixed rate. The producer runs in a child process
# (``producer: "process"``, the default): in one Python process the producer's send path and the
# consumer share one GIL, and a thread waiting for the GIL waits up to the switch interval (5 ms),
# which is the scenario's latency, not the client's. ``producer: "thread"`` keeps both in this
# process (the design before 2026-11-24, for comparison). CLOCK_MONOTONIC is system-wide, so
# scheduled times stamped by the producer process compare with the listener's clock.


def latency_sender(a: dict) -> tuple[Any, Any, Any, Any]:
    """(probe(), send(i, due_ns), pending() -> (errors, outstanding), close()) of a started producer."""
    topic, size = a["topic"], max(20, a["size"])
    errors = [0]
    outstanding = [0]
    lock = threading.Lock()

    def done(ok: bool) -> None:
        with lock:
            outstanding[0] -= 1
            if not ok:
                errors[0] += 1

    if a["client"] == "sdk":
        from rocketmq_sdk import Message

        p = sdk_producer(a)

        def probe() -> None:
            p.send(Message(topic, body_of(size, time.monotonic_ns())))

        def send(i: int, due: int) -> None:
            with lock:
                outstanding[0] += 1
            try:
                fut = p.send_async(Message(topic, body_of(size, due)))
            except Exception:
                done(False)
                return
            fut.add_done_callback(lambda f: done(f.exception() is None))

        close = p.shutdown
    else:
        client, dll, p = cpp_producer(a)
        keep: list[Any] = []

        def probe() -> None:
            p.send_sync(cpp_message(client, dll, topic, body_of(size, time.monotonic_ns())))

        def send(i: int, due: int) -> None:
            msg = cpp_message(client, dll, topic, body_of(size, due))
            keep.append(msg)
            with lock:
                outstanding[0] += 1
            try:
                p.send_async(msg, lambda _r: done(True), lambda _e: done(False))
            except Exception:
                done(False)

        close = lambda: cpp_shutdown(p)  # noqa: E731
    return probe, send, lambda: (errors[0], outstanding[0]), close


def run_latency_producer(a: dict) -> dict:
    """The producer child of a latency run: probe sends (every 0.2 s) until the parent writes
    ``go`` on stdin, then paced async sends; result: sent, errors, cpu_s, elapsed_s."""
    import select

    probe, send, pending, close = latency_sender(a)
    try:
        warm_up(probe)  # the topic exists now: the parent starts its consumer
        _OUT.write("ready\n")
        while True:
            ready, _, _ = select.select([sys.stdin], [], [], 0.2)
            if ready:
                if sys.stdin.buffer.readline().strip() != b"go":
                    return {"error": "latency producer: parent went away"}
                break
            probe()
        with Measure() as m:
            sent = paced(a["rate"], a["max_count"], a["max_seconds"], send)
            end = time.monotonic() + 10
            while time.monotonic() < end and pending()[1] > 0:
                time.sleep(0.002)
        return {"sent": sent, "errors": pending()[0], "elapsed_s": m.elapsed, "cpu_s": m.cpu}
    finally:
        close()


def run_latency(a: dict) -> dict:
    """Consumer side of a latency run (``sdk`` or ``cpp``); the producer per ``a["producer"]``."""
    lat: list[float] = []
    lock = threading.Lock()
    gate = [1 << 62]  # bodies stamped before the measured phase (probes) are not counted
    segs: list[tuple[int, int]] = []
    seen = threading.Event()

    def on_body(body: bytes) -> None:
        now = time.monotonic_ns()
        stamp = int(body[:20])
        seen.set()
        if stamp >= gate[0]:
            with lock:
                lat.append((now - stamp) / 1000.0)

    in_process = a.get("producer", "process") == "thread"
    child = None
    stop: Any = None
    try:
        # the producer first: its warm-up send creates the topic the consumer subscribes to
        if in_process:
            probe, send, pending, close = latency_sender(a)
            warm_up(probe)
        else:
            import select
            import subprocess

            child = subprocess.Popen([sys.executable, __file__, json.dumps({**a, "scenario": "latency_producer"})],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            if not select.select([child.stdout], [], [], 40)[0] or child.stdout.readline().strip() != b"ready":
                return {"error": "the latency producer did not start"}
        if a["client"] == "sdk":
            def on_msgs(msgs: list) -> None:
                for msg in msgs:
                    on_body(msg.body)
                # where the time goes (epoch ms, 1 ms resolution): born -> stored -> listener
                now_ms = int(time.time() * 1000)
                with lock:
                    segs.extend((msg.store_timestamp - msg.born_timestamp, now_ms - msg.store_timestamp)
                                for msg in msgs if int(msg.body[:20]) >= gate[0])

            c = sdk_consumer(a, on_msgs)
            c.start()
            stop = c.shutdown
        else:
            c, cb = cpp_consumer(a, on_body)
            cpp_start(c)
            stop = lambda: cpp_shutdown(c)  # noqa: E731
        deadline = time.monotonic() + 30  # a new C++ group may start at the end of the queues
        while time.monotonic() < deadline and not seen.wait(0.2):
            if in_process:
                probe()  # the child probes by itself
        if not seen.is_set():
            return {"error": "no probe message reached the consumer in 30 s"}
        with Measure() as m:
            gate[0] = time.monotonic_ns()
            if in_process:
                sent = paced(a["rate"], a["max_count"], a["max_seconds"], send)
                end = time.monotonic() + 10
                while time.monotonic() < end and pending()[1] > 0:
                    time.sleep(0.002)
                errors, producer = pending()[0], {}
            else:
                child.stdin.write(b"go\n")
                child.stdin.flush()
                out, _ = child.communicate(timeout=a["max_seconds"] + 40)
                lines = [ln for ln in out.decode(errors="replace").splitlines() if ln.startswith("{")]
                producer = json.loads(lines[-1]) if lines else {"error": f"producer exit {child.returncode}"}
                if "error" in producer:
                    return {"error": f"producer: {producer['error']}"}
                sent, errors = producer["sent"], producer["errors"]
            wait_end = time.monotonic() + 10
            while time.monotonic() < wait_end and len(lat) < sent - errors:
                time.sleep(0.005)
    finally:
        if child is not None and child.poll() is None:
            child.kill()
        if stop is not None:
            stop()
        if in_process:
            close()
    res = {"count": len(lat), "sent": sent, "errors": errors, "elapsed_s": m.elapsed, "cpu_s": m.cpu,
           "latency_us": percentiles(lat), "producer": a.get("producer", "process")}
    if segs:
        res["born_to_store_ms"] = percentiles([float(x) for x, _ in segs])
        res["store_to_listener_ms"] = percentiles([float(y) for _, y in segs])
    if producer:  # the child's CPU is client CPU too: cpu_s covers both roles, as in one process
        res["consumer_cpu_s"], res["producer_cpu_s"] = m.cpu, producer["cpu_s"]
        res["cpu_s"] = m.cpu + producer["cpu_s"]
    return res


RUNNERS = {
    ("sdk", "sync"): run_sdk_send, ("sdk", "batch"): run_sdk_send, ("sdk", "async"): run_sdk_send, ("sdk", "oneway"): run_sdk_send,
    ("sdk", "consume"): run_sdk_consume, ("sdk", "latency"): run_latency, ("sdk", "latency_producer"): run_latency_producer,
    ("cpp", "sync"): run_cpp_send, ("cpp", "oneway"): run_cpp_send, ("cpp", "batch"): run_cpp_send,
    ("cpp", "async"): run_cpp_send, ("cpp", "consume"): run_cpp_consume, ("cpp", "latency"): run_latency,
    ("cpp", "latency_producer"): run_latency_producer,
}


def apply_patches(patch: dict[str, Any]) -> None:
    """``{"package.module:Class.attr": value}``: set attributes before the run (A/B variants,
    see ``benchmarks/profiling/ab.py``); a target ending in ``()`` is called with the value instead
    (``{"sys:setswitchinterval()": 0.0005}``)."""
    import importlib

    for target, value in patch.items():
        mod_name, _, path = target.partition(":")
        obj: Any = importlib.import_module(mod_name)
        *parents, attr = path.split(".")
        for name in parents:
            obj = getattr(obj, name)
        if attr.endswith("()"):
            getattr(obj, attr[:-2])(value)
        else:
            setattr(obj, attr, value)


def main() -> None:
    a = json.loads(sys.argv[1])
    # hard stop: whatever hangs (native threads included), the process ends by itself
    signal.signal(signal.SIGALRM, lambda *_: os._exit(3))
    signal.alarm(int(a.get("deadline_s", 120)))
    try:
        apply_patches(a.get("patch") or {})
        res = RUNNERS[(a["client"], a["scenario"])](a)
    except Exception as exc:
        res = {"error": f"{type(exc).__name__}: {exc}"}
    _OUT.write(json.dumps(res) + "\n")
    _OUT.flush()
    os._exit(0)  # skip the C++ bindings' __del__ (double shutdown) and lingering threads


if __name__ == "__main__":
    main()
