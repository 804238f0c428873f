"""Batch bodies from Arrow columns (integrations/spark/batch_bodies.py, arrow_send.py): the C twin
against the pure-Python one on generated and corrupted columns, and the requests of the fast path
against those of the ``Message`` path (the SDK's batch encoder), byte for byte.

No Spark session, no broker: a ``Producer`` whose sends are recorded.
"""

from __future__ import annotations

import concurrent.futures
import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rocketmq_sdk import Producer, SelectMessageQueueByHash
from rocketmq_sdk.exceptions import IllegalArgumentError
from rocketmq_sdk.integrations.spark import arrow_send
from rocketmq_sdk.integrations.spark import batch_bodies as bb
from rocketmq_sdk.integrations.spark.mapping import ColumnValue, FieldTemplate, RowMessageMapper
from rocketmq_sdk.integrations.spark.stream_writer import RowIdKeys
from rocketmq_sdk.integrations.spark.writer import send_batches
from rocketmq_sdk.producer import EncodedBatch
from rocketmq_sdk.protocol import msgid
from rocketmq_sdk.protocol.message import Message, MessageQueue, SendResult, SendStatus
from rocketmq_sdk.protocol.message_codec import encode_batch

pa = pytest.importorskip("pyarrow")

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
needs_c = pytest.mark.skipif(bb._c_encode_rows is None, reason="C twin not built (or ROCKETMQ_PURE_PYTHON)")

# ---------------------------------------------------------------- the twins

texts = st.one_of(st.none(), st.text(alphabet=st.sampled_from("ab|\x01\x02 é-"), max_size=6))
prop_names = st.sampled_from(["p", "q", "", "TAGS", "UNIQ_KEY", "a\x01", "é"])


@st.composite
def arrow_columns(draw):
    n = draw(st.integers(1, 12))
    body = pa.array(draw(st.lists(st.one_of(st.none(), st.binary(max_size=6)), min_size=n, max_size=n)), pa.binary())
    tags = pa.array(draw(st.lists(texts, min_size=n, max_size=n)), pa.string())
    keys = pa.array(draw(st.lists(texts, min_size=n, max_size=n)), pa.string())
    maps = draw(st.lists(st.one_of(st.none(), st.lists(st.tuples(prop_names, texts), max_size=3)), min_size=n,
                         max_size=n))
    props = pa.array(maps, pa.map_(pa.string(), pa.string()))
    start = draw(st.integers(0, n - 1))  # a slice: buffers seen from a row other than the first
    return [c.slice(start) for c in (body, tags, keys, props)], draw(st.integers(1, 3)), draw(st.booleans())


def run_twin(c: bool, n, body, tags, keys, props, suffix, max_body, groups, ngroups):
    ids = [f"{i:032X}" for i in range(n)]
    outs, index, bad = [bytearray() for _ in range(ngroups)], [bytearray() for _ in range(ngroups)], []
    saved = bb._c_encode_rows
    if not c:
        bb._c_encode_rows = None
    try:
        bb.encode_rows(body, tags, keys, props, suffix, max_body, ids, n, groups, outs, index, bad)
        err = None
    except (ValueError, TypeError) as exc:
        err = type(exc).__name__
    finally:
        bb._c_encode_rows = saved
    return outs, index, bad, err


@needs_c
@SETTINGS
@given(arrow_columns(), st.integers(0, 7))
def test_c_and_python_twins_agree_on_generated_columns(cols, max_body):
    import numpy as np

    (body, tags, keys, props), ngroups, with_suffix = cols
    args = (arrow_send._text_col(body), arrow_send._text_col(tags), arrow_send._text_col(keys),
            arrow_send.ArrowSender._map_col(props), ("spark-q-1-0", 10) if with_suffix else None, max_body)
    groups = np.arange(len(body), dtype="<i4") % ngroups
    n = len(body)
    c, py = run_twin(True, n, *args, groups, ngroups), run_twin(False, n, *args, groups, ngroups)
    assert c == py and c[3] is None
    # list columns (the JSON bodies, keys from a function) give the same bytes as Arrow columns
    as_lists = (body.to_pylist(), tags.to_pylist(), keys.to_pylist(), *args[3:])
    assert run_twin(True, n, *as_lists, groups, ngroups) == c


