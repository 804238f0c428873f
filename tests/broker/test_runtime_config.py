"""UPDATE_BROKER_CONFIG reaches the running store (one StoreConfig shared by the broker config and
the store), and store keys that only take effect at start are refused with a clear remark."""

from __future__ import annotations

from rocketmq_broker.store.config import FlushDiskType
from rocketmq_sdk.protocol.codes import RequestCode, ResponseCode

from tests.broker.test_send_pull import _send


def _update(client, cluster, text: str):
    return client.invoke(cluster.broker_addr, RequestCode.UPDATE_BROKER_CONFIG, {}, text.encode())


def test_store_keys_apply_live_to_the_running_store(cluster, client):
    store = cluster.broker.store
    assert store.config is cluster.broker.config.store
    store.cleaner.used_ratio = lambda path: 0.70  # a partition 70 % full
    store.cleaner.run_once()
    assert not store.disk_full
    assert _send(client, cluster, "LiveCfg", b"before", {}).code == ResponseCode.SUCCESS

    r = _update(client, cluster, "diskSpaceWarningLevelRatio=0.65\ndiskMaxUsedSpaceRatio=60\n"
                                 "cleanFileForciblyEnable=false\nfileReservedTime=1\nmaxMessageSize=2048\n")
    assert r.code == ResponseCode.SUCCESS, r.remark
    assert (store.config.disk_space_warning_level_ratio, store.config.disk_max_used_space_ratio,
            store.config.clean_file_forcibly_enable, store.config.file_reserved_time,
            store.config.max_message_size) == (0.65, 60, False, 1, 2048)
    store.cleaner.run_once()  # the guard's next pass uses the new threshold: 70 % is now too full
    assert store.disk_full
    refused = _send(client, cluster, "LiveCfg", b"after", {})
    assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE

    store.cleaner.used_ratio = lambda path: 0.10
    store.cleaner.run_once()
    assert _send(client, cluster, "LiveCfg", b"x" * 2049, {}).code == ResponseCode.MESSAGE_ILLEGAL
    assert _send(client, cluster, "LiveCfg", b"x" * 2048, {}).code == ResponseCode.SUCCESS

    got = client.invoke(cluster.broker_addr, RequestCode.GET_BROKER_CONFIG).body.decode().splitlines()
    assert "diskMaxUsedSpaceRatio=60" in got and "fileReservedTime=1" in got


def test_restart_only_store_keys_are_refused_and_nothing_changes(cluster, client):
    cfg = cluster.broker.config
    before = (cfg.store.flush_disk_type, cfg.store.mapped_file_size_commit_log, cfg.long_polling_enable)
    r = _update(client, cluster, "longPollingEnable=false\nflushDiskType=SYNC_FLUSH\nmappedFileSizeCommitLog=1024\n")
    assert r.code == ResponseCode.SYSTEM_ERROR
    assert "flushDiskType" in r.remark and "mappedFileSizeCommitLog" in r.remark and "restart" in r.remark
    assert (cfg.store.flush_disk_type, cfg.store.mapped_file_size_commit_log, cfg.long_polling_enable) == before
    assert cfg.store.flush_disk_type is FlushDiskType.ASYNC_FLUSH
