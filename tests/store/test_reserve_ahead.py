"""Disk space is reserved in chunks ahead of the write position (``StoreConfig.reserve_ahead_bytes``),
not for whole files: a fresh store's files use about one chunk on disk, writes across chunk ends
reserve as they go on every put path, and a reservation that fails in the middle of a file refuses
the put cleanly (SERVICE_NOT_AVAILABLE, code 14), before any byte of it is written, with every
acknowledged message kept (a real small tmpfs too: never a SIGBUS, neither writing nor loading)."""

from __future__ import annotations

import errno
import itertools
import logging
import os
import signal
import subprocess
import sys
import textwrap

import pytest
from rocketmq_broker.store import MessageStore, StoreConfig, mapped_file
from rocketmq_broker.store.results import GetMessageStatus, PutMessageStatus

from tests.store.store_helpers import inner, make_config
from tests.tmpfs import small_tmpfs as mounted_tmpfs

OK = PutMessageStatus.PUT_OK
CHUNK = 64 * 1024
ENTRY_CHUNK = CHUNK // 8  # consume queues and index entries
BIG_CL = 64 * 1024 * 1024  # logical sizes, far beyond what the tests write
BIG_CQ = 300_000 * 20
SLOTS, ENTRIES = 1000, 100_000
SLACK = 64 * 1024  # file-system rounding (blocks, extent metadata) allowed on top of a reservation
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def on_disk(path) -> int:
    """Bytes the file occupies on disk."""
    return os.stat(path).st_blocks * 512


def big_config(root, **kw) -> StoreConfig:
    return make_config(root, mapped_file_size_commit_log=BIG_CL, mapped_file_size_consume_queue=BIG_CQ,
                       reserve_ahead_bytes=CHUNK, max_hash_slot_num=SLOTS, max_index_num=ENTRIES, **kw)


@pytest.fixture(autouse=True)
def reserving_file_system(tmp_path):
    """These tests measure reservations: skip where the file system cannot make them."""
    probe = tmp_path / "probe"
    fd = os.open(probe, os.O_RDWR | os.O_CREAT)
    try:
        os.posix_fallocate(fd, 0, 4096)
    except OSError as exc:
        pytest.skip(f"the file system of {tmp_path} cannot reserve space: {exc}")
    finally:
        os.close(fd)
        os.unlink(probe)


@pytest.fixture
def store(tmp_path):
    s = MessageStore(big_config(tmp_path / "store"))
    s.start()
    yield s
    s.shutdown()


def put_plain(store: MessageStore, body: bytes, uniq: str):
    return store.put_plain("TopicA", 0, body, {"UNIQ_KEY": uniq}, 0, 0, 1, "10.0.0.7:50001", "127.0.0.1:10911", 0)


