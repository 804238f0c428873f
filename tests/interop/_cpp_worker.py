"""Subprocess side of the C++-client harness (see ``cpp_client.py``; never imported by pytest).

Usage: ``python _cpp_worker.py '<json args>'``. Runs one role of the official C++ client
(PyPI ``rocketmq==0.4.4``) and reports on stdout as JSON lines, one event per line::

    {"event": "ready", "pid": 123, "log_path": "..."}        # client started
    {"event": "sent", "index": 0, "ok": true, "status": "OK", "msg_id": "...", "offset": 3}
    {"event": "sent", "index": 1, "ok": false, "error_type": "ProducerSendSyncFailed", "error": "..."}
    {"event": "message", "topic": ..., "body_b64": ..., "status": "CONSUME_SUCCESS", ...}
    {"event": "assigned", "topic": "T", "broker_name": "b", "queue_id": 0, "offset": 0}  # native log
    {"event": "pull", "queue_id": 0, "status": "FOUND", "next_begin_offset": 4, ...}
    {"event": "fatal", "error_type": ..., "error": ...}      # then exit code 2
    {"event": "done"} / {"event": "stopped"}                 # then exit code 0

Roles (``args["role"]``): ``produce`` (modes sync, oneway, orderly, oneway_orderly, async,
batch), ``push`` (push consumer; runs until stdin reaches EOF, a ``stop`` line arrives or
SIGTERM) and ``pull`` (pulls every queue of a topic once from the given offsets).

The native library prints to fd 1 on some paths, so the JSON channel is a private duplicate of
the original stdout and fd 1 is pointed at stderr. The process leaves with ``os._exit`` after
an explicit shutdown so the bindings' ``__del__`` (which shuts down and destroys the native
objects a second time) never runs at interpreter exit.
"""

from __future__ import annotations

import base64
import ctypes
import json
import os
import re
import signal
import sys
import threading
import time
import traceback
from typing import Any

_OUT_FD = os.dup(1)
os.dup2(2, 1)
_OUT = os.fdopen(_OUT_FD, "w", buffering=1, encoding="utf-8")
_OUT_LOCK = threading.Lock()

# Property keys always read back from a received message (the C API has no "all properties"
# accessor, only GetMessageProperty(key)).
SYSTEM_PROPERTY_KEYS = (
    "TAGS", "KEYS", "UNIQ_KEY", "WAIT", "DELAY", "RETRY_TOPIC", "REAL_TOPIC", "REAL_QID",
    "PGROUP", "RECONSUME_TIME", "MAX_RECONSUME_TIMES", "ORIGIN_MESSAGE_ID", "TRAN_MSG",
    "MIN_OFFSET", "MAX_OFFSET", "CONSUME_START_TIME", "CLUSTER",
)
LOG_LEVELS = {"fatal": 1, "error": 2, "warn": 3, "info": 4, "debug": 5, "trace": 6}
# librocketmq's INFO line when a rebalance gives this client a queue and its start offset is known.
_ASSIGNED_RE = re.compile(
    r"add mq:MessageQueue \[topic=(.*?), brokerName=(.*?), queueId=(\d+)\], request initiall offset:(-?\d+)")


def emit(event: str, **fields: Any) -> None:
    """Write one JSON event line on the private stdout channel (thread-safe)."""
    line = json.dumps({"event": event, **fields}, sort_keys=True)
    with _OUT_LOCK:
        _OUT.write(line + "\n")
        _OUT.flush()


def _b(value: str | bytes | None) -> bytes:
    if value is None:
        return b""
    return value if isinstance(value, bytes) else value.encode("utf-8")


def _s(value: bytes | None) -> str:
    return (value or b"").decode("utf-8", errors="replace")


def log_path() -> str:
    """Where librocketmq writes this process's log (fixed: ``$HOME/logs/rocketmq-cpp/``)."""
    return os.path.join(os.environ["HOME"], "logs", "rocketmq-cpp", f"{os.getpid()}_rocketmq-cpp.log.0")


