"""Interleaved A/B of small protocol paths: typed headers (PULL_MESSAGE request encode, its
response decode, the V2 send header both ways), ``PullStatus.from_response_code``, a frame split
across two reads, and fastjson's dialect parser on a route/stats body.

Each round runs this script once per variant in a fresh subprocess, variants alternating (the
first variant goes first in odd rounds): ``tree`` is the working tree, ``REV`` that revision's
``sdk/`` extracted as ``ab.py`` does (with the working tree's built C accelerators whose source is
unchanged). Times are CPU time (``time.process_time``), the best of 20 repeats per case and round,
so other processes on the machine move them less than wall time.

Usage: ``python benchmarks/profiling/protocol_paths.py --against 22dc672 [--rounds 5]``; prints a
Markdown table: per case the median over rounds of each variant (ns per call) and new/old.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent


def cases() -> dict[str, Callable[[], object]]:
    from rocketmq_sdk.protocol import fastjson
    from rocketmq_sdk.protocol.headers import (
        PullMessageRequestHeader,
        PullMessageResponseHeader,
        SendMessageRequestHeader,
    )
    from rocketmq_sdk.protocol.message import PullStatus
    from rocketmq_sdk.remoting.frame import FrameDecoder

    pull = PullMessageRequestHeader(consumer_group="cg", topic="T", queue_id=1, queue_offset=1234, max_msg_nums=32,
                                    sys_flag=3, commit_offset=1200, suspend_timeout_millis=15000, subscription="*",
                                    sub_version=1795334988219, expression_type="TAG", bname="broker-a")
    pull_resp = {"suggestWhichBrokerId": "0", "nextBeginOffset": "1266", "minOffset": "0", "maxOffset": "5000"}
    v2 = {"a": "pg", "b": "T", "c": "TBW102", "d": "4", "e": "2", "f": "0", "g": "1795334988219", "h": "0",
          "i": "KEYS\x01k\x02UNIQ_KEY\x01C0000202\x02WAIT\x01true", "j": "0", "k": "false", "m": "false",
          "n": "broker-a"}
    send = SendMessageRequestHeader.from_v2(v2)
    frame = (20).to_bytes(4, "big") + (4).to_bytes(4, "big") + b"{}\x00\x00" + bytes(12)
    first, rest = frame[:10], frame[10:] + frame
    decoder = FrameDecoder()
    dialect = ('{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},"brokerName":"b",'
               '"cluster":"c"}],"queueDatas":[{"brokerName":"b","perm":6,"readQueueNums":4,"topicSysFlag":0,'
               '"writeQueueNums":4}],"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:5,'
               '{"brokerName":"b","queueId":1,"topic":"t"}:7}}')

    def split_frame() -> None:
        decoder.feed(first)
        decoder.feed(rest)

    return {
        "PullMessageRequestHeader.to_ext_fields": pull.to_ext_fields,
        "PullMessageResponseHeader.from_ext_fields": lambda: PullMessageResponseHeader.from_ext_fields(pull_resp),
        "SendMessageRequestHeader.from_v2": lambda: SendMessageRequestHeader.from_v2(v2),
        "SendMessageRequestHeader.to_v2": send.to_v2,
        "PullStatus.from_response_code": lambda: PullStatus.from_response_code(19),
        "FrameDecoder.feed (frame in two reads)": split_frame,
        "fastjson.loads (dialect body)": lambda: fastjson.loads(dialect),
    }


def measure() -> None:
    """One variant, one round: ``name<TAB>ns`` per case."""
    for name, fn in cases().items():
        number = 100 if name.startswith("fastjson") else 2000
        best = min(timeit.repeat(fn, number=number, repeat=20, timer=time.process_time))
        print(f"{name}\t{best / number * 1e9:.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", help="the old revision (git rev) to compare the working tree with")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child or not args.against:
        measure()
        return
    sys.path[:0] = [str(HERE), str(HERE.parent)]
    import ab  # benchmarks/profiling/ab.py: the revision checkout with the built accelerators

    results: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        variants = {args.against: ab.checkout(args.against, Path(tmp)), "tree": ""}
        order = list(variants)
        for r in range(args.rounds):
            for name in (order if r % 2 == 0 else order[::-1]):
                env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (variants[name],
                                                                              os.environ.get("PYTHONPATH")) if p))
                out = subprocess.run([sys.executable, __file__, "--child"], env=env, check=True,
                                     capture_output=True, text=True).stdout
                for line in out.splitlines():
                    case, ns = line.split("\t")
                    results.setdefault((case, name), []).append(float(ns))
    old, new = order
    print(f"| case ({args.rounds} rounds, CPU ns per call, median) | {old} | working tree | new/old |")
    print("| --- | ---: | ---: | ---: |")
    for case in dict.fromkeys(c for c, _ in results):
        a, b = statistics.median(results[(case, old)]), statistics.median(results[(case, new)])
        print(f"| {case} | {a:.0f} | {b:.0f} | {b / a:.2f} |")


if __name__ == "__main__":
    main()