def put(store: MessageStore, how: str, i: int, body: bytes) -> bool:
    """One put of ``body`` (message number ``i``) the way ``how`` says; True when acknowledged."""
    if how == "put_plain":
        if put_plain(store, body, f"U{i}") is not None:
            return True
        how = "put_message"  # what the broker does when the fast path declines
    if how == "put_message":
        return store.put_message(inner(body=body, keys=f"K{i}")).status is OK
    return store.put_messages([inner(body=body[:len(body) // 2]), inner(body=body[len(body) // 2:])]).status is OK


def test_the_default_is_8_mib_ahead_and_an_eighth_for_entries():
    cfg = StoreConfig()
    assert (cfg.reserve_ahead_bytes, cfg.entry_reserve_ahead_bytes) == (8 * 1024 * 1024, 1024 * 1024)
    assert StoreConfig(reserve_ahead_bytes=0).entry_reserve_ahead_bytes == 4096
    with pytest.raises(ValueError, match="reserve_ahead_bytes"):
        StoreConfig(reserve_ahead_bytes=-1)


def test_a_fresh_store_uses_about_one_chunk_per_file(store):
    assert store.put_message(inner(body=b"x" * 300, keys="K1")).status is OK
    cl = store.commit_log.mapped_file_queue.files[0].path
    cq = store.find_consume_queue("TopicA", 0).mapped_file_queue.files[0].path
    index = store.index_service.files[0].path
    # logical sizes as RocketMQ's (the on-disk format), space for one chunk only
    assert os.stat(cl).st_size == BIG_CL and CHUNK <= on_disk(cl) < CHUNK + SLACK
    assert os.stat(cq).st_size == BIG_CQ and ENTRY_CHUNK <= on_disk(cq) < ENTRY_CHUNK + SLACK
    fixed = 40 + SLOTS * 4  # header and hash slots: reserved whole (written anywhere)
    assert os.stat(index).st_size == fixed + ENTRIES * 20
    assert fixed + ENTRY_CHUNK <= on_disk(index) < fixed + ENTRY_CHUNK + SLACK
    assert _bodies(store, 1) == [b"x" * 300]


@pytest.mark.parametrize("how", ["put_message", "put_plain", "put_messages"])
def test_writes_across_chunk_ends_reserve_as_they_go(tmp_path, monkeypatch, how):
    calls = []
    real = mapped_file._fallocate
    monkeypatch.setattr(mapped_file, "_fallocate", lambda fd, off, n: calls.append((off, n)) or real(fd, off, n))
    store = MessageStore(big_config(tmp_path / "store"))
    store.start()
    bodies = []
    try:
        mf = None
        while mf is None or mf.wrote_position < 5 * CHUNK:
            body = os.urandom(1000)
            assert put(store, how, len(bodies), body)
            bodies.append(body)
            mf = store.commit_log.mapped_file_queue.files[-1]
            cq_file = store.find_consume_queue("TopicA", 0).mapped_file_queue.files[-1]
            for f in (mf, cq_file):  # every byte written has space reserved behind it
                assert f.wrote_position <= f.reserved <= f.wrote_position + f.reserve_ahead + 8192
                assert on_disk(f.path) >= f.wrote_position
        assert len(store.commit_log.mapped_file_queue.files) == 1
        assert on_disk(mf.path) < mf.wrote_position + CHUNK + SLACK
        commit_log_calls = [c for c in calls if c[1] >= CHUNK]  # (the others: queue and index chunks)
        assert len(commit_log_calls) >= 5  # one per chunk, each starting where the last ended
        assert commit_log_calls[0][0] == 0
        assert all(o2 == o1 + n1 for (o1, n1), (o2, _) in itertools.pairwise(commit_log_calls))
        assert all(off % 4096 == 0 for off, _ in calls)
    finally:
        store.shutdown()
    assert_all_kept(tmp_path / "store", bodies)


def test_after_a_restart_only_new_space_needs_to_be_free(tmp_path, monkeypatch):
    """A file loaded at start is reserved again from its start at its first write; the free
    space that takes is only the new chunk's, not the data's the file already holds."""
    store = MessageStore(big_config(tmp_path / "store"))
    store.start()
    bodies = []
    try:
        while store.get_max_phy_offset() < 4 * CHUNK:
            bodies.append(os.urandom(1000))
            assert store.put_message(inner(body=bodies[-1], keys="K")).status is OK
    finally:
        store.shutdown()
    monkeypatch.setattr(mapped_file, "_free_bytes", lambda path: 2 * CHUNK)  # room for a chunk, not for the data
    store = MessageStore(big_config(tmp_path / "store"))
    store.start()
    try:
        for how in ("put_message", "put_plain"):
            bodies.append(os.urandom(1000))
            assert put(store, how, len(bodies), bodies[-1]), how
        monkeypatch.setattr(mapped_file, "_free_bytes", lambda path: CHUNK // 2)  # not even for the next chunk
        while True:
            body = os.urandom(1000)
            if not put(store, "put_plain", len(bodies), body):
                break
            bodies.append(body)
        assert store.disk_full and store.get_max_phy_offset() < 6 * CHUNK
    finally:
        store.shutdown()
    monkeypatch.undo()
    assert_all_kept(tmp_path / "store", bodies)


def assert_all_kept(root, bodies: list[bytes]) -> None:
    """After a restart, queue TopicA-0 holds exactly the acknowledged bodies (a batch put of
    two messages: its body split in halves), in order."""
    store = MessageStore(big_config(root))
    store.start()
    try:
        n = store.get_max_offset_in_queue("TopicA", 0)
        assert b"".join(_bodies(store, n)) == b"".join(bodies)
    finally:
        store.shutdown()


def _bodies(store: MessageStore, n: int) -> list[bytes]:
    """The bodies of queue TopicA-0's messages 0..n-1 (independent parse: body length at 84 + hosts)."""
    out = []
    offset = 0
    while offset < n:
        res = store.get_message("g", "TopicA", 0, offset, 32)
        assert res.status is GetMessageStatus.FOUND
        for rec in res.message_buffers:
            body_len = int.from_bytes(rec[84:88], "big")
            out.append(rec[88:88 + body_len])
        offset = res.next_begin_offset
    return out


def _failing_reservation(monkeypatch, where: str) -> None:
    """From now on reservations of files whose path holds ``where`` find no space."""
    real = mapped_file.reserve_range

    def reserve_range(fd, offset, size, path):
        if where in path:
            raise mapped_file.DiskFullError(f"no space for {size} bytes at {path}: No space left on device")
        real(fd, offset, size, path)

    monkeypatch.setattr(mapped_file, "reserve_range", reserve_range)


@pytest.mark.parametrize("where", ["commitlog", "consumequeue"])
@pytest.mark.parametrize("how", ["put_message", "put_plain", "put_messages"])
def test_enospc_in_the_middle_of_a_file_refuses_the_put_before_writing(tmp_path, monkeypatch, caplog, how, where):
    store = MessageStore(big_config(tmp_path / "store"))
    store.start()
    bodies = []
    try:
        for i in range(20):
            body = os.urandom(500)
            assert put(store, how, i, body)
            bodies.append(body)
        _failing_reservation(monkeypatch, os.sep + where + os.sep)
        refused = None
        with caplog.at_level(logging.ERROR, logger="rocketmq_broker.store"):
            for i in range(20, 2000):  # until the write position reaches the reserved end
                before = store.get_max_phy_offset(), store.get_max_offset_in_queue("TopicA", 0)
                body = os.urandom(500)
                if not put(store, how, i, body):
                    refused = before
                    break
                bodies.append(body)
        assert refused is not None, "the reserved chunk never ran out"
        # nothing of the refused put was written, the file was not rolled, the store refuses writes
        assert (store.get_max_phy_offset(), store.get_max_offset_in_queue("TopicA", 0)) == refused
        assert len(store.commit_log.mapped_file_queue.files) == 1
        assert store.disk_full
        assert store.put_message(inner()).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
        assert any("No space left" in r.getMessage() for r in caplog.records)
        # space comes back: the guard clears the state and puts go on
        monkeypatch.undo()
        store.cleaner.used_ratio = lambda path: 0.10
        store.cleaner.run_once()
        body = os.urandom(500)
        assert put(store, how, len(bodies), body)
        bodies.append(body)
    finally:
        store.shutdown()
    assert_all_kept(tmp_path / "store", bodies)


@pytest.mark.parametrize("where", ["commitlog", "consumequeue"])
def test_an_ha_slave_without_space_refuses_or_defers_and_catches_up(tmp_path, monkeypatch, where):
    """The HA slave's append path (``append_to_commit_log``): replicated bytes that find no room
    are refused with nothing written; a record whose queue entry finds none is dispatched later."""
    master = MessageStore(big_config(tmp_path / "master"))
    master.start()
    try:
        bodies = [os.urandom(200) for _ in range(700)]  # ~200 KiB, 14,000 B of entries: past the first chunks
        for body in bodies:
            assert master.put_message(inner(body=body)).status is OK
        data = master.get_commit_log_data(0, 1 << 30)
    finally:
        master.shutdown()
    slave = MessageStore(big_config(tmp_path / "slave"))
    slave.start()
    try:
        piece = 16 * 1024
        offset = 0
        while offset + piece <= CHUNK // 2:
            assert slave.append_to_commit_log(offset, data[offset:offset + piece])
            offset += len(data[offset:offset + piece])
        _failing_reservation(monkeypatch, os.sep + where + os.sep)
        refused = False
        while offset < len(data):
            before = slave.get_max_phy_offset()
            if not slave.append_to_commit_log(offset, data[offset:offset + piece]):
                assert slave.get_max_phy_offset() == before  # nothing written
                refused = True
                break
            offset += len(data[offset:offset + piece])
        if where == "commitlog":
            assert refused and offset < len(data)
        else:  # stored, but the queue stops at the record whose entry found no room
            assert not refused and slave.get_max_phy_offset() == len(data)
            assert 0 < slave.get_max_offset_in_queue("TopicA", 0) < len(bodies)
        assert slave.disk_full
        monkeypatch.undo()
        while offset < len(data):
            assert slave.append_to_commit_log(offset, data[offset:offset + piece])
            offset += len(data[offset:offset + piece])
        assert slave.append_to_commit_log(offset, b"")  # (an empty push dispatches nothing)
        if where == "consumequeue":  # the next replicated bytes dispatch what waited
            assert slave.get_max_offset_in_queue("TopicA", 0) < len(bodies)
            extra = inner(body=b"late")
            assert master_records_follow(slave, tmp_path, data, extra)
            bodies.append(b"late")
        assert slave.get_max_offset_in_queue("TopicA", 0) == len(bodies)
        assert b"".join(_bodies(slave, len(bodies))) == b"".join(bodies)
    finally:
        slave.shutdown()


def master_records_follow(slave: MessageStore, tmp_path, data: bytes, msg) -> bool:
    """Replicate one more record (written by a master that holds ``data`` first) to ``slave``."""
    master = MessageStore(big_config(tmp_path / "master"))
    master.start()
    try:
        assert master.put_message(msg).status is OK
        more = master.get_commit_log_data(len(data), 1 << 20)
    finally:
        master.shutdown()
    return slave.append_to_commit_log(len(data), more)


def test_an_index_without_space_logs_and_the_message_is_stored(store, monkeypatch, caplog):
    assert put_plain(store, b"a", "U0") is not None
    idx = store.index_service.files[-1]
    _failing_reservation(monkeypatch, os.sep + "index" + os.sep)
    with caplog.at_level(logging.ERROR, logger="rocketmq_broker.store"):
        acked = 1
        while 40 + SLOTS * 4 + (idx.index_count + 1) * 20 <= idx._mm.reserved:  # fill the reserved entries
            assert put_plain(store, b"b", f"U{acked}") is not None
            acked += 1
        assert put_plain(store, b"c", "Ulast") is not None  # stored and queued, not indexed
        assert store.put_message(inner(body=b"d", keys="Klast")).status is OK
    assert store.get_max_offset_in_queue("TopicA", 0) == acked + 2
    assert any("not indexed" in r.getMessage() for r in caplog.records)
    assert not store.query_message("TopicA", "Ulast", 8).message_buffers
    assert store.query_message("TopicA", "U1", 8).message_buffers


_FILLER = textwrap.dedent("""
    import sys
    from rocketmq_broker.store import MessageStore
    from tests.store.store_helpers import inner, make_config
    cfg = make_config(sys.argv[1], mapped_file_size_commit_log=64 * 1024 * 1024, mapped_file_size_consume_queue=300000 * 20,
                      reserve_ahead_bytes=256 * 1024, max_hash_slot_num=1000, max_index_num=100000,
                      disk_space_warning_level_ratio=0.9999, clean_resource_interval=600000)
    store = MessageStore(cfg)
    store.start()
    if sys.argv[2] == "fill":
        ok, status = 0, None
        for i in range(20000):
            body = i.to_bytes(4, "big") * 500
            if i % 2 and store.put_plain("TopicA", 0, body, {"UNIQ_KEY": f"U{i}"}, 0, 0, 1, "10.0.0.7:50001",
                                         "127.0.0.1:10911", 0) is not None:
                ok += 1
                continue
            status = store.put_message(inner(body=body, keys=f"K{i}")).status.value
            if status != "PUT_OK":
                break
            ok += 1
        files = store.commit_log.mapped_file_queue.files
        print(ok, status, len(files), files[-1].wrote_position)
    else:
        n = store.get_max_offset_in_queue("TopicA", 0)
        seen, offset = 0, 0
        while offset < n:
            res = store.get_message("g", "TopicA", 0, offset, 32)
            for rec in res.message_buffers:
                assert rec[88:92] == seen.to_bytes(4, "big"), seen
                seen += 1
            offset = res.next_begin_offset
        print(n, seen)
    store.shutdown()
""")


def test_a_real_small_disk_fills_in_the_middle_of_a_file_without_sigbus(tmp_path):
    """A 4 MiB tmpfs under a store of 64 MiB CommitLog files: the disk fills in the middle of the
    first file; the put that finds no space is refused (SERVICE_NOT_AVAILABLE), and after a restart
    on the still full disk (reading past the written data there must not SIGBUS either) every
    acknowledged message is there, in order."""
    with mounted_tmpfs(tmp_path / "tmpfs", "4m") as mnt:
        root = str(mnt / "store")

        def run(mode: str) -> list[str]:
            r = subprocess.run([sys.executable, "-c", _FILLER, root, mode], capture_output=True, text=True,
                               timeout=120, cwd=ROOT)
            assert r.returncode != -signal.SIGBUS, f"the store died with SIGBUS ({mode})"
            assert r.returncode == 0, r.stderr[-2000:]
            return r.stdout.split()

        ok, status, files, wrote = run("fill")
        assert status == "SERVICE_NOT_AVAILABLE" and int(ok) > 500
        assert files == "1" and 0 < int(wrote) < 64 * 1024 * 1024  # refused in the middle of the file
        assert run("check") == [ok, ok]


def test_enospc_from_the_file_system_is_a_disk_full_error(tmp_path, monkeypatch):
    def enospc(*_args):
        raise OSError(errno.ENOSPC, "No space left on device")

    mf = mapped_file.MappedFile(str(tmp_path / ("0" * 20)), 1 << 20, 4096)
    try:
        monkeypatch.setattr(mapped_file, "_fallocate", enospc)
        mf.append(b"x" * 4096)  # inside the first chunk
        with pytest.raises(mapped_file.DiskFullError):
            mf.append(b"y")
        assert mf.wrote_position == 4096 and mf.read_raw(4096, 1) == b"\0"
    finally:
        mf.close()