def _configure_common(dll: Any, handle: Any, kind: str, args: dict) -> None:
    """Apply the settings every client kind has (log level, credentials, instance name)."""
    level = LOG_LEVELS[args.get("log_level", "info")]
    getattr(dll, f"Set{kind}LogLevel")(handle, level)
    creds = args.get("credentials")
    if creds:
        rc = getattr(dll, f"Set{kind}SessionCredentials")(
            handle, _b(creds["access_key"]), _b(creds["secret_key"]), _b(creds.get("channel", "ALIYUN")))
        _check(rc)
    instance = args.get("instance_name")
    if instance and kind in ("Producer", "PushConsumer"):
        fn = getattr(dll, f"Set{kind}InstanceName")
        fn.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        _check(fn(handle, _b(instance)))


def _check(rc: Any) -> None:
    from rocketmq.exceptions import ffi_check

    ffi_check(rc)


def _make_message(client: Any, dll: Any, topic: str, spec: dict) -> Any:
    msg = client.Message(topic)
    body = base64.b64decode(spec["body_b64"]) if "body_b64" in spec else _b(spec.get("body", ""))
    # SetByteMessageBody takes an explicit length, so bodies with NUL bytes survive the send side.
    _check(dll.SetByteMessageBody(msg, body, len(body)))
    if spec.get("tags"):
        msg.set_tags(spec["tags"])
    keys = spec.get("keys")
    if keys:
        msg.set_keys(keys if isinstance(keys, str) else " ".join(keys))
    for key, value in (spec.get("properties") or {}).items():
        msg.set_property(key, value)
    if spec.get("delay_level"):
        msg.set_delay_time_level(int(spec["delay_level"]))
    return msg


def _error_fields(exc: BaseException) -> dict:
    return {"error_type": type(exc).__name__, "error": str(exc)}


def run_produce(args: dict) -> None:
    from rocketmq import client
    from rocketmq.ffi import dll

    producer = client.Producer(args["group"])
    handle = producer._handle
    _configure_common(dll, handle, "Producer", args)
    producer.set_namesrv_addr(args["namesrv_addr"])
    if args.get("send_timeout_ms"):
        producer.set_timeout(int(args["send_timeout_ms"]))
    if args.get("compress_level") is not None:
        producer.set_compress_level(int(args["compress_level"]))
    if args.get("max_message_size"):
        producer.set_max_message_size(int(args["max_message_size"]))
    producer.start()
    emit("ready", pid=os.getpid(), log_path=log_path())
    topic, mode, specs = args["topic"], args.get("mode", "sync"), args["messages"]
    try:
        if mode == "batch":
            _send_batch(client, dll, producer, topic, specs)
        elif mode == "async":
            _send_async(client, dll, producer, topic, specs, args)
        else:
            for index, spec in enumerate(specs):
                _send_one(client, dll, producer, topic, mode, index, spec)
    finally:
        producer.shutdown()
    emit("done")


def _send_one(client: Any, dll: Any, producer: Any, topic: str, mode: str, index: int, spec: dict) -> None:
    msg = _make_message(client, dll, topic, spec)
    arg = int(spec.get("arg", 0))
    try:
        if mode == "sync":
            result = producer.send_sync(msg)
        elif mode == "orderly":
            result = producer.send_orderly(msg, arg, retry_times=int(spec.get("retry_times", 3)))
        elif mode == "oneway":
            producer.send_oneway(msg)
            result = None
        elif mode == "oneway_orderly":
            producer.send_oneway_orderly(msg, arg)
            result = None
        else:
            raise ValueError(f"unknown produce mode {mode!r}")
    except Exception as exc:  # native failures surface as rocketmq.exceptions.* here
        emit("sent", index=index, ok=False, **_error_fields(exc))
        return
    if result is None:
        emit("sent", index=index, ok=True, status=None, msg_id=None, offset=None)
    else:
        emit("sent", index=index, ok=True, status=result.status.name, msg_id=result.msg_id, offset=result.offset)


