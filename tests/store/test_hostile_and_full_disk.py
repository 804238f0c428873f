"""Issue 14, store side: names cannot leave the store directory, one bad record never makes the
store unloadable, and a full disk refuses writes (code 14) instead of killing the process with
SIGBUS (space is reserved in chunks before the writes reach it; free space is checked before a roll;
the disk-full state is computed at start)."""

from __future__ import annotations

import errno
import logging
import os
import signal
import subprocess
import sys
import textwrap

import pytest
from rocketmq_broker.store import MessageStore, mapped_file
from rocketmq_broker.store import commit_log as commit_log_module
from rocketmq_broker.store.consume_queue import ConsumeQueue
from rocketmq_broker.store.paths import UnsafePathError, safe_join
from rocketmq_broker.store.results import GetMessageStatus, PutMessageStatus

from tests.store.store_helpers import CL_FILE, inner, make_config, simulate_crash
from tests.tmpfs import small_tmpfs as mounted_tmpfs

OK = PutMessageStatus.PUT_OK


@pytest.mark.parametrize("part", ["..", ".", "", "a/b", "../x", "x\x00y", "/abs"])
def test_safe_join_refuses_components_that_leave_the_root(tmp_path, part):
    with pytest.raises(UnsafePathError):
        safe_join(str(tmp_path), part)


def test_safe_join_refuses_a_symlinked_escape(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "link").symlink_to(tmp_path)
    with pytest.raises(UnsafePathError):
        safe_join(str(root), "link", "x")
    assert safe_join(str(root), "T", "0") == os.path.join(str(root), "T", "0")


@pytest.mark.parametrize("topic", ["..", "x/../../escape", "g\x00x", "a b", "T\n"])
def test_store_refuses_illegal_topics_and_creates_nothing(tmp_path, topic):
    store = MessageStore(make_config(tmp_path / "store"))
    store.start()
    try:
        assert store.put_message(inner(topic=topic)).status is PutMessageStatus.MESSAGE_ILLEGAL
        assert store.put_messages([inner(topic=topic)]).status is PutMessageStatus.MESSAGE_ILLEGAL
        assert store.get_max_phy_offset() == 0
        with pytest.raises(UnsafePathError):
            ConsumeQueue(topic, 0, store.config.consume_queue_dir, 200)
    finally:
        store.shutdown()
    assert sorted(os.listdir(tmp_path)) == ["store"]
    cq_dir = store.config.consume_queue_dir
    assert not os.path.isdir(cq_dir) or os.listdir(cq_dir) == []


def _write_bad_record(store: MessageStore, monkeypatch, topic: str) -> int:
    """A record with an illegal topic, as an older broker wrote it (checks bypassed); returns
    its CommitLog offset."""
    with monkeypatch.context() as m:
        m.setattr(commit_log_module, "is_valid_name", lambda name: True)
        m.setattr(store.commit_log, "prepare_queue", None)
        offset = store.get_max_phy_offset()
        with pytest.raises(UnsafePathError):  # the record is written, its dispatch fails
            store.put_message(inner(topic=topic, body=b"bad"))
    assert store.get_max_phy_offset() > offset
    return offset


@pytest.mark.parametrize("crash", [False, True], ids=["clean-stop", "crash"])
def test_store_loads_past_a_bad_record_and_logs_its_offset(tmp_path, monkeypatch, caplog, crash):
    cfg = make_config(tmp_path / "store")
    store = MessageStore(cfg)
    store.start()
    assert store.put_message(inner(body=b"before")).status is OK
    bad_offset = _write_bad_record(store, monkeypatch, "%RETRY%g\x00x")
    if crash:
        assert store.put_message(inner(body=b"after")).status is OK
        simulate_crash(store)
    else:
        store.shutdown()
    with caplog.at_level(logging.ERROR, logger="rocketmq_broker.store"):
        again = MessageStore(make_config(tmp_path / "store"))
        again.start()  # used to raise StoreError: embedded null byte
    try:
        assert again.skipped_records >= 1
        assert any(f"commit log offset {bad_offset}" in r.getMessage() for r in caplog.records)
        res = again.get_message("g", "TopicA", 0, 0, 32)
        assert res.status is GetMessageStatus.FOUND
        assert len(res.message_buffers) == (2 if crash else 1)
        assert again.put_message(inner(body=b"more")).status is OK
        assert sorted(os.listdir(cfg.consume_queue_dir)) == ["TopicA"]
    finally:
        again.shutdown()


