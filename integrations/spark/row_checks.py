"""Rows checked before anything of their batch is sent: each row makes a message whose body is
1..``max_message_size`` bytes, or it is refused naming its row and column (or handed to a bad-row
handler). Shared by the writer's message path and the fast path's fallback."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from rocketmq_sdk.exceptions import IllegalArgumentError

__all__ = ["BadRowHandler", "DEFAULT_MAX_MESSAGE_SIZE", "checked_messages", "max_message_size_of"]

DEFAULT_MAX_MESSAGE_SIZE = 4 * 1024 * 1024

BadRowHandler = Callable[[Any, int, str], None]
"""``handler(row, index, reason)``: a bad row (a dict) and why; raising stops the write."""


def max_message_size_of(producer: Any) -> int:
    """The producer's ``max_message_size`` (bytes; 4 MiB, as Java's, when it has none)."""
    return int(getattr(getattr(producer, "config", None), "max_message_size", DEFAULT_MAX_MESSAGE_SIZE))


def checked_messages(rows: Iterable[Any], mapper: Any, max_message_size: int, *, first_index: int = 0,
                     on_bad: BadRowHandler | None = None) -> Iterator[tuple[Any, Any]]:
    """``(message, row)`` for each row, checked before anything of it is sent.

    Args:
        first_index: the index of the first row in its partition (error messages count from it).
        on_bad: ``handler(row, index, reason)`` called for each bad row (then skipped); without
            one the first bad row raises.

    Raises:
        IllegalArgumentError: the row makes no valid message, or its body is empty or over
            ``max_message_size`` bytes; the message says which row (index in the partition) and column.
    """
    body_col = mapper.body if isinstance(mapper.body, str) else None
    what = f"column {body_col!r}" if body_col else "the body"
    for index, row in enumerate(rows, first_index):
        try:
            try:
                msg = mapper.to_message(row)
            except (IllegalArgumentError, KeyError, ValueError, TypeError) as exc:
                raise IllegalArgumentError(f"row {index} of the partition makes no message: {exc}") from exc
            size = len(msg.body)
            if not size or size > max_message_size:
                raise IllegalArgumentError(
                    f"row {index} of the partition: {what} is {'empty' if not size else f'{size} bytes'}; "
                    f"a message body must be 1..{max_message_size} bytes (max_message_size)")
        except IllegalArgumentError as exc:
            if on_bad is None:
                raise
            on_bad(row, index, str(exc))
            continue
        yield msg, row