def _send_batch(client: Any, dll: Any, producer: Any, topic: str, specs: list[dict]) -> None:
    msgs = [_make_message(client, dll, topic, spec) for spec in specs]
    try:
        result = producer.send_batch(msgs)
    except Exception as exc:
        emit("sent", index=0, ok=False, **_error_fields(exc))
        return
    emit("sent", index=0, ok=True, status=result.status.name, msg_id=result.msg_id, offset=result.offset)


def _send_async(client: Any, dll: Any, producer: Any, topic: str, specs: list[dict], args: dict) -> None:
    pending = threading.Semaphore(0)
    deadline_s = float(args.get("async_wait_s", 30.0))
    msgs = []
    for index, spec in enumerate(specs):
        msg = _make_message(client, dll, topic, spec)
        msgs.append(msg)  # keep the native message alive until its callback ran

        def on_ok(result: Any, index: int = index) -> None:
            emit("sent", index=index, ok=True, status=result.status.name, msg_id=result.msg_id, offset=result.offset)
            pending.release()

        def on_error(exc: BaseException, index: int = index) -> None:
            emit("sent", index=index, ok=False, **_error_fields(exc))
            pending.release()

        try:
            producer.send_async(msg, on_ok, on_error)
        except Exception as exc:
            on_error(exc)
    end = time.monotonic() + deadline_s
    for _ in specs:
        if not pending.acquire(timeout=max(0.0, end - time.monotonic())):
            emit("fatal", error_type="Timeout", error=f"async send callbacks missing after {deadline_s} s")
            return


def _read_message(dll: Any, handle: Any, property_keys: list[str]) -> dict:
    """Everything the C API exposes about a received message, as JSON-ready fields."""
    from rocketmq.client import RecvMessage

    msg = RecvMessage(handle)
    body = msg.body or b""  # GetMessageBody is a char*: the body is cut at its first NUL byte
    properties = {}
    for key in list(SYSTEM_PROPERTY_KEYS) + list(property_keys):
        value = dll.GetMessageProperty(handle, _b(key))
        if value:
            properties[key] = _s(value)
    return {
        "topic": msg.topic,
        "tags": _s(msg.tags),
        "keys": _s(msg.keys),
        "body_b64": base64.b64encode(body).decode("ascii"),
        "properties": properties,
        "msg_id": msg.id,
        "queue_id": msg.queue_id,
        "queue_offset": msg.queue_offset,
        "commit_log_offset": msg.commit_log_offset,
        "reconsume_times": msg.reconsume_times,
        "delay_level": msg.delay_time_level,
        "store_size": msg.store_size,
        "born_timestamp": msg.born_timestamp,
        "store_timestamp": msg.store_timestamp,
    }


def _tail_log(path: str, stop: threading.Event) -> None:
    """Emit ``assigned`` events for queue assignments the native log reports (best effort)."""
    pos = 0
    while not stop.is_set():
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                fh.seek(pos)
                chunk = fh.read()
                pos = fh.tell()
        except FileNotFoundError:
            chunk = ""
        for line in chunk.splitlines():
            match = _ASSIGNED_RE.search(line)
            if match:
                emit("assigned", topic=match.group(1), broker_name=match.group(2),
                     queue_id=int(match.group(3)), offset=int(match.group(4)))
        stop.wait(0.1)


