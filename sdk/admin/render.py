"""Text rendering for the admin CLI: aligned tables, key/value blocks, timestamps."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Sequence
from typing import Any

from rocketmq_sdk.protocol.message import MessageExt

__all__ = ["fmt_ms", "key_values", "message_block", "table"]


def fmt_ms(ms: int | None) -> str:
    """Epoch milliseconds as local ``YYYY-MM-DD HH:MM:SS,mmm`` (mqadmin's form); ``-`` for 0."""
    if not ms or ms <= 0:
        return "-"
    try:
        t = _dt.datetime.fromtimestamp(ms / 1000.0)
    except (OverflowError, OSError, ValueError):
        return str(ms)
    return t.strftime("%Y-%m-%d %H:%M:%S") + f",{ms % 1000:03d}"


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.2f}"
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, numeric: Iterable[int] = ()) -> str:
    """Columns padded to their widest cell, two spaces apart; columns listed in ``numeric``
    (indexes) are right-aligned. The last column is not padded (no trailing blanks)."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, c in enumerate(row):
            widths[i] = max(widths[i], len(c))
    right = set(numeric)
    last = len(headers) - 1

    def line(row: Sequence[str]) -> str:
        parts = []
        for i, c in enumerate(row):
            if i in right:
                parts.append(c.rjust(widths[i]))
            elif i == last:
                parts.append(c)
            else:
                parts.append(c.ljust(widths[i]))
        return "  ".join(parts).rstrip()

    return "\n".join([line(list(headers)), *(line(r) for r in cells)])


def key_values(pairs: Iterable[tuple[str, Any]]) -> str:
    """``key: value`` lines with the keys padded to one width."""
    items = [(k, _cell(v)) for k, v in pairs]
    width = max((len(k) for k, _ in items), default=0)
    return "\n".join(f"{k.ljust(width)}  {v}" for k, v in items)


def message_block(m: MessageExt) -> str:
    """A stored message as mqadmin's ``queryMsgById`` prints it: header fields, properties,
    and the body (UTF-8, undecodable bytes replaced)."""
    text = key_values([
        ("OffsetID:", m.offset_msg_id),
        ("MsgId:", m.msg_id),
        ("Topic:", m.topic),
        ("Tags:", f"[{m.tags}]" if m.tags is not None else "[]"),
        ("Keys:", f"[{' '.join(m.keys)}]"),
        ("Queue ID:", m.queue_id),
        ("Queue Offset:", m.queue_offset),
        ("CommitLog Offset:", m.commit_log_offset),
        ("Reconsume Times:", m.reconsume_times),
        ("Born Timestamp:", fmt_ms(m.born_timestamp)),
        ("Store Timestamp:", fmt_ms(m.store_timestamp)),
        ("Born Host:", m.born_host),
        ("Store Host:", m.store_host),
        ("System Flag:", m.sys_flag),
        ("Properties:", "{" + ", ".join(f"{k}={v}" for k, v in sorted(m.properties.items())) + "}"),
        ("Body Length:", len(m.body)),
    ])
    return text + "\nBody:\n" + m.body.decode("utf-8", "replace")
