"""Helpers of the store tests: small files (4 KiB CommitLog files, 10-entry consume-queue
files) under ``tmp_path``, and an independent docs/protocol.md §4.5 / §5.3 parser (plain ``struct``, no SDK
codec) to check the bytes on disk."""

from __future__ import annotations

import os
import socket
import struct
import threading
import zlib
from dataclasses import dataclass

from rocketmq_broker.store import InnerMessage, MessageStore, StoreConfig
from rocketmq_sdk.protocol.message import Message

CL_FILE = 4096
CQ_FILE = 200  # 10 entries


def make_config(root, **overrides) -> StoreConfig:
    kw = dict(store_path_root_dir=str(root), mapped_file_size_commit_log=CL_FILE,
              mapped_file_size_consume_queue=CQ_FILE, flush_interval_commit_log=50,
              flush_interval_consume_queue=50, max_hash_slot_num=64, max_index_num=256)
    kw.update(overrides)
    return StoreConfig(**kw)


def inner(topic="TopicA", queue_id=0, body=b"hello", tags=None, keys=None, sys_flag=0,
          prepared_transaction_offset=0, **kw) -> InnerMessage:
    m = InnerMessage.from_message(Message(topic, body, tags=tags, keys=keys), queue_id,
                                  born_host="10.0.0.7:50001", store_host="127.0.0.1:10911",
                                  sys_flag=sys_flag, **kw)
    m.prepared_transaction_offset = prepared_transaction_offset
    return m


def hold_flushes(store: MessageStore) -> threading.Event:
    """Make every ``store.commit_log.flush()`` wait (up to 5 s) until the returned event is set,
    then flush as before: puts of a SYNC_FLUSH store outwait their ``sync_flush_timeout``."""
    release = threading.Event()
    real_flush = store.commit_log.flush

    def held_flush():
        release.wait(5)
        return real_flush()

    store.commit_log.flush = held_flush
    return release


def simulate_crash(store: MessageStore) -> None:
    """Stop a store the way a kill would leave it: threads gone, files unmapped, the ``abort``
    marker left in place (no clean-shutdown bookkeeping)."""
    store.running = False
    store.commit_log.shutdown_writes()
    store._flush_commit_log.shutdown()
    store._flush_consume_queue.shutdown()
    store.commit_log.shutdown()
    for cq in store.all_consume_queues():
        cq.shutdown()
    store.checkpoint.shutdown()
    store._release_lock()
    assert os.path.exists(store.config.abort_path)


@dataclass
class Rec:
    total: int
    crc: int
    queue_id: int
    flag: int
    queue_offset: int
    physical_offset: int
    sys_flag: int
    born_timestamp: int
    born_host: str
    store_timestamp: int
    store_host: str
    reconsume_times: int
    prepared_tx_offset: int
    body: bytes
    topic: str
    properties: str


def parse_record(buf: bytes, pos: int) -> Rec:
    """Independent docs/protocol.md §4.5 decoder (IPv4 hosts only)."""
    total, magic, crc, qid, flag, qoff, phy, sysflag, born_ts = struct.unpack_from(">iiiiiqqiq", buf, pos)
    assert magic == -626843481, hex(magic & 0xFFFFFFFF)
    p = pos + 48
    born = socket.inet_ntoa(buf[p:p + 4]) + ":" + str(struct.unpack_from(">i", buf, p + 4)[0])
    p += 8
    store_ts = struct.unpack_from(">q", buf, p)[0]
    p += 8
    store = socket.inet_ntoa(buf[p:p + 4]) + ":" + str(struct.unpack_from(">i", buf, p + 4)[0])
    p += 8
    reconsume, prepared, body_len = struct.unpack_from(">iqi", buf, p)
    p += 16
    body = buf[p:p + body_len]
    p += body_len
    tlen = struct.unpack_from(">b", buf, p)[0]
    topic = buf[p + 1:p + 1 + tlen].decode()
    p += 1 + tlen
    plen = struct.unpack_from(">h", buf, p)[0]
    props = buf[p + 2:p + 2 + plen].decode()
    p += 2 + plen
    assert p - pos == total
    assert crc == zlib.crc32(body) & 0x7FFFFFFF
    return Rec(total, crc, qid, flag, qoff, phy, sysflag, born_ts, born, store_ts, store, reconsume, prepared,
               body, topic, props)


def read_commit_log(root) -> list[tuple[str, list]]:
    """[(file name, [Rec | ("BLANK", remaining)])] read straight from the files."""
    d = os.path.join(root, "commitlog")
    out = []
    for name in sorted(os.listdir(d)):
        data = open(os.path.join(d, name), "rb").read()
        items: list = []
        pos = 0
        while pos + 8 <= len(data):
            total, magic = struct.unpack_from(">ii", data, pos)
            if magic == -875286124:
                items.append(("BLANK", total, pos))
                break
            if total == 0:
                break
            items.append(parse_record(data, pos))
            pos += total
        out.append((name, items))
    return out


def read_consume_queue(root, topic, queue_id) -> list[tuple[int, int, int]]:
    d = os.path.join(root, "consumequeue", topic, str(queue_id))
    entries = []
    for name in sorted(os.listdir(d)):
        data = open(os.path.join(d, name), "rb").read()
        assert len(data) == CQ_FILE
        for off, size, tags in struct.iter_unpack(">qiq", data):
            if off == 0 and size == 0 and tags == 0:
                return entries
            entries.append((off, size, tags))
    return entries