@needs_c
def test_the_c_twin_encodes_common_rows_itself():
    """No hand-back to Python for plain rows (the twins agreeing would hide a C twin that never works)."""
    n = 3
    body = pa.array([b"a", b"bc", b"d"], pa.binary())
    tags = pa.array(["T", None, ""])
    props = pa.array([[("p", "1")], None, [("q", None)]], pa.map_(pa.string(), pa.string()))
    for b in (arrow_send._text_col(body), body.to_pylist()):
        outs, index, bad = [bytearray()], [bytearray()], []
        stop = bb._c_encode_rows(b, arrow_send._text_col(tags), ["k1", None, "k3"], arrow_send.ArrowSender._map_col(props),
                                 None, 100, ["I0", "I1", "I2"], 0, n, None, outs, index, bad)
        assert (stop, bad) == (n, [])
        msgs = [Message("T", b"a", tags="T", keys="k1", properties={"p": "1"}), Message("T", b"bc"),
                Message("T", b"d", keys="k3")]
        for i, m in enumerate(msgs):
            m.properties["UNIQ_KEY"] = f"I{i}"
        assert bytes(outs[0]) == encode_batch(msgs)


@needs_c
@SETTINGS
@given(st.binary(min_size=0, max_size=40), st.integers(1, 4))
def test_corrupted_offsets_are_refused_by_both_twins(noise, n):
    import numpy as np

    offsets = np.frombuffer((noise + bytes(4 * (n + 1)))[:4 * (n + 1)], dtype="<i4")
    body = (None, offsets, b"0123456789")
    c, py = (run_twin(flag, n, body, None, None, None, None, 100, None, 1) for flag in (True, False))
    assert c == py


# ---------------------------------------------------------------- the fast path against the Message path

class RecordingProducer(Producer):
    """A ``Producer`` never started: its sends are recorded as (queue, kind, bytes of the body)."""

    def __init__(self, queues: int = 4) -> None:
        super().__init__("g", "127.0.0.1:9876")
        self.requests: list[tuple[int | None, str, bytes]] = []
        self.encoded = 0  # EncodedBatch requests (the fast path's)
        self.mqs = [MessageQueue("T", "b", q) for q in range(queues)]

    def fetch_publish_queues(self, topic):
        return list(self.mqs)

    def send_async(self, msg, callback=None, selector=None, arg=None, *, mq=None, timeout_ms=None):
        q = mq.queue_id if mq is not None else None
        if isinstance(msg, EncodedBatch):
            self.encoded += 1
            self.requests.append((q, "batch", msg.body))
        elif isinstance(msg, Message):
            self.requests.append((q, "one", encode_batch([_with_id(msg)])))
        else:
            self.requests.append((q, "batch", encode_batch([_with_id(m) for m in msg])))
        fut: concurrent.futures.Future = concurrent.futures.Future()
        fut.set_result(SendResult(SendStatus.SEND_OK, "id", "oid", mq or self.mqs[0], 0))
        return fut

    def send(self, msg, *args, timeout_ms=None, **kw):
        return self.send_async(msg, mq=kw.get("mq")).result()

    def per_queue(self):
        out: dict = {}
        for q, kind, body in self.requests:
            out.setdefault(q, []).append((kind, body))
        return out


def _with_id(m: Message) -> Message:
    """The Message path's UNIQ_KEY: the row number held by the test's ``k<row>`` key."""
    if "UNIQ_KEY" not in m.properties:
        row = int(next(k for k in m.keys if k.startswith("k"))[1:])
        m.properties["UNIQ_KEY"] = f"{row:032X}"
    return m