def run_push(args: dict) -> None:
    from rocketmq import client
    from rocketmq.ffi import MSG_CALLBACK_FUNC, MessageModel, dll

    orderly = bool(args.get("orderly", False))
    model = MessageModel[args.get("model", "CLUSTERING")]
    consumer = client.PushConsumer(args["group"], orderly=orderly, message_model=model)
    handle = consumer._handle
    _configure_common(dll, handle, "PushConsumer", args)
    consumer.set_namesrv_addr(args["namesrv_addr"])
    if args.get("thread_count"):
        consumer.set_thread_count(int(args["thread_count"]))
    if args.get("batch_max_size"):
        consumer.set_message_batch_max_size(int(args["batch_max_size"]))

    fail_keys: dict[str, int] = dict(args.get("fail_keys") or {})
    property_keys = list(args.get("property_keys") or [])
    failures_left = dict(fail_keys)
    lock = threading.Lock()

    def on_message(_consumer: Any, msg_handle: Any) -> int:
        try:
            fields = _read_message(dll, msg_handle, property_keys)
            status = "CONSUME_SUCCESS"
            with lock:
                for key in fields["keys"].split():
                    if failures_left.get(key, 0) > 0:
                        failures_left[key] -= 1
                        status = "RECONSUME_LATER"
                        break
            emit("message", status=status, received_ms=int(time.time() * 1000), **fields)
            return 0 if status == "CONSUME_SUCCESS" else 1
        except Exception as exc:  # never let an exception cross the ctypes boundary
            emit("callback_error", **_error_fields(exc), traceback=traceback.format_exc())
            return 1

    callback = MSG_CALLBACK_FUNC(on_message)
    register = dll.RegisterMessageCallbackOrderly if orderly else dll.RegisterMessageCallback
    for topic, expression in args["subscriptions"]:
        _check(dll.Subscribe(handle, _b(topic), _b(expression)))
    _check(register(handle, callback))

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    tail = threading.Thread(target=_tail_log, args=(log_path(), stop), daemon=True)
    consumer.start()
    tail.start()
    emit("ready", pid=os.getpid(), log_path=log_path())

    def watch_stdin() -> None:
        for line in sys.stdin:
            if line.strip() == "stop":
                break
        stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    while not stop.wait(0.2):
        pass
    consumer.shutdown()  # `callback` (a local) stays alive until here: the native side calls it
    emit("stopped")


def run_pull(args: dict) -> None:
    from rocketmq import client
    from rocketmq.ffi import _CMessageQueue, _CPullStatus, dll

    consumer = client.PullConsumer(args["group"])
    handle = consumer._handle
    _configure_common(dll, handle, "PullConsumer", args)
    consumer.set_namesrv_addr(args["namesrv_addr"])
    consumer.start()
    emit("ready", pid=os.getpid(), log_path=log_path())
    try:
        queues = ctypes.POINTER(_CMessageQueue)()
        size = ctypes.c_int()
        _check(dll.FetchSubscriptionMessageQueues(handle, _b(args["topic"]), ctypes.pointer(queues), ctypes.pointer(size)))
        mqs = [queues[i] for i in range(size.value)]
        emit("queues", queues=[{"topic": _s(mq.topic), "broker_name": _s(mq.brokerName), "queue_id": mq.queueId}
                               for mq in mqs])
        offsets = {int(k): int(v) for k, v in (args.get("offsets") or {}).items()}
        max_rounds = int(args.get("max_rounds", 100))
        for mq in mqs:
            offset = offsets.get(mq.queueId, 0)
            for _ in range(max_rounds):
                res = dll.Pull(handle, ctypes.pointer(mq), _b(args.get("expression", "*")),
                               ctypes.c_longlong(offset), int(args.get("max_num", 32)))
                status = _CPullStatus(res.pullStatus)
                emit("pull", queue_id=mq.queueId, offset=offset, status=status.name,
                     next_begin_offset=res.nextBeginOffset, min_offset=res.minOffset, max_offset=res.maxOffset)
                if status == _CPullStatus.FOUND:
                    for i in range(res.size):
                        emit("message", status="PULLED", **_read_message(dll, res.msgFoundList[i], []))
                dll.ReleasePullResult(res)
                if status == _CPullStatus.NO_NEW_MSG or status == _CPullStatus.BROKER_TIMEOUT:
                    break
                if res.nextBeginOffset == offset and status != _CPullStatus.FOUND:
                    break
                offset = res.nextBeginOffset
        _check(dll.ReleaseSubscriptionMessageQueue(queues))
    finally:
        consumer.shutdown()
    emit("done")


ROLES = {"produce": run_produce, "push": run_push, "pull": run_pull}


def main() -> None:
    code = 0
    try:
        args = json.loads(sys.argv[1])
        ROLES[args["role"]](args)
    except BaseException as exc:  # report everything, the parent decides
        emit("fatal", **_error_fields(exc), traceback=traceback.format_exc())
        code = 2
    _OUT.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
