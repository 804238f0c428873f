"""Disk-space guard of the store (RocketMQ ``CleanCommitLogService``).

Each run measures how full the CommitLog's disk partition is and acts like a 4.9.8 broker:

- above ``disk_max_used_space_ratio`` percent (75): expired files are deleted now, without
  waiting for the ``delete_when`` hour;
- above ``disk_space_clean_forcibly_ratio`` (0.85): the oldest CommitLog files are deleted even
  when not expired (at most ``DELETE_FILES_BATCH_MAX`` a run, never the file being written),
  when ``clean_file_forcibly_enable`` is set;
- above ``disk_space_warning_level_ratio`` (0.90): the store is marked disk-full and refuses
  puts (SERVICE_NOT_AVAILABLE) until usage falls back under that level.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from typing import Protocol

from .config import StoreConfig

log = logging.getLogger("rocketmq_broker.store")

#: most CommitLog files one forcible run deletes (Java ``DELETE_FILES_BATCH_MAX``)
DELETE_FILES_BATCH_MAX = 10


def disk_used_ratio(path: str) -> float:
    """Used fraction (0..1) of the partition holding ``path``; -1 when it cannot be read."""
    try:
        du = shutil.disk_usage(path)
    except OSError:
        return -1.0
    return (du.total - du.free) / du.total if du.total else -1.0


class CleanableStore(Protocol):
    """What the guard uses of the message store: its config, the disk-full flag it sets, and
    the file expiry it runs."""

    config: StoreConfig
    disk_full: bool

    def delete_expired_files(self, now_ms: int | None = None, force: bool = False, clean_at_once: int = 0) -> int: ...


class CommitLogCleaner:
    """Runs the expiry and disk-space policy of ``store`` (called every
    ``clean_resource_interval`` ms by the store's flush thread).

    Args:
        store: the message store.
        used_ratio: ``f(path) -> float`` giving the used fraction of a partition (tests inject one).
    """

    def __init__(self, store: CleanableStore, used_ratio: Callable[[str], float] = disk_used_ratio) -> None:
        self.store = store
        self.used_ratio = used_ratio

    def refresh_disk_full(self) -> float:
        """Only the disk-full decision of :meth:`run_once` (the store calls it at start, so a
        broker restarted on a full disk refuses writes from its first request); returns the
        used ratio."""
        cfg = self.store.config
        ratio = self.used_ratio(cfg.commit_log_dir)
        if ratio > cfg.disk_space_warning_level_ratio:
            log.error("disk of %s is %.0f%% full (over %.0f%%): the store refuses writes until space is freed",
                      cfg.commit_log_dir, ratio * 100, cfg.disk_space_warning_level_ratio * 100)
            self.store.disk_full = True
        return ratio

    def run_once(self, now_ms: int | None = None) -> int:
        """One pass; returns the number of CommitLog files deleted."""
        cfg = self.store.config
        ratio = self.used_ratio(cfg.commit_log_dir)
        clean_now = False
        if ratio > cfg.disk_space_warning_level_ratio:
            if not self.store.disk_full:
                log.error("disk of %s is %.0f%% full (over %.0f%%): the store refuses writes until space is freed",
                          cfg.commit_log_dir, ratio * 100, cfg.disk_space_warning_level_ratio * 100)
            self.store.disk_full = True
            clean_now = True
        else:
            if ratio > cfg.disk_space_clean_forcibly_ratio:
                clean_now = True
            if self.store.disk_full:
                log.info("disk of %s is %.0f%% full: writes accepted again", cfg.commit_log_dir, ratio * 100)
            self.store.disk_full = False
        space_to_delete = ratio < 0 or ratio > cfg.disk_max_used_space_ratio / 100.0
        if space_to_delete:
            log.info("disk of %s is %.0f%% full, reclaiming space (forcibly: %s)", cfg.commit_log_dir,
                     ratio * 100, clean_now and cfg.clean_file_forcibly_enable)
        return self.store.delete_expired_files(
            now_ms, force=space_to_delete,
            clean_at_once=DELETE_FILES_BATCH_MAX if clean_now and cfg.clean_file_forcibly_enable else 0)