@pytest.fixture
def counted_ids(monkeypatch):
    counter = itertools.count()
    monkeypatch.setattr(msgid, "create_uniq_id", lambda: f"{next(counter):032X}")


def flights_like(n: int, start: int = 0):
    import datetime as dt

    rows = range(start, start + n)
    return pa.RecordBatch.from_pydict({
        "year": pa.array([2013] * n, pa.int32()), "flight": pa.array([i % 97 for i in rows], pa.int64()),
        "carrier": pa.array([None if i % 13 == 0 else "UA" if i % 2 else "B6" for i in rows]),
        "tailnum": pa.array([None if i % 11 == 0 else f"N{i % 23}é" for i in rows]),
        "dep_delay": pa.array([float("nan") if i % 7 == 0 else i / 3 for i in rows]),
        "time_hour": pa.array([dt.datetime(2013, 1, 1, i % 24, tzinfo=dt.UTC) for i in rows],
                              pa.timestamp("us", tz="UTC")),
        "k": pa.array([f"k{i}" for i in rows]),
        "props": pa.array([None if i % 5 == 0 else [("origin", "EWR"), ("n", None), ("i", str(i))] for i in rows],
                          pa.map_(pa.string(), pa.string())),
        "payload": pa.array([f"p{i}".encode() * (1 + i % 40) for i in rows], pa.binary()),
    })


RECIPES = {
    "flights demo (JSON body, template keys, hash selector)": dict(
        tag_col="carrier", keys_fn=FieldTemplate("{k} {year}-{carrier}{flight}"), selector_col="tailnum"),
    "columns (binary body, keys column, properties map)": dict(
        body="payload", tag_col="carrier", keys_col="k", properties_fn=ColumnValue("props")),
    "JSON body without some columns, no selector": dict(keys_col="k", exclude_from_body=("payload", "props")),
    "selector and tag of other types (float, timestamp)": dict(body="payload", tag_col="time_hour", keys_col="k",
                                                              selector_col="dep_delay"),
}


def send_both(mapper_kw, batches, *, batch_size=8, max_batch_bytes=1 << 20, wrap=None):
    """(messages sent, requests per queue) of the fast path, then of the Message path."""
    out = []
    for fast in (True, False):
        producer = RecordingProducer()
        mapper = RowMessageMapper("T", **mapper_kw)
        if wrap:
            mapper = wrap(mapper)
        assert (arrow_send.plan_for(mapper, producer, None, batch_size)[0] is not None) is True
        with pytest.MonkeyPatch.context() as mp:
            if not fast:
                mp.setattr("rocketmq_sdk.integrations.spark.writer.plan_for", lambda *a: (None, "test"))
            sent = send_batches(iter(batches), mapper, producer, batch_size=batch_size,
                                max_batch_bytes=max_batch_bytes)
        assert (producer.encoded > 0) is fast or all(kind == "one" for _, kind, _ in producer.requests)
        out.append((sent, producer.per_queue()))
    return out


@pytest.mark.parametrize("recipe", RECIPES)
@pytest.mark.parametrize("batch_size,max_batch_bytes", [(8, 1 << 20), (32, 600), (3, 50)])
def test_fast_path_requests_are_those_of_the_message_path(counted_ids, recipe, batch_size, max_batch_bytes):
    batches = [flights_like(50), flights_like(1, 50), flights_like(77, 51)]
    (fast_sent, fast), (slow_sent, slow) = send_both(RECIPES[recipe], batches, batch_size=batch_size,
                                                     max_batch_bytes=max_batch_bytes)
    assert fast_sent == slow_sent == 128
    assert fast == slow
    assert sum(len(v) for v in fast.values()) > 4  # several requests per queue


def test_the_stream_writers_row_id_key_is_the_same_on_both_paths(counted_ids):
    wrap = lambda m: RowIdKeys(m, "spark-q-3-1")  # noqa: E731
    (_, fast), (_, slow) = send_both(RECIPES["columns (binary body, keys column, properties map)"],
                                     [flights_like(20), flights_like(20, 20)], wrap=wrap)
    assert fast == slow and b"KEYS\x01k39 spark-q-3-1-39\x02" in b"".join(b for _, b in fast[None])


