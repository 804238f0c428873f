"""Fuzz the remoting layer of a live broker and a live name server (one ``python -m rocketmq_broker
dev`` process) with thousands of random, truncated and malformed frames on many connections,
while a well-behaved SDK producer and push consumer keep working.

Each case is one connection; its frames come from ``random.Random(f"{seed}:{index}")``, so a
failing case replays alone. The run's seed is in every assertion message; set ``FUZZ_SEED`` to
repeat a run and ``FUZZ_CASES`` to change its size (3000 by default).

Expected answers (Java's ``NettyRemotingServer`` / ``RemotingCommand.decode`` behaviour):
  * a malformed frame (length < 4 or beyond 16 MiB, header length beyond the frame, header that
    does not parse) closes that connection, without a reply;
  * a well-formed request with an unknown code gets REQUEST_CODE_NOT_SUPPORTED (3) from the
    broker, with its opaque; the name server gives no reply (as Java's);
  * a known request code with garbage header fields gets some response with its opaque;
  * random bytes and truncated frames may do either, but never hang or break the server.
"""

from __future__ import annotations

import os
import random
import re
import socket
import struct
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from rocketmq_sdk import ConsumeConcurrentlyStatus, Message, Producer, PushConsumer
from rocketmq_sdk.protocol.codes import RequestCode, ResponseCode
from rocketmq_sdk.remoting import RemotingCommand
from rocketmq_sdk.remoting.frame import DEFAULT_MAX_FRAME_LENGTH

from tests.conftest import wait_until

CASES = int(os.environ.get("FUZZ_CASES", "3000"))
WORKERS = 16
IO_TIMEOUT_S = 5.0

REGISTERED = {int(c) for c in RequestCode}
BROKER_CODES = [10, 12, 14, 21, 28, 29, 30, 31, 32, 33, 34, 38, 41, 42, 310, 320]  # read or send, harmless
NAMESRV_CODES = [105, 106, 206]
EXT_KEYS = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "topic", "queueId",
            "producerGroup", "consumerGroup", "offset", "maxMsgNums", "sysFlag", "commitLogOffset",
            "properties", "bornTimestamp", "timestamp", "key", "maxNum", "beginTimestamp", "endTimestamp",
            "offsetMsgId", "group", "defaultTopic", "defaultTopicQueueNums", "batch"]
EXT_VALUES = ["", "-1", "0", "1", "abc", "99999999999999999999", "-2147483649", "1e3", "true", "null",
              "%RETRY%x", "TBW102", "\x01\x02", "\u00e9\u4e2d", "a" * 300, "UNIQ_KEY\x01k\x02TAGS\x01t"]


def _frame(header: bytes, body: bytes = b"", serialize_type: int = 0, length: int | None = None,
           hlen: int | None = None) -> bytes:
    length = 4 + len(header) + len(body) if length is None else length
    hlen = len(header) if hlen is None else hlen
    return struct.pack(">II", length & 0xFFFFFFFF, (serialize_type << 24) | (hlen & 0xFFFFFF)) + header + body


def _rand_text(rng: random.Random, n: int) -> str:
    return "".join(chr(rng.choice((rng.randrange(32, 127), rng.randrange(0x80, 0x800)))) for _ in range(n))


def _rand_ext(rng: random.Random) -> dict[str, str]:
    return {rng.choice(EXT_KEYS): (rng.choice(EXT_VALUES) if rng.random() < 0.7 else _rand_text(rng, rng.randrange(40)))
            for _ in range(rng.randrange(8))}


def _unknown_code(rng: random.Random) -> int:
    while True:
        code = rng.choice((rng.randrange(-32768, 0), rng.randrange(330, 32768)))
        if code not in REGISTERED:
            return code


def _request(rng: random.Random, code: int, ext: dict[str, str] | None = None, body: bytes = b"") -> RemotingCommand:
    cmd = RemotingCommand.request(code, ext, body, serialize_type=rng.choice((0, 1)))
    cmd.language = rng.randrange(0, 13)
    cmd.version = rng.choice((0, 63, 409, 32767))
    return cmd


# ---------------------------------------------------------------- case generators
# Each returns (frames to send, expectation): "close", "reply:<code>" (a response to every
# frame, with this code), "reply" (a response to every frame, any code) or "any".

def case_random_bytes(rng, server):
    return [rng.randbytes(rng.randrange(1, 300))], "any"


