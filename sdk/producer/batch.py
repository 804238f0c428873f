"""``split_batches``: cut a list of messages into batches that fit one SEND_BATCH_MESSAGE;
``EncodedBatch``: a batch whose body is already encoded (Java ``MessageBatch``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from ..exceptions import IllegalArgumentError
from ..protocol.codes import MessageConst as MC
from ..protocol.message import Message
from ..protocol.message_codec import decode_batch_messages, encode_properties

__all__ = ["DEFAULT_BATCH_MAX_BYTES", "EncodedBatch", "encoded_size", "split_batches"]

#: Java's ``ListSplitter`` example limit: 1 MiB per batch, well under ``max_message_size``.
DEFAULT_BATCH_MAX_BYTES = 1024 * 1024

# "UNIQ_KEY" \x01 <32 hex> \x02: what the producer adds to a message without an id.
_UNIQ_KEY_ALLOWANCE = len(MC.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) + 2 + 32


def encoded_size(msg: Message) -> int:
    """Bytes ``msg`` takes in a batch body (docs/protocol.md §4.6), counting the ``UNIQ_KEY`` the producer adds."""
    props = len(encode_properties(msg.properties).encode("utf-8"))
    if not msg.properties.get(MC.UNIQ_CLIENT_MESSAGE_ID_KEYIDX):
        props += _UNIQ_KEY_ALLOWANCE
    return 20 + len(msg.body) + 2 + props


def split_batches(messages: Iterable[Message], max_bytes: int = DEFAULT_BATCH_MAX_BYTES) -> Iterator[list[Message]]:
    """Yield consecutive lists of ``messages`` whose encoded batch body is at most ``max_bytes``
    (order kept), ready for ``Producer.send_batch``.

    Args:
        messages: messages of one topic.
        max_bytes: size limit of one batch body, bytes (default 1 MiB; keep it ≤ the producer's
            ``max_message_size``, 4 MiB).

    Raises:
        IllegalArgumentError: ``max_bytes`` ≤ 0, or one message alone is larger than ``max_bytes``
            (send it with ``Producer.send`` instead).
    """
    if max_bytes <= 0:
        raise IllegalArgumentError(f"max_bytes must be positive, got {max_bytes}")
    batch: list[Message] = []
    size = 0
    for msg in messages:
        n = encoded_size(msg)
        if n > max_bytes:
            raise IllegalArgumentError(f"a message of {n} encoded bytes does not fit a batch of {max_bytes} bytes")
        if batch and size + n > max_bytes:
            yield batch
            batch, size = [], 0
        batch.append(msg)
        size += n
    if batch:
        yield batch


@dataclass(frozen=True)
class EncodedBatch:
    """Messages of one topic already encoded as a SEND_BATCH_MESSAGE body (docs/protocol.md §4.6),
    as Java's ``MessageBatch`` after ``encode()``: ``Producer.send_batch`` and
    ``Producer.send_async`` send the body as it is, without a ``Message`` per entry.

    The builder of the body is responsible for what the producer checks per message in a
    ``list[Message]`` batch: every entry has a non-empty body of at most ``max_message_size``
    bytes, properties without separators or reserved names (but ``UNIQ_KEY``, ``TAGS``,
    ``KEYS``, ``WAIT``), no delay, and its ``UNIQ_KEY`` property set to its id in ``ids``.
    The producer still checks the topic, the body's total size and the entry count. When the
    producer traces sends (message trace or OpenTelemetry), the body is decoded back into
    messages and sent as a ``list[Message]`` batch (the trace context goes into each message).

    Attributes:
        topic: the topic (without the producer's namespace, like ``Message.topic``).
        body: the encoded entries (per entry TOTALSIZE, MAGIC 0, BODYCRC 0, FLAG, body, properties).
        ids: the entries' ``UNIQ_KEY`` ids, in order (``SendResult.msg_id`` joins them with commas).
        wait_store_msg_ok: the request's ``WAIT`` property (default True).
    """

    topic: str
    body: bytes
    ids: Sequence[str]
    wait_store_msg_ok: bool = True

    def __len__(self) -> int:
        return len(self.ids)

    def messages(self) -> list[Message]:
        """The entries decoded as messages (properties as encoded, ``UNIQ_KEY`` included).

        Raises:
            FrameError: the body is malformed.
        """
        return decode_batch_messages(self.body, self.topic)
