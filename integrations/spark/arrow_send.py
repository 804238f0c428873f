"""The writer's fast path: Arrow record batches → batch bodies in C → one request per queue batch.

With ``batch_size > 1`` and a recipe whose parts are columns (or the row as JSON, or a
:class:`.mapping.FieldTemplate`), each Arrow batch of a partition is sent without a
``Message`` per row:

1. the recipe's parts become columns: the body column (``string``/``binary``) or the rows as
   JSON (:mod:`.arrow_json`, column by column), the tag and keys
   columns (``string`` or integers) or a template filled by Arrow compute kernels, the user
   properties' ``map<string,string>`` column;
2. the target queue of each row: ``SelectMessageQueueByHash`` of the selector column, hashed
   once per distinct value of the batch (``dictionary_encode``);
3. :func:`.batch_bodies.encode_rows` (C) appends each row's batch entry to its queue's buffer;
4. each queue's entries are cut into requests exactly as :class:`.batching.QueueBatcher` cuts
   a stream of messages (``batch_size`` messages, or fewer before the bodies would exceed
   ``max_batch_bytes``; the rest waits for the next Arrow batch), and sent with
   :class:`rocketmq_sdk.producer.EncodedBatch` through the same batcher (one request in flight
   per queue, per-queue order kept). The bytes of every request are those the ``Message`` path
   sends (tests/spark/test_spark_batch_bodies.py).

Bad rows (a null body, a tag with ``||`` ...) are found before anything of their Arrow batch is
sent; the error names the row and column with the same words as the ``Message`` path (the row
is checked again by :func:`.row_checks.checked_messages` to say it), or, with a bad-rows topic, the
row goes there as JSON with the reason in its properties (:data:`BAD_ROW_REASON`).

Any other recipe (a user function, a delay column, another selector, a producer that is not
``rocketmq_sdk.Producer``) takes the ``Message`` path (:func:`plan_for` says why).
"""

from __future__ import annotations

import logging
import string
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson

from .arrow_json import json_rows
from .batch_bodies import CODE_NAMES, encode_rows
from .batching import QueueBatcher
from .mapping import ColumnValue, FieldTemplate, RowMessageMapper, _json_default
from .row_checks import BadRowHandler, checked_messages, max_message_size_of

logger = logging.getLogger("rocketmq_sdk.integrations.spark")

BAD_ROW_REASON = "BAD_ROW_REASON"
"""Property of a row sent to the bad-rows topic: why it makes no message (names row and column)."""
BAD_ROW_TOPIC = "BAD_ROW_TOPIC"
"""Property of a row sent to the bad-rows topic: the topic it was meant for."""
BAD_ROW_INDEX = "BAD_ROW_INDEX"
"""Property of a row sent to the bad-rows topic: its index in the Spark partition."""


@dataclass(frozen=True)
class ArrowPlan:
    """What the fast path reads: the (inner) mapper and the optional row-id key prefix."""

    mapper: RowMessageMapper
    key_prefix: str | None = None


def _is_text(t: Any) -> bool:
    import pyarrow as pa

    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_integer(t)


def _plain_template(template: str) -> list[tuple[str, str | None]] | None:
    """``[(literal, field)]`` of a template of bare ``{name}`` fields, else None."""
    out: list[tuple[str, str | None]] = []
    for literal, fld, spec, conv in string.Formatter().parse(template):
        if fld is not None and (not fld.isidentifier() or spec or conv):
            return None
        out.append((literal, fld))
    return out


