"""SYNC_FLUSH puts from an asyncio loop (``put_message_async``): a future per put, completed by
the flush thread's group commit only after the fsync covering the record, one loop wake-up per
flush; FLUSH_DISK_TIMEOUT after ``sync_flush_timeout``; no wait for WAIT=false or ASYNC_FLUSH."""

from __future__ import annotations

import asyncio
import threading

from rocketmq_broker.store import FlushDiskType, MessageStore, PutMessageStatus
from store_helpers import hold_flushes, inner, make_config


def _sync_store(tmp_path, **kw) -> MessageStore:
    cfg = make_config(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH, **kw)
    store = MessageStore(cfg)
    store.start()
    return store


def test_loop_puts_complete_only_after_their_fsync(tmp_path):
    store = _sync_store(tmp_path)
    gate = threading.Event()
    real_flush = store.commit_log.flush
    flushed_ends: list[int] = []

    def gated_flush():
        gate.wait(5)
        end = real_flush()
        flushed_ends.append(end)
        return end

    store.commit_log.flush = gated_flush

    async def main():
        futs = [store.put_message_async(inner(queue_id=i % 4, body=b"m%d" % i)) for i in range(50)]
        assert all(isinstance(f, asyncio.Future) for f in futs)
        await asyncio.sleep(0.05)  # the flush thread is held: nothing may be acknowledged
        assert not any(f.done() for f in futs)
        gate.set()
        results = await asyncio.wait_for(asyncio.gather(*futs), 5)
        for r in results:
            ar = r.append_message_result
            assert r.put_message_status is PutMessageStatus.PUT_OK
            assert store.commit_log.flushed_where >= ar.wrote_offset + ar.wrote_bytes
        return results

    try:
        results = asyncio.run(main())
        ends = [r.append_message_result.wrote_offset + r.append_message_result.wrote_bytes for r in results]
        assert ends == sorted(ends)
        assert store._flush_commit_log.flush_count < 50  # one fsync served many puts
        assert max(flushed_ends) >= ends[-1]
    finally:
        store.shutdown()


def test_loop_put_times_out_as_flush_disk_timeout(tmp_path):
    store = _sync_store(tmp_path, sync_flush_timeout=50)
    release = hold_flushes(store)

    async def main():
        r = await asyncio.wait_for(store.put_message_async(inner()), 2)
        assert r.put_message_status is PutMessageStatus.FLUSH_DISK_TIMEOUT
        assert r.is_ok()  # stored anyway
        batch = await asyncio.wait_for(store.put_messages_async([inner(), inner()]), 2)
        assert batch.put_message_status is PutMessageStatus.FLUSH_DISK_TIMEOUT
        nowait = inner()
        nowait.wait_store_msg_ok = False
        r2 = store.put_message_async(nowait)  # WAIT=false: the result at once
        assert r2.put_message_status is PutMessageStatus.PUT_OK

    try:
        asyncio.run(main())
    finally:
        release.set()
        store.shutdown()


def test_async_flush_loop_put_returns_result(store):
    async def main():
        r = store.put_message_async(inner())
        assert r.put_message_status is PutMessageStatus.PUT_OK
        rb = store.put_messages_async([inner(), inner()])
        assert rb.put_message_status is PutMessageStatus.PUT_OK
        assert rb.append_message_result.msg_num == 2

    asyncio.run(main())


def test_shutdown_completes_pending_loop_puts(tmp_path):
    store = _sync_store(tmp_path)

    async def main():
        futs = [store.put_message_async(inner(body=b"x%d" % i)) for i in range(20)]
        await asyncio.get_running_loop().run_in_executor(None, store.shutdown)
        results = await asyncio.wait_for(asyncio.gather(*futs), 5)
        assert all(r.is_ok() for r in results)

    asyncio.run(main())