def _enospc(*_args):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_failed_reservation_refuses_the_put_with_service_not_available(tmp_path, monkeypatch, caplog):
    store = MessageStore(make_config(tmp_path / "store"))
    store.start()
    try:
        n = 0
        while len(store.commit_log.mapped_file_queue.files) < 2:
            assert store.put_message(inner(body=b"x" * 300)).status is OK
            n += 1
        monkeypatch.setattr(mapped_file, "_fallocate", _enospc)
        statuses = []
        with caplog.at_level(logging.ERROR):
            for _ in range(40):  # fills the second file, then needs a third
                statuses.append(store.put_message(inner(body=b"x" * 300)).status)
        assert statuses[-1] is PutMessageStatus.SERVICE_NOT_AVAILABLE
        assert set(statuses) <= {OK, PutMessageStatus.SERVICE_NOT_AVAILABLE}
        assert store.disk_full
        assert len(os.listdir(store.config.commit_log_dir)) == 2  # no half-made third file
        assert any("No space left" in r.getMessage() for r in caplog.records)
        # space comes back: the guard clears the state and puts go on
        monkeypatch.undo()
        store.cleaner.used_ratio = lambda path: 0.10
        store.cleaner.run_once()
        assert not store.disk_full
        assert store.put_message(inner(body=b"x" * 300)).status is OK
    finally:
        store.shutdown()


def test_free_space_is_checked_before_rolling_to_a_new_file(tmp_path, monkeypatch):
    store = MessageStore(make_config(tmp_path / "store"))
    store.start()
    try:
        assert store.put_message(inner(body=b"x" * 300)).status is OK
        monkeypatch.setattr(mapped_file, "_free_bytes", lambda path: CL_FILE - 1)
        statuses = {store.put_message(inner(body=b"x" * 300)).status for _ in range(20)}
        assert PutMessageStatus.SERVICE_NOT_AVAILABLE in statuses
        assert len(store.commit_log.mapped_file_queue.files) == 1
    finally:
        store.shutdown()


def test_a_restarted_store_on_a_full_disk_refuses_writes_from_the_start(tmp_path):
    store = MessageStore(make_config(tmp_path / "store"))
    store.cleaner.used_ratio = lambda path: 0.95
    store.start()
    try:
        assert store.disk_full
        assert store.put_message(inner()).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    finally:
        store.shutdown()


_FILLER = textwrap.dedent("""
    import sys
    from rocketmq_broker.store import MessageStore
    from tests.store.store_helpers import inner, make_config
    cfg = make_config(sys.argv[1], mapped_file_size_commit_log=256 * 1024, mapped_file_size_consume_queue=2000,
                      disk_space_warning_level_ratio=0.9999, clean_resource_interval=600000)
    store = MessageStore(cfg)
    store.start()
    ok = 0
    status = None
    for _ in range(20000):
        status = store.put_message(inner(body=b"x" * 2000)).status.value
        if status != "PUT_OK":
            break
        ok += 1
    store.shutdown()
    print(ok, status)
""")


@pytest.fixture
def small_tmpfs(tmp_path):
    with mounted_tmpfs(tmp_path / "tmpfs", "3m") as mnt:
        yield mnt


def test_filling_a_real_small_disk_refuses_writes_and_never_sigbus(small_tmpfs):
    """A 3 MiB tmpfs filled by one writer: the store answers SERVICE_NOT_AVAILABLE when the next
    file finds no space (it used to die with SIGBUS writing a page with no space behind it), and
    every acknowledged message is there after a restart."""
    root = str(small_tmpfs / "store")
    cwd = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    r = subprocess.run([sys.executable, "-c", _FILLER, root], capture_output=True, text=True, timeout=120,
                       cwd=cwd)
    assert r.returncode != -signal.SIGBUS, "the store died with SIGBUS on a full disk"
    assert r.returncode == 0, r.stderr[-2000:]
    ok, status = r.stdout.split()
    assert status == "SERVICE_NOT_AVAILABLE" and int(ok) > 100
    store = MessageStore(make_config(root, mapped_file_size_commit_log=256 * 1024,
                                     mapped_file_size_consume_queue=2000, disk_space_warning_level_ratio=0.9999))
    store.start()
    try:
        assert store.get_max_offset_in_queue("TopicA", 0) == int(ok)
    finally:
        store.shutdown()
