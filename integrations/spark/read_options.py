"""Options of the ``rocketmq`` source (batch and streaming reads), parsed and checked on the driver.

Option names are case-insensitive, as Spark's. Offsets use one JSON shape everywhere (the
``startingOffsets`` / ``endingOffsets`` options, Spark's streaming checkpoint, the commit to a
consumer group): ``{"topic": {"broker-name/queue-id": offset}}``, where an offset is the queue
offset of the next message (``-2`` = earliest, ``-1`` = latest, as Spark's Kafka source).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rocketmq_sdk.exceptions import IllegalArgumentError
from rocketmq_sdk.protocol.message import MessageQueue
from rocketmq_sdk.protocol.validators import GROUP_MAX_LENGTH, check_name

EARLIEST = -2
"""Per-queue offset meaning "the queue's first stored message" (Kafka's ``-2``)."""
LATEST = -1
"""Per-queue offset meaning "after the queue's last message" (Kafka's ``-1``)."""

DEFAULT_READER_GROUP = "spark_rocketmq_reader"
"""Consumer group named in the source's pull requests (its offsets are never written)."""

OffsetSpec = str | dict[str, dict[str, int]]
"""``"earliest"``, ``"latest"`` or ``{topic: {"broker/queue": offset}}``."""


def lower_keys(options: Mapping[str, str]) -> dict[str, str]:
    """The options with lower-case names (Spark passes them as given by the user)."""
    return {str(k).lower(): v for k, v in options.items()}


def name_server(opts: Mapping[str, str]) -> str:
    """The ``nameServer`` option (alias ``namesrv``) of lower-cased ``opts``.

    Raises:
        IllegalArgumentError: neither is given.
    """
    value = opts.get("nameserver") or opts.get("namesrv")
    if not value:
        raise IllegalArgumentError('the rocketmq data source needs .option("nameServer", "host:port")')
    return value


def queue_key(mq: MessageQueue) -> str:
    """``"broker-name/queue-id"``, the key of a queue inside an offsets JSON."""
    return f"{mq.broker_name}/{mq.queue_id}"


def parse_queue_key(topic: str, key: str) -> MessageQueue:
    """The queue named by ``"broker-name/queue-id"`` in ``topic``.

    Raises:
        IllegalArgumentError: not of that shape.
    """
    broker, sep, qid = key.rpartition("/")
    if not sep or not broker or not qid.isdigit():
        raise IllegalArgumentError(f"queue {key!r} of topic {topic!r}: expected 'broker-name/queue-id'")
    return MessageQueue(topic, broker, int(qid))


def offsets_to_json(offsets: Mapping[MessageQueue, int]) -> dict[str, dict[str, int]]:
    """Per-queue offsets as the JSON-able offsets dict (topics and queues sorted, so two equal
    positions always serialise to the same text, as Spark compares offsets by their JSON)."""
    out: dict[str, dict[str, int]] = {}
    for mq in sorted(offsets, key=lambda q: (q.topic, q.broker_name, q.queue_id)):
        out.setdefault(mq.topic, {})[queue_key(mq)] = int(offsets[mq])
    return out


def offsets_from_json(data: Mapping[str, Any]) -> dict[MessageQueue, int]:
    """The inverse of :func:`offsets_to_json`.

    Raises:
        IllegalArgumentError: not ``{topic: {"broker/queue": int}}``.
    """
    if not isinstance(data, Mapping):
        raise IllegalArgumentError(f"offsets must be a JSON object of topics, got {data!r}")
    out: dict[MessageQueue, int] = {}
    for topic, queues in data.items():
        if not isinstance(queues, Mapping):
            raise IllegalArgumentError(f"offsets of topic {topic!r} must be a JSON object of queues")
        for key, offset in queues.items():
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < EARLIEST:
                raise IllegalArgumentError(f"offset of {topic} {key} must be an integer ≥ -2, got {offset!r}")
            out[parse_queue_key(topic, key)] = offset
    return out


def _offset_spec(opts: Mapping[str, str], name: str, default: str, topics: tuple[str, ...]) -> OffsetSpec:
    raw = opts.get(name.lower())
    if raw is None or not raw.strip():
        return default
    text = raw.strip()
    if text.lower() in ("earliest", "latest"):
        return text.lower()
    try:
        data = json.loads(text)
    except ValueError:
        raise IllegalArgumentError(f"option {name}: 'earliest', 'latest' or JSON offsets, got {raw!r}") from None
    spec = offsets_from_json(data)  # validates
    unknown = sorted({mq.topic for mq in spec} - set(topics))
    if unknown:
        raise IllegalArgumentError(f"option {name} names topics that are not read: {unknown}")
    return offsets_to_json(spec)


def _int(opts: Mapping[str, str], name: str, what: str) -> int | None:
    raw = opts.get(name.lower())
    if raw is None or raw == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise IllegalArgumentError(f"option {name} must be {what}, got {raw!r}") from None


def _positive_int(opts: Mapping[str, str], name: str, default: int | None, *, upper: int | None = None) -> int | None:
    value = _int(opts, name, "an integer")
    if value is None:
        return default
    if value < 1 or (upper is not None and value > upper):
        bound = f"1..{upper}" if upper is not None else "≥ 1"
        raise IllegalArgumentError(f"option {name} must be {bound}, got {value}")
    return value


def _timestamp(opts: Mapping[str, str], name: str) -> int | None:
    value = _int(opts, name, "epoch milliseconds")
    if value is not None and value < 0:
        raise IllegalArgumentError(f"option {name} must be ≥ 0, got {value}")
    return value


def _bool(opts: Mapping[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name.lower())
    if raw is None or raw == "":
        return default
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    raise IllegalArgumentError(f"option {name} must be true or false, got {raw!r}")



DEFAULT_MIN_ROWS_PER_PARTITION = 16_384
"""Messages a read partition holds at least, when queues can be packed (``minRowsPerPartition``)."""

@dataclass(frozen=True)
class ReadOptions:
    """Everything the source needs, picklable (shipped to the executors inside each partition).

    Attributes:
        name_server: ``host:port`` of the name server(s) (``nameServer``, alias ``namesrv``).
        topics: the topics read (``topic``, comma-separated; alias ``subscribe``).
        sub_expression / expression_type: the filter (``subExpression``, default ``*``;
            ``expressionType`` ``TAG`` or ``SQL92``, the latter evaluated by the broker when its
            ``enablePropertyFilter`` is on).
        starting / ending: :data:`OffsetSpec` (``startingOffsets``, default ``earliest`` for
            batch and ``latest`` for streaming; ``endingOffsets``, default ``latest``, batch only).
        starting_timestamp / ending_timestamp: epoch ms (``startingTimestamp`` /
            ``endingTimestamp``), resolved per queue with SEARCH_OFFSET_BY_TIMESTAMP; they win
            over the offsets options.
        min_partitions: split big queues so the read has at least this many partitions.
        min_rows_per_partition: queues' ranges are packed together until a partition holds at
            least this many messages (``minRowsPerPartition``, default
            :data:`DEFAULT_MIN_ROWS_PER_PARTITION`; 1: one partition per queue): a Spark task
            costs a fixed fraction of a second, so a small micro-batch read as one task per
            queue spends most of its time starting tasks. Not with ``minPartitions``.
        max_messages_per_trigger: streaming admission control (``maxMessagesPerTrigger``).
        group: consumer group named in the pull requests (``group``; never committed to).
        commit_group: consumer group the processed offsets are committed to (``commitGroup``).
        pull_batch_size: messages asked per PULL_MESSAGE (``pullBatchSize``, 1..1024, default 32).
        pull_timeout_ms: client timeout of each pull (``pullTimeoutMs``, default 10000).
        pulls_in_flight: PULL_MESSAGE requests a read task keeps in flight for its queue range
            (``pullsInFlight``, 1..64, default 8): the broker answers at most 32 messages and
            256 KiB per pull (Java's ``maxTransferCountOnMessageInMemory`` /
            ``maxTransferBytesOnMessageInMemory``), so a range is read in many pulls.
        fail_on_data_loss: fail when wanted messages are no longer stored (``failOnDataLoss``,
            default true); false logs a warning and skips them.
    """

    name_server: str
    topics: tuple[str, ...]
    sub_expression: str = "*"
    expression_type: str = "TAG"
    starting: OffsetSpec = "earliest"
    ending: OffsetSpec = "latest"
    starting_timestamp: int | None = None
    ending_timestamp: int | None = None
    min_partitions: int | None = None
    min_rows_per_partition: int = DEFAULT_MIN_ROWS_PER_PARTITION
    max_messages_per_trigger: int | None = None
    group: str = DEFAULT_READER_GROUP
    commit_group: str | None = None
    pull_batch_size: int = 32
    pull_timeout_ms: int = 10_000
    fail_on_data_loss: bool = True
    pulls_in_flight: int = 8

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool) -> ReadOptions:
        """Check and parse the user's options.

        Raises:
            IllegalArgumentError: a missing or malformed option, or one that does not apply
                (``endingOffsets`` / ``endingTimestamp`` in a streaming read).
        """
        opts = lower_keys(options)
        topics_raw = opts.get("topic") or opts.get("subscribe") or ""
        topics = tuple(dict.fromkeys(t.strip() for t in topics_raw.split(",") if t.strip()))
        if not topics:
            raise IllegalArgumentError('the rocketmq source needs .option("topic", "name[,name...]")')
        for topic in topics:
            check_name(topic, "topic (option topic)")
        expression_type = (opts.get("expressiontype") or "TAG").upper()
        if expression_type not in ("TAG", "SQL92"):
            raise IllegalArgumentError(f"option expressionType must be TAG or SQL92, got {expression_type!r}")
        sub_expression = (opts.get("subexpression") or "*").strip() or "*"
        if expression_type == "SQL92" and sub_expression == "*":
            raise IllegalArgumentError("option expressionType=SQL92 needs an SQL92 subExpression")
        if streaming:
            for name in ("endingOffsets", "endingTimestamp"):
                if opts.get(name.lower()):
                    raise IllegalArgumentError(f"option {name} is for batch reads only")
        starting = _offset_spec(opts, "startingOffsets", "latest" if streaming else "earliest", topics)
        ending = _offset_spec(opts, "endingOffsets", "latest", topics)
        if not streaming and starting == "latest":
            raise IllegalArgumentError("startingOffsets=latest reads nothing in a batch query")
        if ending == "earliest":
            raise IllegalArgumentError("endingOffsets=earliest reads nothing")
        max_per_trigger = _positive_int(opts, "maxMessagesPerTrigger", None)
        if max_per_trigger is not None and not streaming:
            raise IllegalArgumentError("option maxMessagesPerTrigger is for streaming reads only")
        commit_group = opts.get("commitgroup") or None
        if commit_group is not None:
            check_name(commit_group, "consumer group (option commitGroup)", GROUP_MAX_LENGTH)
        group = opts.get("group") or DEFAULT_READER_GROUP
        check_name(group, "consumer group (option group)", GROUP_MAX_LENGTH)
        return cls(
            name_server=name_server(opts), topics=topics, sub_expression=sub_expression,
            expression_type=expression_type, starting=starting, ending=ending,
            starting_timestamp=_timestamp(opts, "startingTimestamp"),
            ending_timestamp=_timestamp(opts, "endingTimestamp"),
            min_partitions=_positive_int(opts, "minPartitions", None),
            min_rows_per_partition=_positive_int(opts, "minRowsPerPartition", DEFAULT_MIN_ROWS_PER_PARTITION),
            max_messages_per_trigger=max_per_trigger,
            group=group, commit_group=commit_group,
            pull_batch_size=_positive_int(opts, "pullBatchSize", 32, upper=1024),
            pull_timeout_ms=_positive_int(opts, "pullTimeoutMs", 10_000),
            pulls_in_flight=_positive_int(opts, "pullsInFlight", 8, upper=64),
            fail_on_data_loss=_bool(opts, "failOnDataLoss", True))
