"""Store configuration (``MessageStoreConfig`` of RocketMQ 4.9.8, snake_case names)."""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass, field


class FlushDiskType(enum.StrEnum):
    """When a put is acknowledged relative to the disk flush."""

    ASYNC_FLUSH = "ASYNC_FLUSH"  # acknowledged once in the page cache; flushed every interval
    SYNC_FLUSH = "SYNC_FLUSH"  # acknowledged after fsync (group commit)


@dataclass
class StoreConfig:
    """Settings of :class:`~rocketmq_broker.store.message_store.MessageStore`.

    Sizes are bytes, intervals milliseconds. Defaults are RocketMQ 4.9.8's; tests use small files.

    Attributes:
        store_path_root_dir: root directory (``~/store`` in RocketMQ).
        store_path_commit_log: CommitLog directory; default ``<root>/commitlog``.
        mapped_file_size_commit_log: CommitLog file size (1 GiB).
        mapped_file_size_consume_queue: ConsumeQueue file size (300,000 entries × 20 bytes).
        flush_disk_type: :class:`FlushDiskType` (ASYNC_FLUSH).
        flush_interval_commit_log: async flush period of the CommitLog (500 ms).
        flush_interval_consume_queue: flush period of the consume queues and checkpoint (1000 ms).
        sync_flush_timeout: how long a SYNC_FLUSH put waits for its fsync (5000 ms); on expiry
            the put returns ``FLUSH_DISK_TIMEOUT`` (the message stays stored).
        max_message_size: largest record accepted (4 MiB).
        file_reserved_time: hours a CommitLog file is kept (72); see ``delete_expired_files``.
        delete_when: local hours (``"04"``, ``"04;16"``) when expired files are deleted.
        clean_resource_interval: how often the expiry check runs (10000 ms).
        disk_max_used_space_ratio: percent of the CommitLog partition in use above which expired
            files are deleted at once, whatever the hour (75).
        disk_space_clean_forcibly_ratio: fraction above which the oldest files are deleted even
            when not expired (0.85; Java's ``rocketmq.broker.diskSpaceCleanForciblyRatio``).
        disk_space_warning_level_ratio: fraction above which puts are refused with
            SERVICE_NOT_AVAILABLE (0.90; Java's ``rocketmq.broker.diskSpaceWarningLevelRatio``).
        clean_file_forcibly_enable: allow the forcible deletion above (True).
        check_crc_on_recover: verify BODYCRC while recovering (True).
        message_index_enable: build IndexFiles (keys ``topic#key`` and ``topic#UNIQ_KEY``).
        max_hash_slot_num / max_index_num: IndexFile geometry (5,000,000 / 20,000,000; a file
            is 40 + slots·4 + entries·20 bytes, created sparse).
        reserve_ahead_bytes: disk space reserved (``posix_fallocate``) ahead of the write
            position of a CommitLog file (8 MiB): files are created sparse at their full size
            and each write that passes the reserved end reserves this much more first, so a
            full disk refuses the put (SERVICE_NOT_AVAILABLE) instead of a SIGBUS. Consume-queue
            and index files (20-byte entries) reserve :attr:`entry_reserve_ahead_bytes`, an
            eighth of it; an index file also reserves its hash slots (slots·4 bytes) at
            creation. Not a Java key (Java keeps files sparse); read at start.
        max_msgs_num_batch: most records one ``query_message`` returns (64).
        message_index_safe: let the index checkpoint bound the abnormal-recovery start (False).
        max_transfer_bytes_on_message_in_memory / max_transfer_count_on_message_in_memory:
            pull batch limits (256 KiB / 32 messages).
        access_message_in_memory_max_ratio: a pull whose last record lies further behind the
            CommitLog end than this percentage of physical memory sets the result's
            ``suggest_pulling_from_slave`` (40; the batch limits do not change here).
        message_delay_level: delay levels (units s, m, h, d); used to recompute the deliver
            time of ``SCHEDULE_TOPIC_XXXX`` records re-dispatched at recovery.
        enable_d_leger_commit_log / d_leger_group / d_leger_peers / d_leger_self_id /
            store_path_d_ledger_commit_log: DLedger mode (``enableDLegerCommitLog``, false; see
            :mod:`rocketmq_broker.dledger` and docs/broker.md): the commit log is a Raft group.
        heart_beat_time_interval_ms / max_heart_beat_leak / min_vote_interval_ms /
            max_vote_interval_ms / max_wait_ack_time_ms / max_push_time_out_ms: DLedger timers
            (2000 ms / 3 / 300 ms / 1000 ms / 2500 ms / 1000 ms, DLedgerConfig's names and
            defaults; 4.9.8 brokers cannot change them, ours can, for tests).
        enable_batch_push: ``enableBatchPush`` (false): the DLedger leader pushes several entries
            (up to 4 KiB) per APPEND request.
        preferred_leader_id: ``preferredLeaderId`` ("": none): DLedger member id(s), ``;``-separated,
            that leadership is handed to when they are online and caught up.
    """

    store_path_root_dir: str = field(default_factory=lambda: os.path.join(os.path.expanduser("~"), "store"))
    store_path_commit_log: str | None = None
    mapped_file_size_commit_log: int = 1024 * 1024 * 1024
    mapped_file_size_consume_queue: int = 300_000 * 20
    flush_disk_type: FlushDiskType = FlushDiskType.ASYNC_FLUSH
    flush_interval_commit_log: int = 500
    flush_interval_consume_queue: int = 1000
    sync_flush_timeout: int = 5000
    max_message_size: int = 4 * 1024 * 1024
    file_reserved_time: int = 72
    delete_when: str = "04"
    clean_resource_interval: int = 10000
    disk_max_used_space_ratio: int = 75
    disk_space_clean_forcibly_ratio: float = 0.85
    disk_space_warning_level_ratio: float = 0.90
    clean_file_forcibly_enable: bool = True
    check_crc_on_recover: bool = True
    message_index_enable: bool = True
    max_hash_slot_num: int = 5_000_000
    max_index_num: int = 20_000_000
    max_msgs_num_batch: int = 64
    message_index_safe: bool = False
    max_transfer_bytes_on_message_in_memory: int = 256 * 1024
    max_transfer_count_on_message_in_memory: int = 32
    access_message_in_memory_max_ratio: int = 40
    message_delay_level: str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
    reserve_ahead_bytes: int = 8 * 1024 * 1024
    # DLedger mode (issue 27; rocketmq_broker.dledger): Java MessageStoreConfig / DLedgerConfig names
    enable_d_leger_commit_log: bool = False
    d_leger_group: str = ""
    d_leger_peers: str = ""
    d_leger_self_id: str = ""
    store_path_d_ledger_commit_log: str = ""
    heart_beat_time_interval_ms: int = 2000
    max_heart_beat_leak: int = 3
    min_vote_interval_ms: int = 300
    max_vote_interval_ms: int = 1000
    max_wait_ack_time_ms: int = 2500
    max_push_time_out_ms: int = 1000
    enable_batch_push: bool = False
    preferred_leader_id: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.flush_disk_type, str):
            self.flush_disk_type = FlushDiskType(self.flush_disk_type)
        if self.mapped_file_size_consume_queue % 20:
            raise ValueError("mapped_file_size_consume_queue must be a multiple of 20 bytes")
        if not isinstance(self.reserve_ahead_bytes, int) or self.reserve_ahead_bytes < 0:
            raise ValueError(f"reserve_ahead_bytes must be an int >= 0, got {self.reserve_ahead_bytes!r}")

    @property
    def entry_reserve_ahead_bytes(self) -> int:
        """Bytes reserved ahead in consume-queue and index files: an eighth of
        :attr:`reserve_ahead_bytes` (1 MiB by default, ~52,000 entries), at least 4 KiB."""
        return max(4096, self.reserve_ahead_bytes // 8)

    @property
    def commit_log_dir(self) -> str:
        return self.store_path_commit_log or os.path.join(self.store_path_root_dir, "commitlog")

    @property
    def consume_queue_dir(self) -> str:
        return os.path.join(self.store_path_root_dir, "consumequeue")

    @property
    def index_dir(self) -> str:
        return os.path.join(self.store_path_root_dir, "index")

    @property
    def checkpoint_path(self) -> str:
        return os.path.join(self.store_path_root_dir, "checkpoint")

    @property
    def abort_path(self) -> str:
        return os.path.join(self.store_path_root_dir, "abort")

    @property
    def lock_path(self) -> str:
        return os.path.join(self.store_path_root_dir, "lock")