def test_fast_path_is_taken_for_the_demo_recipe_only_with_batches_and_a_real_producer():
    demo = RowMessageMapper("T", **RECIPES["flights demo (JSON body, template keys, hash selector)"])
    producer = RecordingProducer()
    assert arrow_send.plan_for(demo, producer, None, 32)[0] is not None
    assert arrow_send.plan_for(demo, producer, SelectMessageQueueByHash(), 32)[0] is not None
    assert arrow_send.plan_for(demo, producer, None, 1) == (None, "batch_size 1")
    assert arrow_send.plan_for(demo, object(), None, 32)[1] == "a object producer"
    fn = RowMessageMapper("T", tag_fn=lambda r: r["carrier"])
    assert arrow_send.plan_for(fn, producer, None, 32)[1] == "a tag_fn function"


BAD_ROWS = {
    "null body": ({"payload": [b"ok", None]}, "the body column 'payload' is null"),
    "empty body": ({"payload": [b"ok", b""]}, "column 'payload' is empty"),
    "tag with ||": ({"carrier": ["A", "x||y"]}, "column 'carrier': tag 'x||y' contains '||'"),
    "tag separator": ({"carrier": ["A", "x\x01"]}, "column 'carrier': Message tags"),
    "keys separator": ({"k": ["k0", "k\x02"]}, "column 'k': Message keys"),
    "reserved property": ({"props": [[("p", "1")], [("UNIQ_KEY", "x")]]}, "reserved"),
    "oversized body": ({"payload": [b"ok", b"x" * 5000]}, "5000 bytes; a message body must be 1..4096"),
}


def bad_batch(change):
    cols = {"payload": [b"ok", b"ok"], "carrier": ["A", "B"], "k": ["k0", "k1"], "props": [None, None]}
    cols.update(change)
    return pa.RecordBatch.from_pydict({
        "payload": pa.array(cols["payload"], pa.binary()), "carrier": pa.array(cols["carrier"]),
        "k": pa.array(cols["k"]), "props": pa.array(cols["props"], pa.map_(pa.string(), pa.string()))})


@pytest.mark.parametrize("case", BAD_ROWS)
def test_a_bad_row_fails_before_its_batch_is_sent_naming_row_and_column(counted_ids, case):
    change, words = BAD_ROWS[case]
    producer = RecordingProducer()
    producer.config.max_message_size = 4096
    mapper = RowMessageMapper("T", body="payload", tag_col="carrier", keys_col="k", properties_fn=ColumnValue("props"))
    good = bad_batch({})
    with pytest.raises(IllegalArgumentError, match=r"^row 3 of the partition") as err:
        send_batches(iter([good, bad_batch(change)]), mapper, producer, batch_size=2)
    assert words in str(err.value)
    # the first (good) Arrow batch went out; nothing of the second, whose row 1 is bad
    assert [(q, kind) for q, kind, _ in producer.requests] == [(None, "batch")]


def test_bad_rows_go_to_the_bad_rows_topic_with_their_reason(counted_ids):
    producer = RecordingProducer()
    sent_bad: list[Message] = []
    producer.send = lambda msg, *a, timeout_ms=None, **kw: sent_bad.append(msg)  # type: ignore[method-assign]
    mapper = RowMessageMapper("T", body="payload", tag_col="carrier", keys_col="k", properties_fn=ColumnValue("props"))
    batches = [bad_batch({"payload": [None, b"ok"]}), bad_batch({"carrier": ["x||y", "A"]})]
    for fast in (True, False):
        sent_bad.clear()
        producer.requests.clear()
        with pytest.MonkeyPatch.context() as mp:
            if not fast:
                mp.setattr("rocketmq_sdk.integrations.spark.writer.plan_for", lambda *a: (None, "test"))
            sent = send_batches(iter(batches), mapper, producer, batch_size=4, bad_rows_topic="T_BAD")
        assert sent == 2
        assert [(m.topic, m.properties[arrow_send.BAD_ROW_INDEX], m.properties[arrow_send.BAD_ROW_TOPIC])
                for m in sent_bad] == [("T_BAD", "0", "T"), ("T_BAD", "2", "T")]
        assert "row 0 of the partition makes no message: the body column 'payload' is null" in \
            sent_bad[0].properties[arrow_send.BAD_ROW_REASON]
        assert "tag 'x||y'" in sent_bad[1].properties[arrow_send.BAD_ROW_REASON]
        assert sent_bad[1].body == b'{"payload":"ok","carrier":"x||y","k":"k0","props":null}'


