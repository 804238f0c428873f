"""Puts per second of the reference broker's message store.

Usage: ``python benchmarks/store_put.py [--count N] [--threads T]``

Measures ``MessageStore.put_message`` for 100-byte and 1 KiB bodies under ASYNC_FLUSH and
SYNC_FLUSH (group commit; with ``--threads`` > 1 several writers share each fsync), each in a
fresh temporary store with 64 MiB CommitLog files; messages carry TAGS and UNIQ_KEY, so the
IndexFile is built unless ``--no-index``. Prints one line per case.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time

from rocketmq_broker.store import FlushDiskType, InnerMessage, MessageStore, StoreConfig
from rocketmq_sdk.protocol.message_codec import decode_properties


def run_case(body_size: int, flush: FlushDiskType, count: int, threads: int, index: bool) -> float:
    with tempfile.TemporaryDirectory() as root:
        cfg = StoreConfig(store_path_root_dir=root, mapped_file_size_commit_log=64 * 1024 * 1024,
                          flush_disk_type=flush, message_index_enable=index)
        store = MessageStore(cfg)
        store.start()
        body = b"x" * body_size
        props = "TAGS\x01TagA\x02WAIT\x01true\x02UNIQ_KEY\x017F0000010001000000000000000000AA"
        per_thread = count // threads

        now = int(time.time() * 1000)
        props_map = decode_properties(props)  # the broker has the map from the send header
        batches = [[InnerMessage(topic="BenchTopic", queue_id=t % 8, body=body, properties_string=props,
                                 tags_code=2598919, born_timestamp=now, born_host="10.0.0.7:50001",
                                 store_host="127.0.0.1:10911", properties=props_map) for _ in range(per_thread)]
                   for t in range(threads)]

        def worker(msgs: list[InnerMessage]) -> None:
            put = store.put_message
            for msg in msgs:
                put(msg)

        start = time.perf_counter()  # messages are built beforehand: this times the store only
        ths = [threading.Thread(target=worker, args=(batches[i],)) for i in range(threads)]
        for t in ths:
            t.start()
        for t in ths:
            t.join()
        elapsed = time.perf_counter() - start
        store.shutdown()
        return per_thread * threads / elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=50_000, help="puts per ASYNC case (SYNC uses a tenth)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-index", action="store_true", help="disable the IndexFile (UNIQ_KEY/KEYS)")
    args = ap.parse_args()
    for flush in (FlushDiskType.ASYNC_FLUSH, FlushDiskType.SYNC_FLUSH):
        count = args.count if flush is FlushDiskType.ASYNC_FLUSH else max(args.count // 10, 100)
        for size in (100, 1024):
            rate = run_case(size, flush, count, args.threads, not args.no_index)
            print(f"{flush.value:11s} body={size:5d} B threads={args.threads} index={not args.no_index}: "
                  f"{rate:10,.0f} puts/s ({count} puts)")


if __name__ == "__main__":
    main()
