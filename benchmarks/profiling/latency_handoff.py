"""Where a push consumer's client-side latency goes in the latency scenario: the pull answer
decoded → ``submit`` (the pull loop after FOUND) → the listener starting on a pool thread.

Usage: ``python benchmarks/profiling/latency_handoff.py [--rate 5000] [--seconds 3] [--rounds 1]
[--switch-interval S]``. Starts a dev broker, runs ``_worker.run_latency`` (producer in a child
process) in this process with ``MQClientAPI.pull_message``, ``ConsumeMessageConcurrentlyService
.submit`` and ``._consume`` wrapped to stamp each message, and prints p50/p99/p99.9 of both
segments next to the end-to-end latency. ``--switch-interval`` sets ``sys.setswitchinterval``
in the consumer first (the application's setting, not the SDK's).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parent.parent)]

import _worker as w  # noqa: E402  (its import points fd 1 at stderr; results go to w._OUT)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=int, default=5000)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--switch-interval", type=float, default=0.0)
    args = ap.parse_args()
    from rocketmq_broker.embedded import start_dev_cluster
    from rocketmq_sdk.client import mq_client_api as api
    from rocketmq_sdk.consumer import consume_service as cs

    stamps: dict[int, list[int]] = {}
    to_submit: list[float] = []
    to_listener: list[float] = []
    orig_pull, orig_submit, orig_consume = (api.MQClientAPI.pull_message, cs.ConsumeMessageConcurrentlyService.submit,
                                            cs.ConsumeMessageConcurrentlyService._consume)

    async def pull_message(self, *a, **k):
        res = await orig_pull(self, *a, **k)
        t = time.perf_counter_ns()
        for m in res.msg_found_list:
            stamps[id(m)] = [t, 0]
        return res

    def submit(self, msgs, pq, mq):
        t = time.perf_counter_ns()
        for m in msgs:
            s = stamps.get(id(m))
            if s:
                s[1] = t
        return orig_submit(self, msgs, pq, mq)

    def consume(self, msgs, pq, mq):
        t = time.perf_counter_ns()
        for m in msgs:
            s = stamps.pop(id(m), None)
            if s and s[1]:
                to_submit.append((s[1] - s[0]) / 1000)
                to_listener.append((t - s[1]) / 1000)
        return orig_consume(self, msgs, pq, mq)

    api.MQClientAPI.pull_message = pull_message
    cs.ConsumeMessageConcurrentlyService.submit = submit
    cs.ConsumeMessageConcurrentlyService._consume = consume
    if args.switch_interval:
        sys.setswitchinterval(args.switch_interval)

    def pct(v: list[float], scale: float = 1.0, fmt: str = "%.0f") -> str:
        q = w.percentiles(v)
        return "/".join(fmt % (q[k] / scale) for k in ("p50", "p99", "p999")) if q else "-"

    with start_dev_cluster(broker_config={"flush_disk_type": "ASYNC_FLUSH"}) as cl:
        for r in range(args.rounds):
            to_submit.clear()
            to_listener.clear()
            res = w.run_latency({"client": "sdk", "scenario": "latency", "namesrv": cl.namesrv_addr,
                                 "topic": f"Handoff{r}", "size": 100, "rate": args.rate,
                                 "max_count": int(args.rate * args.seconds), "max_seconds": args.seconds,
                                 "group": f"handoff{r}", "producer": "process", "deadline_s": 120})
            if "error" in res:
                print(f"round {r + 1}: {res['error']}", file=w._OUT)
                continue
            lat = res["latency_us"]
            print(f"round {r + 1}: end-to-end ms p50/p99/p99.9 "
                  + "/".join(f"{lat[k] / 1000:.1f}" for k in ("p50", "p99", "p999"))
                  + f" | decoded->submit µs {pct(to_submit)} | submit->listener µs {pct(to_listener)}"
                  + f" | received {res['count']}/{res['sent']}", file=w._OUT, flush=True)


if __name__ == "__main__":
    main()