def case_garbage_header(rng, server):
    header = rng.randbytes(rng.randrange(1, 200))
    st = rng.choice((0, 2, 7, 255)) if header[:1] != b"{" else 2
    return [_frame(header, rng.randbytes(rng.randrange(20)), serialize_type=st)], "close"


def case_header_beyond_frame(rng, server):
    header = b'{"code":10}'
    return [_frame(header, length=4 + len(header), hlen=len(header) + rng.randrange(1, 10_000))], "close"


def case_bad_length(rng, server):
    length = rng.choice((0, 1, 2, 3, DEFAULT_MAX_FRAME_LENGTH - 3, DEFAULT_MAX_FRAME_LENGTH,
                         rng.randrange(DEFAULT_MAX_FRAME_LENGTH, 1 << 32)))
    return [struct.pack(">I", length) + rng.randbytes(rng.randrange(8))], "close"


def case_truncated_json(rng, server):
    header = _request(rng, rng.choice(BROKER_CODES), _rand_ext(rng)).encode()[8:]
    cut = header[:rng.randrange(len(header) - 1)]  # never valid: the closing brace is gone
    if cut[:1] != b"{" or len(cut) < 2:
        cut = b"{" + cut[1:] if cut else b"{"
    return [_frame(cut, rng.randbytes(rng.randrange(10)))], "close"


def case_bad_json_values(rng, server):
    header = rng.choice((b'{"code":1e400}', b'{"code":Infinity}', b'{"code":NaN}', b'{"code":null}', b'[]',
                         b'{"code":"x"}', b'{"opaque":1}', b'"str"', b'{"code":10,"extFields":[1,2]}',
                         b'{"code":10,"language":{}}', b"[" * rng.randrange(1000, 20_000),
                         b'{"code":10,"extFields":{"a":' + b"[" * 5000 + b"}}"))
    return [_frame(header)], "close"


def case_rocketmq_bad_lengths(rng, server):
    fixed = struct.pack(">hbhii", _unknown_code(rng), 0, 409, rng.randrange(1 << 31), 0)
    remark = rng.randbytes(rng.randrange(10))
    kind = rng.randrange(5)
    if kind == 0:    # remark length beyond the header
        header = fixed + struct.pack(">i", len(remark) + rng.randrange(1, 1 << 20)) + remark
    elif kind == 1:  # negative remark length
        header = fixed + struct.pack(">i", -rng.randrange(1, 1 << 31))
    elif kind == 2:  # extFields length beyond the header
        header = fixed + struct.pack(">ii", 0, rng.randrange(1, 1 << 31))
    elif kind == 3:  # an entry's value length beyond the extFields block
        entry = struct.pack(">h", 1) + b"k" + struct.pack(">i", rng.randrange(10, 1 << 30)) + b"v"
        header = fixed + struct.pack(">ii", 0, len(entry)) + entry
    else:            # fixed part cut short
        header = fixed[:rng.randrange(1, len(fixed))]
    return [_frame(header, serialize_type=1)], "close"


def case_unknown_codes(rng, server):
    frames = [_request(rng, _unknown_code(rng), _rand_ext(rng), rng.randbytes(rng.randrange(50))).encode()
              for _ in range(rng.randrange(1, 5))]  # pipelined on one connection
    return frames, f"reply:{ResponseCode.REQUEST_CODE_NOT_SUPPORTED}" if server == "broker" else "any"


def case_known_code_garbage_fields(rng, server):
    codes = BROKER_CODES if server == "broker" else NAMESRV_CODES
    return [_request(rng, rng.choice(codes), _rand_ext(rng), rng.randbytes(rng.randrange(100))).encode()], "reply"


def case_truncated_frame(rng, server):
    frame = _request(rng, rng.choice(BROKER_CODES), _rand_ext(rng), rng.randbytes(rng.randrange(100))).encode()
    return [frame[:rng.randrange(1, len(frame))]], "any"


def case_valid_then_garbage(rng, server):
    ok = _request(rng, _unknown_code(rng)).encode()
    frames, _ = case_garbage_header(rng, server)
    return [ok, frames[0]], "close"