def plan_for(mapper: Any, producer: Any, selector: Any, batch_size: int,
             schema: Any = None) -> tuple[ArrowPlan | None, str]:
    """The fast-path plan for this recipe and producer (and the batches' Arrow ``schema`` when
    given), or ``(None, why not)``."""
    from rocketmq_sdk import Producer, SelectMessageQueueByHash

    try:
        from .stream_writer import RowIdKeys
    except ImportError:  # no PySpark data source API: no streaming writer either
        RowIdKeys = None  # noqa: N806
    row_ids = RowIdKeys is not None and isinstance(mapper, RowIdKeys)
    prefix = mapper.prefix if row_ids else None
    inner = mapper.mapper if row_ids else mapper
    if batch_size < 2:
        return None, "batch_size 1"
    if type(inner) is not RowMessageMapper:
        return None, f"a {type(inner).__name__} recipe"
    if not isinstance(producer, Producer):
        return None, f"a {type(producer).__name__} producer"
    if inner.body is not None and not isinstance(inner.body, str):
        return None, "a body function"
    for name in ("tag_fn", "keys_fn"):
        fn = getattr(inner, name)
        if fn is not None and not (isinstance(fn, FieldTemplate) and _plain_template(fn.template) is not None):
            return None, f"a {name} function"
    if inner.properties_fn is not None and not isinstance(inner.properties_fn, ColumnValue):
        return None, "a properties_fn function"
    if inner.delay_col is not None:
        return None, "a delay column"
    if inner.selector_fn is not None:
        return None, "a selector function"
    if inner.selector_col is not None and selector is not None and type(selector) is not SelectMessageQueueByHash:
        return None, f"a {type(selector).__name__} selector"
    if schema is not None:
        why = _schema_mismatch(inner, schema)
        if why:
            return None, why
    return ArrowPlan(inner, prefix), ""


def _schema_mismatch(m: RowMessageMapper, schema: Any) -> str:
    """Why the columns of ``schema`` do not suit the fast path ("" when they do): a named column
    missing (the Message path says which), keys that are not strings (the Message path takes
    other values as iterables of keys), properties that are not a ``map<string,string>``."""
    import pyarrow as pa

    names = set(schema.names)
    wanted = [c for c in (m.body if isinstance(m.body, str) else None, m.tag_col, m.keys_col, m.selector_col,
                          m.properties_fn.column if m.properties_fn is not None else None) if c is not None]
    for fn in (m.tag_fn, m.keys_fn):
        if fn is not None:
            wanted += [f for _, f in _plain_template(fn.template) or [] if f is not None]
    missing = [c for c in wanted if c not in names]
    if missing:
        return f"no column {missing[0]!r}"
    if m.keys_col is not None:
        t = schema.field(m.keys_col).type
        if not (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_null(t)):
            return f"a keys column of type {t}"
    if m.properties_fn is not None:
        t = schema.field(m.properties_fn.column).type
        if not (pa.types.is_null(t) or (pa.types.is_map(t) and _is_text(t.key_type) and _is_text(t.item_type))):
            return f"a properties column of type {t}"
    return ""


def _text_col(col: Any) -> tuple[Any, Any, Any]:
    """An Arrow string/binary/integer column as ``(valid, offsets, data)`` (see batch_bodies)."""
    import numpy as np
    import pyarrow as pa

    t = col.type
    if pa.types.is_integer(t):
        col = col.cast(pa.string())
    elif pa.types.is_large_string(t) or pa.types.is_large_binary(t):
        col = col.cast(pa.binary())
    _, offs, data = col.buffers()
    offsets = np.frombuffer(offs, dtype="<i4", count=col.offset + len(col) + 1)[col.offset:]
    valid = col.is_valid().to_numpy(zero_copy_only=False).view(np.uint8) if col.null_count else None
    return valid, offsets, data if data is not None else b""


def _template_col(batch: Any, template: str) -> Any:
    """A plain template filled by Arrow kernels (nulls render as ``""``, as FieldTemplate does);
    None when a field's type would not print as ``str`` prints it."""
    import pyarrow as pa
    import pyarrow.compute as pc

    parts: list[Any] = []
    pieces = _plain_template(template) or []
    for literal, fld in pieces:
        if literal:
            parts.append(pa.scalar(literal))
        if fld is not None:
            col = batch.column(fld)
            if not _is_text(col.type):
                return None
            parts.append(pc.fill_null(col.cast(pa.string()), ""))
    if not parts:
        return pa.array([""] * batch.num_rows)
    if all(isinstance(p, pa.Scalar) for p in parts):
        return pa.array(["".join(p.as_py() for p in parts)] * batch.num_rows)
    return pc.binary_join_element_wise(*parts, "")


