"""Fill a topic with a consume backlog fast, and size it to the free disk space.

Used by ``benchmarks/run.py`` (``consume`` scenario). The backlog is written by the SDK's own
SEND_BATCH_MESSAGE frames (``MessagePreparer.prepare_batch``), encoded once before the fill
(``FILL_DISTINCT`` distinct frames, reused in a cycle, so UNIQ_KEYs repeat every
``FILL_DISTINCT x batch`` messages) and pipelined over a few raw sockets by
``harness.Generator``: the filler costs a socket write per batch, so the fill runs at the
broker's batch-store speed (about 50,000 x 100 B messages/s on 2 cores) instead of a client's.

Run alone to time a fill: ``python benchmarks/backlog.py --size 16384 --count 20000
[--flush SYNC_FLUSH]``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from harness import Generator, build_frames  # noqa: E402 - benchmarks/harness.py

FILL_DISTINCT = 16
# stored bytes per message besides the body: CommitLog record (~100 B header + topic +
# properties with UNIQ_KEY/WAIT ~80 B), ConsumeQueue 20 B, IndexFile ~20 B, rounded up
STORE_OVERHEAD_B = 300
# free space left on the store's disk after the largest backlog: the larger of these
DISK_MARGIN_B = 10 * 1024**3
DISK_MARGIN_FRACTION = 0.10


def fill_batch(size: int) -> int:
    """Messages per fill request: 256, fewer for large bodies (a batch body stays under 2.2 MB)."""
    return max(1, min(256, (2 * 1024 * 1024) // (size + 64)))


def bytes_per_message(size: int) -> int:
    """Estimated store bytes one backlog message of ``size`` body bytes takes (uncompressed)."""
    return size + STORE_OVERHEAD_B


def sized_backlog(wanted: int, size: int, store_dir: str | Path, reserved_b: int = 0) -> tuple[int, str | None]:
    """The largest backlog up to ``wanted`` that leaves a safe margin free on ``store_dir``'s disk.

    Margin: max(10 GiB, 10 % of the disk) plus ``reserved_b`` (space still to be written by
    later steps of the run). Returns ``(count, reason)``; ``reason`` is None when ``wanted`` fits,
    else why the figure is smaller (free space, need, margin - recorded in the results).
    """
    du = shutil.disk_usage(store_dir)
    margin = max(DISK_MARGIN_B, int(du.total * DISK_MARGIN_FRACTION)) + reserved_b
    per = bytes_per_message(size)
    need = wanted * per
    budget = du.free - margin
    if need <= budget:
        return wanted, None
    count = max(0, budget // per)
    # round down to a readable figure (1,000s)
    count = (count // 1000) * 1000
    return count, (f"{wanted:,} x {size:,} B needs ~{need / 1e9:.1f} GB of store but {du.free / 1e9:.1f} GB is "
                   f"free on the store's disk and {margin / 1e9:.1f} GB must stay free: backlog reduced to "
                   f"{count:,}")


def fill(producer, broker_addr: str, topic: str, size: int, count: int, *, connections: int = 2,
         inflight_b: int = 4 * 1024 * 1024, timeout_s: float = 600.0) -> dict:
    """Store ``count`` messages of ``size`` body bytes in ``topic`` (all its queues, round robin).

    Args:
        producer: a started ``rocketmq_sdk.Producer`` on the cluster (creates the topic, encodes).
        broker_addr: ``host:port`` of the broker the frames are written to.
        count: messages wanted; each connection stops at the first whole window at or past its
            share (about 1 % more in all).
        connections: sockets writing concurrently.
        inflight_b: request bytes in flight per connection (sets the window).
        timeout_s: give up after this long (the result then has ``error``).

    Returns:
        ``{"count", "elapsed_s", "msgs_per_s", "batch"}`` plus ``error`` on a failure.
    """
    from rocketmq_sdk import Message

    producer.send(Message(topic, b"create"))  # auto-created from TBW102; one more message
    mqs = producer.fetch_publish_queues(topic)
    count = max(1, count - 1)  # the "create" message counts
    batch = min(fill_batch(size), max(1, count // 64))
    frames = build_frames(producer, topic, size, batch, mqs[0].broker_name, [mq.queue_id for mq in mqs],
                          distinct=FILL_DISTINCT)
    per_conn = -(-count // connections)
    # the last burst of each connection may overshoot: at most a window of batches, ~1 % of count
    window = max(1, min(16, inflight_b // len(frames[0]), per_conn // (batch * 100)))
    gen = Generator(broker_addr, frames, batch, connections, window, limit=per_conn)
    t0 = time.perf_counter()
    deadline = time.monotonic() + timeout_s
    gen.start()
    while (any(t.is_alive() for t in gen.threads) and not gen.errors and time.monotonic() < deadline):
        time.sleep(0.01)
    gen.join(60)
    el = time.perf_counter() - t0
    n = gen.snapshot()[0] + 1
    res = {"count": n, "elapsed_s": el, "msgs_per_s": n / el if el else 0.0, "batch": batch}
    if gen.errors:
        res["error"] = gen.errors[0][:300]
    elif n < count:
        res["error"] = f"fill timed out after {timeout_s:.0f} s at {n:,} of {count:,}"
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description="time a backlog fill on a fresh reference broker")
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--count", type=int, default=100_000)
    ap.add_argument("--flush", default="ASYNC_FLUSH")
    args = ap.parse_args()
    from rocketmq_broker.embedded import start_dev_cluster
    from rocketmq_sdk import Producer

    with start_dev_cluster(broker_config={"flush_disk_type": args.flush,
                                          "mapped_file_size_commit_log": 256 * 1024 * 1024}) as cluster:
        print(f"store {cluster.store_dir}; disk-sized backlog for 1,000,000 x {args.size} B:",
              sized_backlog(1_000_000, args.size, cluster.store_dir), file=sys.stderr)
        with Producer("backlog_fill", cluster.namesrv_addr) as producer:
            res = fill(producer, cluster.broker_addr, "Backlog_Fill", args.size, args.count)
    print(res)
    return 1 if "error" in res else 0


if __name__ == "__main__":
    sys.exit(main())