def case_stray_responses(rng, server):
    """Responses nobody asked for are dropped; the connection stays usable."""
    stray = []
    for _ in range(rng.randrange(1, 4)):
        cmd = _request(rng, rng.choice((0, 1, 3, 17, 25)), _rand_ext(rng), rng.randbytes(rng.randrange(30)))
        cmd.flag |= 1  # RESPONSE
        stray.append(cmd.encode())
    frames, expect = case_unknown_codes(rng, server)
    return stray + frames, expect


def case_fragmented(rng, server):
    """Valid requests with an unknown code, written in random small pieces (the incremental decoder)."""
    frames, expect = case_unknown_codes(rng, server)
    data = b"".join(frames)
    cuts = sorted(rng.sample(range(1, len(data)), min(len(data) - 1, rng.randrange(1, 12))))
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)], expect


CASE_KINDS = [case_random_bytes, case_garbage_header, case_header_beyond_frame, case_bad_length,
              case_truncated_json, case_bad_json_values, case_rocketmq_bad_lengths, case_unknown_codes,
              case_known_code_garbage_fields, case_truncated_frame, case_valid_then_garbage, case_stray_responses,
              case_fragmented]


# ---------------------------------------------------------------- driving one case

def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def _split_frames(data: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos < len(data):
        (length,) = struct.unpack_from(">I", data, pos)
        out.append(data[pos:pos + 4 + length])
        pos += 4 + length
    return out


def _read_until_closed(sock: socket.socket) -> bytes:
    data = bytearray()
    while chunk := sock.recv(65536):
        data += chunk
    return bytes(data)


def run_case(addr: tuple[str, int], server: str, seed: int, index: int) -> str | None:
    """Play case ``index``; return None or a description of what went wrong."""
    rng = random.Random(f"{seed}:{index}:{server}")
    kind = rng.choice(CASE_KINDS)
    frames, expect = kind(rng, server)
    where = f"case {index} ({kind.__name__}, {server}, seed {seed})"
    try:
        with socket.create_connection(addr, timeout=IO_TIMEOUT_S) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            try:
                if kind is case_fragmented:
                    for piece in frames:
                        sock.sendall(piece)
                        time.sleep(0.0005)  # separate segments, not synchronisation
                    frames = [b"".join(frames)]
                else:
                    sock.sendall(b"".join(frames))
            except (BrokenPipeError, ConnectionResetError):
                if expect == "close":
                    return None  # closed while we were still writing
                raise
            if expect == "close":
                try:
                    rest = _read_until_closed(sock)
                except ConnectionResetError:
                    return None
                replies = len(frames) - 1  # only the valid frame of case_valid_then_garbage is answered
                if replies == 0 and rest:
                    return f"{where}: expected the connection closed without a reply, got {rest[:80]!r}"
                return None
            if expect.startswith("reply"):
                requests = [c for c in map(RemotingCommand.decode, (f[4:] for f in _split_frames(b"".join(frames))))
                            if not c.is_response]
                want = {c.opaque for c in requests}
                got = set()
                for _ in requests:
                    (length,) = struct.unpack(">I", _recv_exact(sock, 4))
                    resp = RemotingCommand.decode(_recv_exact(sock, length))
                    if not resp.is_response:
                        return f"{where}: not a response: {resp!r}"
                    if expect != "reply" and resp.code != int(expect.split(":")[1]):
                        return f"{where}: expected code {expect}, got {resp!r}"
                    got.add(resp.opaque)
                if got != want:
                    return f"{where}: response opaques {got} != request opaques {want}"
            return None  # "any": closing our side is enough; the liveness checks come later
    except TimeoutError:
        return f"{where}: no {'close' if expect == 'close' else 'response'} within {IO_TIMEOUT_S} s"
    except (ConnectionError, OSError) as exc:
        return f"{where}: {type(exc).__name__}: {exc}"


def _unhandled_errors(log: str) -> list[str]:
    """Log records at ERROR or above, asyncio's reports of exceptions nobody handled, and
    tracebacks other than a processor's failure (answered SYSTEM_ERROR, as Java does)."""
    records = re.split(r"\n(?=\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ )", log)
    return [r for r in records
            if re.match(r"\S+ \S+ (ERROR|CRITICAL) ", r)
            or re.search(r"Fatal error|Exception in callback|Task exception was never retrieved", r)
            or ("Traceback" in r and not re.match(r"\S+ \S+ WARNING rocketmq_sdk.remoting: processor for request code", r))]


def _fd_count(pid: int) -> int:
    """Open sockets of ``pid`` (store files opened meanwhile, e.g. a new consume queue's, are not
    leaks: each store file keeps its descriptor for flushing)."""
    return sum(1 for t in _fd_targets(pid) if t.startswith("socket:"))


def _fd_targets(pid: int) -> list[str]:
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            out.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass
    return sorted(out)



def test_fuzzed_frames_never_break_the_broker_or_the_name_server(tmp_path, server_process):
    seed = int(os.environ.get("FUZZ_SEED", random.SystemRandom().randrange(1 << 32)))
    print(f"fuzz seed {seed} (FUZZ_SEED={seed} repeats this run)")
    dev = server_process([sys.executable, "-m", "rocketmq_broker", "dev", "--store-dir", str(tmp_path / "store"),
                          "--namesrv-port", "0", "--broker-port", "0",
                          "--commit-log-file-size", str(4 * 1024 * 1024)])
    namesrv, broker = dev.lines["NAMESRV"], dev.lines["BROKER"]
    targets = {"broker": broker, "namesrv": namesrv}
    topic, group = "TopicFuzzWellBehaved", "cg_fuzz"

    received: set[str] = set()
    lock = threading.Lock()

    def listener(msgs, ctx):
        with lock:
            received.update(m.msg_id for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    producer = Producer("pg_fuzz", namesrv, poll_name_server_interval=200, heartbeat_broker_interval=200,
                        retry_times_when_send_failed=0)
    consumer = PushConsumer(group, namesrv, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                            poll_name_server_interval=200, heartbeat_broker_interval=200,
                            rebalance_interval=500, suspend_timeout=1000)
    sent: list[str] = []
    send_errors: list[BaseException] = []
    fuzz_done = threading.Event()

    def well_behaved() -> None:  # keeps sending until the fuzzing is over
        while not fuzz_done.is_set() or len(sent) < 50:
            try:
                sent.append(producer.send(Message(topic, b"still fine %d" % len(sent))).msg_id)
            except Exception as exc:
                send_errors.append(exc)
            time.sleep(0.002)

    producer.start()
    try:
        sent.append(producer.send(Message(topic, b"before")).msg_id)  # creates the topic
        consumer.subscribe(topic)
        consumer.register_message_listener(listener)
        consumer.start()
        base_fds = _fd_count(dev.proc.pid)
        base_targets = _fd_targets(dev.proc.pid)
        sender = threading.Thread(target=well_behaved, daemon=True)
        sender.start()
        t0 = time.monotonic()
        try:
            with ThreadPoolExecutor(WORKERS) as pool:
                jobs = []
                for i in range(CASES):
                    name = "namesrv" if i % 4 == 3 else "broker"
                    host, port = targets[name].rsplit(":", 1)
                    jobs.append(pool.submit(run_case, (host, int(port)), name, seed, i))
                problems = [p for p in (j.result() for j in jobs) if p]
        finally:
            fuzz_done.set()
            sender.join(30)
        elapsed = time.monotonic() - t0
        assert not problems, f"seed {seed}: {len(problems)} bad cases, e.g.\n" + "\n".join(problems[:10])
        assert dev.proc.poll() is None, f"seed {seed}: the server process died"
        assert not sender.is_alive(), f"seed {seed}: a well-behaved send hung"
        assert not send_errors, f"seed {seed}: well-behaved sends failed during fuzzing: {send_errors[:3]}"
        assert len(sent) >= 50
        wait_until(lambda: received >= set(sent), 20, f"seed {seed}: the consumer to get all {len(sent)} messages")
    finally:
        consumer.shutdown()
        producer.shutdown()
    # every fuzz connection was released (no leaked sockets, nothing stuck half-open)
    wait_until(lambda: _fd_count(dev.proc.pid) <= base_fds + 4, 10,
          f"seed {seed}: broker sockets to return to {base_fds} (now {_fd_count(dev.proc.pid)}; new: "
          f"{sorted(set(_fd_targets(dev.proc.pid)) - set(base_targets))})")
    log = dev.log()
    assert not _unhandled_errors(log), f"seed {seed}: unhandled errors in the server log: {_unhandled_errors(log)[:3]}"
    print(f"{CASES} cases in {elapsed:.1f} s; {len(sent)} well-behaved sends; "
          f"{log.count('closing connection')} connections closed for malformed frames")