# ---------------------------------------------------------------- JSON bodies column by column

@st.composite
def tables(draw):
    import datetime as dt

    n = draw(st.integers(0, 6))

    def col(values, typ):
        return pa.array(draw(st.lists(st.one_of(st.none(), values), min_size=n, max_size=n)), typ)

    cols = {
        "i": col(st.integers(-(2**63), 2**63 - 1), pa.int64()), "s32": col(st.integers(-5, 5), pa.int32()),
        "f": col(st.floats(allow_nan=True, allow_infinity=True), pa.float64()),
        "f32": col(st.floats(width=32), pa.float32()), "b": col(st.booleans(), pa.bool_()),
        "plain": col(st.text(alphabet="abc é-_€", max_size=5), pa.string()),
        "odd \"name\"": col(st.text(max_size=5), pa.string()),
        "ts": col(st.datetimes(min_value=dt.datetime(1970, 1, 2), max_value=dt.datetime(2100, 1, 1),
                               timezones=st.just(dt.UTC)), pa.timestamp("us", tz="UTC")),
        "d": col(st.dates(), pa.date32()), "bin": col(st.binary(max_size=4), pa.binary()),
        "dec": col(st.decimals(allow_nan=False, allow_infinity=False, places=2, min_value=-999, max_value=999),
                   pa.decimal128(5, 2)),
        "m": col(st.lists(st.tuples(st.sampled_from("xy"), st.text(max_size=2)), max_size=2, unique_by=lambda t: t[0]),
                 pa.map_(pa.string(), pa.string())),
    }
    names = draw(st.lists(st.sampled_from(sorted(cols)), min_size=1, max_size=6, unique=True))
    return pa.RecordBatch.from_pydict({k: cols[k] for k in names}), draw(st.sets(st.sampled_from(names)))


@SETTINGS
@given(tables())
def test_json_rows_are_the_bytes_row_to_json_writes(table):
    from rocketmq_sdk.integrations.spark.arrow_json import json_rows
    from rocketmq_sdk.integrations.spark.arrow_rows import _plain_batch, arrow_rows
    from rocketmq_sdk.integrations.spark.mapping import row_to_json

    batch, exclude = table
    exclude = tuple(sorted(exclude))
    got = json_rows(_plain_batch(batch), exclude).to_pylist()
    assert got == [row_to_json(r, exclude) for r in arrow_rows([batch])]


def test_columns_the_fast_path_would_read_otherwise_take_the_message_path():
    schema = flights_like(5).schema
    producer = RecordingProducer()

    def why(**kw):
        return arrow_send.plan_for(RowMessageMapper("T", **kw), producer, None, 32, schema)[1]

    assert why(keys_col="k", tag_col="carrier") == ""
    assert why(keys_col="flight") == "a keys column of type int64"  # the Message path iterates such keys
    assert why(properties_fn=ColumnValue("carrier")) == "a properties column of type string"
    assert why(tag_col="nope") == "no column 'nope'"
    assert why(keys_fn=FieldTemplate("{k}-{nope}")) == "no column 'nope'"
    with pytest.raises(IllegalArgumentError, match=r"row 0 of the partition makes no message"):
        send_batches(iter([flights_like(3)]), RowMessageMapper("T", keys_col="flight"), producer, batch_size=4)
