"""The disk-space guard: expired files deleted at once above 75 %, oldest files deleted above
85 %, puts refused above 90 % and accepted again once space is back."""

from __future__ import annotations

import os
import time

import pytest
from rocketmq_broker.embedded import start_dev_cluster
from rocketmq_broker.store import MessageStore
from rocketmq_broker.store.disk_space import CommitLogCleaner, disk_used_ratio
from rocketmq_broker.store.results import PutMessageStatus
from rocketmq_sdk.protocol.codes import ResponseCode

from tests.broker.conftest import SyncClient
from tests.broker.test_send_pull import _send
from tests.store.store_helpers import CL_FILE, inner, make_config


class FakeDisk:
    def __init__(self, ratio: float) -> None:
        self.ratio = ratio

    def __call__(self, path: str) -> float:
        return self.ratio


@pytest.fixture
def filled(tmp_path):
    # delete_when names an hour that is never now, so only the guard can trigger deletion
    other_hour = f"{(time.localtime().tm_hour + 12) % 24:02d}"
    store = MessageStore(make_config(tmp_path / "store", delete_when=other_hour))
    store.start()
    for i in range(40):
        assert store.put_message(inner(body=b"d" * 300, keys=f"k{i}")).status is PutMessageStatus.PUT_OK
    assert len(store.commit_log.mapped_file_queue.files) >= 4
    yield store
    store.shutdown()


def _files(store) -> int:
    return len(store.commit_log.mapped_file_queue.files)


def test_below_the_thresholds_nothing_is_deleted_outside_the_delete_hour(filled):
    files = filled.commit_log.mapped_file_queue.files
    os.utime(files[0].path, (1, 1))  # expired, but it is not the delete hour
    before = _files(filled)
    assert CommitLogCleaner(filled, FakeDisk(0.50)).run_once() == 0
    assert _files(filled) == before and not filled.disk_full


def test_above_max_used_ratio_expired_files_go_at_once(filled):
    files = filled.commit_log.mapped_file_queue.files
    os.utime(files[0].path, (1, 1))
    os.utime(files[1].path, (1, 1))
    before = _files(filled)
    assert CommitLogCleaner(filled, FakeDisk(0.80)).run_once() == 2  # only the expired ones
    assert _files(filled) == before - 2
    assert filled.get_min_phy_offset() == 2 * CL_FILE


def test_above_the_forcible_ratio_the_oldest_files_go_even_unexpired(filled):
    before = _files(filled)
    deleted = CommitLogCleaner(filled, FakeDisk(0.87)).run_once()
    assert deleted == before - 1  # all but the file being written (fewer than the batch max of 10)
    assert _files(filled) == 1
    assert not filled.disk_full
    # what is left is still readable from its new minimum
    low = filled.get_min_offset_in_queue("TopicA", 0)
    assert filled.get_message("g", "TopicA", 0, low, 32).message_count >= 1


def test_disk_full_refuses_puts_until_space_is_back(filled):
    disk = FakeDisk(0.95)
    cleaner = CommitLogCleaner(filled, disk)
    cleaner.run_once()
    assert filled.disk_full
    max_before = filled.get_max_offset_in_queue("TopicA", 0)
    assert filled.put_message(inner(body=b"refused")).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    assert filled.put_messages([inner(body=b"refused")]).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    assert filled.get_max_offset_in_queue("TopicA", 0) == max_before  # nothing stored
    disk.ratio = 0.40
    cleaner.run_once()
    assert not filled.disk_full
    assert filled.put_message(inner(body=b"accepted")).status is PutMessageStatus.PUT_OK


def test_disk_full_broker_answers_service_not_available(tmp_path):
    client = SyncClient()
    try:
        with start_dev_cluster(str(tmp_path / "s"), in_process=True) as c:
            store = c.broker.store
            CommitLogCleaner(store, FakeDisk(0.99)).run_once()
            r = _send(client, c, "FullT", b"x", {})
            assert r.code == ResponseCode.SERVICE_NOT_AVAILABLE
            assert "disk is full" in r.remark
            CommitLogCleaner(store, FakeDisk(0.10)).run_once()
            assert _send(client, c, "FullT", b"x", {}).code == ResponseCode.SUCCESS
    finally:
        client.close()


def test_real_disk_ratio_is_a_fraction(tmp_path):
    r = disk_used_ratio(str(tmp_path))
    assert 0.0 <= r <= 1.0
    assert disk_used_ratio(str(tmp_path / "missing" / "dir")) == -1.0
