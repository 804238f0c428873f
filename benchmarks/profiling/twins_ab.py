"""Interleaved A/B of the C twins' micro-benchmarks between code trees.

Each variant is ``name=DIR``: a directory put first on ``PYTHONPATH`` that holds ``rocketmq_sdk`` and
``rocketmq_broker`` with their C twins built (``ab.py``'s checkouts do not build them; make one with
``git archive REV sdk broker-reference | tar -x -C DIR/src`` and ``setup.py build_ext --inplace``,
then link ``DIR/rocketmq_sdk`` -> ``src/sdk`` and ``DIR/rocketmq_broker`` -> ``src/broker-reference``).
Every round runs each variant once in a fresh interpreter (order alternating A B, B A, ...), which
times each operation below through its public Python function (the path the SDK and broker take, so
the twin's call overhead counts): ns per call, the best of 5 repeats on the thread's CPU clock; the
summary is the median over the rounds per variant.

Usage::

    python benchmarks/profiling/twins_ab.py --rounds 5 --variant base=/tmp/ab/base --variant new=/tmp/ab/new
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import timeit

BODY = b"x" * 128
PROPS = {"KEYS": "order-1001", "UNIQ_KEY": "C000020267645FFD2B276DE5F9BA0000", "WAIT": "true", "TAGS": "TagA"}


def _ops() -> dict:
    """name -> zero-argument callable; imports the code under test (the child's PYTHONPATH)."""
    from rocketmq_broker.store import batch_records, commit_log, index_file
    from rocketmq_sdk import Message
    try:
        from rocketmq_sdk.producer.prepare import SendHeaderTemplate, send_request
    except ImportError:  # a tree before the send pipeline (send_request.py)
        from rocketmq_sdk.producer.send_request import SendHeaderTemplate, send_request  # type: ignore
    from rocketmq_sdk.protocol import message_codec as mc
    from rocketmq_sdk.protocol import msgid
    from rocketmq_sdk.protocol.codes import RequestCode
    from rocketmq_sdk.protocol.headers import SendMessageRequestHeader
    from rocketmq_sdk.remoting.command import RemotingCommand

    ext = {"a": "bench_producer_group", "b": "BenchTopic", "c": "TBW102", "d": "4", "e": "2", "f": "0",
           "g": "1795334988219", "h": "0", "i": mc.encode_properties(PROPS), "j": "0", "k": "false",
           "m": "false", "n": "broker-a"}
    cmd = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, dict(ext), BODY)
    inner = cmd.encode()[4:]
    host, _ = mc.pack_host("10.0.0.7:10911")
    props_b = mc.encode_properties(PROPS).encode()
    record = commit_log.encode_record(b"BenchTopic", BODY, props_b, 1, 0, 0, 1_700_000_000_000, host, host,
                                      1_700_000_000_001, 5, 4096, 0, 0)
    records = bytes(record) * 32
    msgs = [Message("BenchTopic", BODY) for _ in range(32)]
    for m in msgs:
        m.properties.update(PROPS)  # as the producer leaves them (keys, UNIQ_KEY, tags)
    batch_body = mc.encode_batch(msgs)
    tmpl = SendHeaderTemplate(RequestCode.SEND_MESSAGE_V2, "bench_producer_group", "BenchTopic", "TBW102", "4", False)
    vals = ("2", "0", "1795334988219", "0", mc.encode_properties(PROPS), "broker-a")
    text = mc.encode_properties(PROPS)

    def batch_put():
        recs, _sizes, tags, _dicts = batch_records.encode_batch(batch_body, b"BenchTopic", (), 1, 0, 1_700_000_000_000,
                                                                host, host, 0, 4 << 20, 1 << 30)
        batch_records.finish_batch(recs, tags, host, len(host), 4096, 5, 1_700_000_000_001)

    return {
        "command.encode": cmd.encode,
        "command.decode": lambda: RemotingCommand.decode(inner),
        "headers.from_v2": lambda: SendMessageRequestHeader.from_v2(ext),
        "decode_messages x32": lambda: mc.decode_messages(records),
        "encode_batch x32": lambda: mc.encode_batch(msgs),
        "properties dec+enc": lambda: mc.encode_properties(mc.decode_properties(text)),
        "create_uniq_id": msgid.create_uniq_id,
        "send_request.encode": lambda: send_request(tmpl, vals, BODY).encode(),
        "store encode_record": lambda: commit_log.encode_record(b"BenchTopic", BODY, props_b, 1, 0, 0, 1, host, host,
                                                                2, 5, 4096, 0, 0),
        "store batch x32": batch_put,
        "index key_hash": lambda: index_file.index_key_hash("order-1001"),
    }


def child(seconds: float, only: list[str]) -> None:
    """ns per call of each operation: the best of 5 repeats of about ``seconds`` / 5 each, timed by
    the thread's CPU clock (time this process waits for a core on a busy machine does not count)."""
    out = {}
    for name, fn in _ops().items():
        if only and name not in only:
            continue
        timer = timeit.Timer(fn, timer=time.thread_time)
        number, _ = timer.autorange()
        number = max(1, int(number * seconds / 5 / 0.2))
        out[name] = min(timer.repeat(repeat=5, number=number)) / number * 1e9
    import rocketmq_sdk

    out["_from"] = rocketmq_sdk.__file__
    print(json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variant", action="append", required=True, help="name=DIR (a PYTHONPATH entry)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=1.0, help="CPU time per operation per run")
    ap.add_argument("--ops", default="", help="comma-separated operation names (default: all)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.seconds, [op for op in args.ops.split(",") if op])
        return
    variants = [v.split("=", 1) for v in args.variant]
    results: dict[str, list[dict]] = {name: [] for name, _ in variants}
    print(f"load average before: {os.getloadavg()[0]:.2f}", flush=True)
    for r in range(args.rounds):
        for name, path in (variants if r % 2 == 0 else variants[::-1]):
            env = dict(os.environ, PYTHONPATH=path)
            env.pop("ROCKETMQ_PURE_PYTHON", None)
            out = subprocess.run([sys.executable, __file__, "--child", "--seconds", str(args.seconds),
                                  "--ops", args.ops, "--variant", "x=y"], env=env, capture_output=True, text=True, check=True).stdout
            res = json.loads(out)
            if not res.pop("_from").startswith(path):
                raise SystemExit(f"{name}: rocketmq_sdk not imported from {path}")
            results[name].append(res)
            print(f"round {r + 1} {name}: " + "  ".join(f"{k} {v:.0f}" for k, v in res.items()), flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    names = [name for name, _ in variants]
    ops = list(results[names[0]][0])
    print(f"| operation (ns per call, median of {args.rounds}) | {' | '.join(names)} |"
          + (" change |" if len(names) == 2 else ""))
    print("|---|" + "---:|" * (len(names) + (len(names) == 2)))
    for op in ops:
        meds = [statistics.median(run[op] for run in results[name]) for name in names]
        change = f" {100 * (meds[1] / meds[0] - 1):+.1f} % |" if len(meds) == 2 else ""
        print(f"| {op} | " + " | ".join(f"{m:,.0f}" for m in meds) + " |" + change)


if __name__ == "__main__":
    main()