def _groups(batch: Any, column: str, queue_count: int) -> Any:
    """``SelectMessageQueueByHash`` queue index of each row (null → ``""``) as int32."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    from rocketmq_sdk.producer.selector import java_hash_code

    col = batch.column(column)
    if _is_text(col.type):
        text = pc.fill_null(col.cast(pa.string()), "")
    else:  # as RowMessageMapper.selector_arg: str() of the row's value
        text = pa.array(["" if v is None else str(v) for v in col.to_pylist()], pa.string())
    enc = text.dictionary_encode()
    table = np.fromiter((abs(java_hash_code(v)) % queue_count for v in enc.dictionary.to_pylist()),
                        dtype=np.int32, count=len(enc.dictionary))
    return np.ascontiguousarray(table[enc.indices.to_numpy(zero_copy_only=False)], dtype="<i4")


class _Pending:
    """A queue's entries waiting for more (the tail of an Arrow batch)."""

    __slots__ = ("body", "ids", "nbytes")

    def __init__(self) -> None:
        self.body = bytearray()
        self.ids: list[str] = []
        self.nbytes = 0  # message bodies only, as QueueBatcher counts


class ArrowSender:
    """Sends a partition's Arrow batches (see the module docstring).

    Args:
        plan: from :func:`plan_for`.
        producer: a started ``rocketmq_sdk.Producer``.
        batch_size, max_batch_bytes, send_timeout_ms: as :func:`.writer.send_rows`.
        on_bad: called for each bad row (``handler(row, index, reason)``), else the first one
            raises ``IllegalArgumentError``.
    """

    def __init__(self, plan: ArrowPlan, producer: Any, *, batch_size: int, max_batch_bytes: int,
                 send_timeout_ms: int, on_bad: BadRowHandler | None = None) -> None:

        self.plan, self.mapper, self.producer = plan, plan.mapper, producer
        self.batch_size, self.max_batch_bytes = batch_size, max_batch_bytes
        self.max_body = max_message_size_of(producer)
        self.on_bad = on_bad
        self.batcher = QueueBatcher(producer, batch_size, send_timeout_ms, max_batch_bytes)
        self.queues = producer.fetch_publish_queues(self.mapper.topic) if self.mapper.uses_selector else None
        self.pending: dict[int, _Pending] = {}
        self.rows = 0  # rows of the partition seen so far
        self.bad_rows = 0

    def send(self, batches: Iterable[Any]) -> int:
        """Send every batch, then wait for every request; returns the messages acknowledged.

        Raises:
            IllegalArgumentError: a bad row (without ``on_bad``), before its Arrow batch is sent.
            rocketmq_sdk.exceptions.MQError: a send failed.
        """
        for batch in batches:
            self.add(batch)
        for g in list(self.pending):
            self._flush_pending(g)
        self.batcher.flush_all()
        return self.batcher.sent

    def add(self, batch: Any) -> None:
        """Encode one Arrow batch and send the requests it fills."""
        import numpy as np
        from rocketmq_sdk.protocol.msgid import create_uniq_id

        from .arrow_rows import _plain_batch

        n = batch.num_rows
        if not n:
            return
        m = self.mapper
        plain = _plain_batch(batch)
        json = json_rows(plain, m.exclude_from_body) if m.body is None else None
        if json is not None:
            body: Any = _text_col(json)
            body_len = np.diff(body[1]).astype(np.int64)
        elif m.body is None:
            rows = self._dict_rows(plain)
            dumps, default, opt, exclude = orjson.dumps, _json_default, orjson.OPT_NON_STR_KEYS, m.exclude_from_body
            if exclude:
                body = [dumps({k: v for k, v in r.items() if k not in exclude}, default=default, option=opt)
                             for r in rows]
            else:
                body = [dumps(r, default=default, option=opt) for r in rows]
            body_len = np.fromiter(map(len, body), dtype=np.int64, count=n)
        else:
            body = self._column_or_list(plain, m.body, "body")
            body_len = np.diff(body[1]).astype(np.int64) if type(body) is tuple else \
                np.fromiter((len(b) if b is not None else 0 for b in body), dtype=np.int64, count=n)
        tags = self._part(plain, m.tag_col, m.tag_fn)
        keys = self._part(plain, m.keys_col, m.keys_fn)
        props = None
        if m.properties_fn is not None:
            props = self._map_col(plain.column(m.properties_fn.column))
        groups = _groups(plain, m.selector_col, len(self.queues)) if self.queues is not None else None
        ngroups = len(self.queues) if self.queues is not None else 1
        ids = [create_uniq_id() for _ in range(n)]
        outs = [bytearray() for _ in range(ngroups)]
        index = [bytearray() for _ in range(ngroups)]
        bad: list[tuple[int, int]] = []
        suffix = (self.plan.key_prefix, self.rows) if self.plan.key_prefix is not None else None
        encode_rows(body, tags, keys, props, suffix, self.max_body, ids, n, groups, outs, index, bad)
        if bad:
            self._bad_rows(plain, bad)  # raises without a handler: nothing of this batch is sent
        self.rows += n
        for g in range(ngroups):
            if index[g]:
                self._cut(g, outs[g], np.frombuffer(index[g], dtype="<i8").reshape(-1, 2), body_len, ids)

    # ---------------------------------------------------------------- columns of the recipe

    @staticmethod
    def _dict_rows(plain: Any) -> list[dict[str, Any]]:
        from .arrow_rows import _column_values

        names = plain.schema.names
        return [dict(zip(names, values, strict=True))
                for values in zip(*(_column_values(c) for c in plain.columns), strict=True)]

    def _column_or_list(self, plain: Any, name: str, what: str) -> Any:
        import pyarrow as pa

        col = plain.column(name)
        t = col.type
        if _is_text(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
            return _text_col(col)
        if pa.types.is_null(t):
            return [None] * len(col)
        # anything else: the mapper's own conversion (JSON) row by row
        return [self.mapper.body_of({name: v}) if v is not None else None for v in col.to_pylist()] \
            if what == "body" else [None if v is None else str(v) for v in col.to_pylist()]

    def _part(self, plain: Any, col_name: str | None, fn: Any) -> Any:
        import pyarrow as pa

        if col_name is not None:
            col = plain.column(col_name)
            if _is_text(col.type):
                return _text_col(col)
            if pa.types.is_null(col.type):
                return None
            return [None if v is None else str(v) for v in col.to_pylist()]
        if fn is None:
            return None
        filled = _template_col(plain, fn.template)
        if filled is not None:
            return _text_col(filled)
        return [fn(r) for r in self._dict_rows(plain)]

    @staticmethod
    def _map_col(col: Any) -> Any:
        import numpy as np
        import pyarrow as pa

        t = col.type
        if pa.types.is_null(t):
            return None
        if not (pa.types.is_map(t) and _is_text(t.key_type) and _is_text(t.item_type)):
            raise TypeError(f"the properties column is a {t}, not a map<string,string>")
        offsets = np.ascontiguousarray(col.offsets.to_numpy(zero_copy_only=False), dtype="<i4")
        valid = col.is_valid().to_numpy(zero_copy_only=False).view(np.uint8) if col.null_count else None
        return valid, offsets, _text_col(col.keys), _text_col(col.items)

    # ---------------------------------------------------------------- bad rows

    def _bad_rows(self, plain: Any, bad: list[tuple[int, int]]) -> None:
        from rocketmq_sdk.exceptions import IllegalArgumentError

        from .arrow_rows import arrow_rows

        for i, code in sorted(bad):
            index = self.rows + i
            row = next(arrow_rows([plain.slice(i, 1)]))
            reason = f"row {index} of the partition makes no message: {CODE_NAMES[code]}"
            try:
                for _ in checked_messages([row], self.mapper, self.max_body, first_index=index):
                    pass
            except IllegalArgumentError as exc:
                reason = str(exc)
            if self.on_bad is None:
                raise IllegalArgumentError(reason)
            self.bad_rows += 1
            self.on_bad(row, index, reason)

    # ---------------------------------------------------------------- requests

    def _cut(self, g: int, out: bytearray, idx: Any, body_len: Any, ids: list[str]) -> None:
        """Cut group ``g``'s new entries into requests as QueueBatcher.add would."""
        import numpy as np

        ends, rows = idx[:, 0], idx[:, 1]
        sizes = body_len[rows]
        cum = np.concatenate(([0], np.cumsum(sizes)))
        starts = np.concatenate(([0], ends[:-1]))
        pend = self.pending.get(g)
        size, limit, count = self.batch_size, self.max_batch_bytes, len(rows)
        i = 0
        while i < count:
            have = len(pend.ids) if pend is not None else 0
            have_bytes = pend.nbytes if pend is not None else 0
            # the entries that fit: by count, then by the bodies' bytes (an entry alone may exceed)
            j = min(count, i + size - have)
            fit = int(np.searchsorted(cum, cum[i] + limit - have_bytes, side="right")) - 1
            if fit <= i:
                if have:
                    self._flush_pending(g)
                    pend = None
                    continue
                fit = i + 1
            j = min(j, fit)
            if pend is None:
                pend = self.pending[g] = _Pending()
            pend.body += out[starts[i]:ends[j - 1]]
            pend.ids.extend(ids[r] for r in rows[i:j].tolist())
            pend.nbytes += int(cum[j] - cum[i])
            if len(pend.ids) >= size or j < count:
                self._flush_pending(g)
                pend = None
            i = j

    def _flush_pending(self, g: int) -> None:
        from rocketmq_sdk.producer import EncodedBatch

        pend = self.pending.pop(g, None)
        if pend is None or not pend.ids:
            return
        mq = self.queues[g] if self.queues is not None else None
        batch = EncodedBatch(self.mapper.topic, bytes(pend.body), pend.ids)
        self.batcher.send_now(batch.messages()[0] if len(pend.ids) == 1 else batch, len(pend.ids), mq)


def bad_rows_sender(producer: Any, bad_rows_topic: str, topic: str, send_timeout_ms: int) -> BadRowHandler:
    """A handler sending each bad row to ``bad_rows_topic``: the row as JSON (all columns), the
    reason in :data:`BAD_ROW_REASON`, the intended topic in :data:`BAD_ROW_TOPIC`, the row's
    index in its partition in :data:`BAD_ROW_INDEX`; synchronously, before the rows after it.

    Raises (when called):
        rocketmq_sdk.exceptions.MQError: the bad-rows topic refused the message (the write fails).
    """
    from rocketmq_sdk import Message

    from .mapping import row_to_json

    def send_bad(row: Any, index: int, reason: str) -> None:
        msg = Message(bad_rows_topic, row_to_json(row))
        msg.properties[BAD_ROW_REASON] = reason.replace("\x01", " ").replace("\x02", " ")
        msg.properties[BAD_ROW_TOPIC] = topic
        msg.properties[BAD_ROW_INDEX] = str(index)
        producer.send(msg, timeout_ms=send_timeout_ms)
        logger.warning("bad row %d sent to topic %s: %s", index, bad_rows_topic, reason)

    return send_bad
