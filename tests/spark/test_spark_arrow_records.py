"""Pull bodies into Arrow columns (integrations/spark/arrow_records.py): the C twin against the
pure-Python one, and the rows they give against what the SDK's decoder reads.

No Spark session: only pyarrow and the source's Arrow schema.
"""

from __future__ import annotations

import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rocketmq_sdk.exceptions import FrameError
from rocketmq_sdk.integrations.spark import arrow_records as ar
from rocketmq_sdk.protocol import message_codec as codec
from rocketmq_sdk.protocol.codes import MessageSysFlag
from rocketmq_sdk.protocol.message import MessageExt

pa = pytest.importorskip("pyarrow")

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def source_schema():
    """The Arrow schema Spark gives the reader for SOURCE_SCHEMA (built without a session)."""
    from pyspark.sql import types as T
    from rocketmq_sdk.integrations.spark.reader import SOURCE_SCHEMA, _arrow_schema

    kinds = {"BINARY": T.BinaryType(), "STRING": T.StringType(), "INT": T.IntegerType(), "BIGINT": T.LongType(),
             "TIMESTAMP": T.TimestampType(), "MAP<STRING, STRING>": T.MapType(T.StringType(), T.StringType())}
    fields = [c.strip().split(" ", 1) for c in SOURCE_SCHEMA.replace("<STRING, ", "<STRING,,").split(", ")]
    fields = [(name, kind.replace(",,", ", ")) for name, kind in fields]
    return _arrow_schema(T.StructType([T.StructField(name, kinds[kind]) for name, kind in fields]))


PA_SCHEMA = source_schema()


def columns(body: bytes, c: bool, lo: int = 0, hi: int = (1 << 63) - 1):
    """(rows as dicts, or the FrameError) decoding ``body`` with the C twin or without it."""
    saved = ar._c_decode_into
    if not c:
        ar._c_decode_into = None
    cols = ar.RecordColumns()
    try:
        cols.add_records(body, lo, hi)
        err = None
    except FrameError as exc:
        err = str(exc)
    finally:
        ar._c_decode_into = saved
    return Rows(cols.to_batch(PA_SCHEMA, "broker-a")), err


class Rows(list):
    """A batch's rows (timestamps as µs integers: corrupted ones are beyond datetime's range)."""

    def __init__(self, batch) -> None:
        cols = [c.cast(pa.int64()) if pa.types.is_timestamp(c.type) else c for c in batch.columns]
        super().__init__(pa.RecordBatch.from_arrays(cols, names=batch.schema.names).to_pylist())


prop_names = st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "WAIT", "DELAY", "a", "b", "k é", "中"])
prop_text = st.text(alphabet=st.sampled_from(list("ab Zé中\x01\x02")), max_size=6)
hosts = st.one_of(st.sampled_from(["127.0.0.1:10911", "10.0.0.2:55555"]), st.just("[::1]:10911"))


@st.composite
def records(draw) -> bytes:
    body = draw(st.binary(max_size=40))
    sys_flag = draw(st.sampled_from([0, 0, 4]))
    if draw(st.integers(0, 5)) == 0:
        body = zlib.compress(body)
        sys_flag |= MessageSysFlag.COMPRESSED
    props = draw(st.dictionaries(st.one_of(prop_names, prop_text), prop_text, max_size=6))
    m = MessageExt(topic=draw(st.sampled_from(["T", "flights", "Tö"])), body=body, properties=props,
                   queue_id=draw(st.integers(0, 255)), queue_offset=draw(st.integers(0, 40)),
                   sys_flag=sys_flag, born_timestamp=draw(st.integers(0, 2 ** 40)),
                   born_host=draw(hosts), store_host=draw(hosts), store_timestamp=draw(st.integers(0, 2 ** 40)),
                   commit_log_offset=draw(st.integers(0, 2 ** 62)), reconsume_times=draw(st.integers(0, 20)))
    if draw(st.integers(0, 6)) == 0:  # a name given twice in the properties string (the last value wins)
        props_text = draw(st.sampled_from([b"a\x011\x02b\x012\x02a\x013", b"TAGS\x01x\x02TAGS\x01y"]))
        host = codec.pack_host("127.0.0.1:1")[0]
        return bytes(codec.encode_stored_message(topic=b"T", body=body, properties=props_text, queue_id=1, flag=0,
                                                 sys_flag=sys_flag, born_timestamp=1, born_host=host,
                                                 store_host=host, queue_offset=draw(st.integers(0, 40))))
    return bytes(codec.encode_message_ext(m, trailing_separator=draw(st.booleans())))


@pytest.mark.skipif(ar._c_decode_into is None, reason="C twin not built or disabled")
@SETTINGS
@given(st.lists(records(), max_size=6), st.integers(0, 20), st.integers(0, 41))
def test_bodies_fill_the_same_columns(recs: list[bytes], lo: int, hi: int) -> None:
    body = b"".join(recs)
    assert columns(body, True, lo, hi) == columns(body, False, lo, hi)


@pytest.mark.skipif(ar._c_decode_into is None, reason="C twin not built or disabled")
@SETTINGS
@given(st.lists(records(), min_size=1, max_size=4), st.data())
def test_corrupted_bodies_fill_or_fail_alike(recs: list[bytes], data: st.DataObject) -> None:
    body = bytearray(b"".join(recs))
    for _ in range(data.draw(st.integers(1, 3))):
        body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(body)))
    for b in (bytes(body), bytes(body[:cut])):
        assert columns(b, True) == columns(b, False)


def test_rows_are_the_messages_the_sdk_decodes() -> None:
    msgs = [MessageExt(topic="flights", body=b'{"a":1}', properties={"TAGS": "UA", "KEYS": "k1 k2", "UNIQ_KEY": "ID1",
                                                                   "WAIT": "true", "origin": "EWR"},
                       queue_id=3, queue_offset=7, born_timestamp=1_700_000_000_123, store_timestamp=1_700_000_000_456,
                       born_host="127.0.0.1:1", store_host="127.0.0.1:10911", commit_log_offset=99, reconsume_times=2),
            MessageExt(topic="flights", body=b"", properties={}, queue_id=3, queue_offset=8,
                       born_host="127.0.0.1:1", store_host="127.0.0.1:10911", commit_log_offset=99)]
    body = b"".join(bytes(codec.encode_message_ext(m)) for m in msgs)
    for c in (True, False):
        rows, err = columns(body, c)
        assert err is None
        assert [r["body"] for r in rows] == [b'{"a":1}', b""]
        assert [(r["tags"], r["keys"], r["msg_id"]) for r in rows] == [
            ("UA", "k1 k2", "ID1"), (None, None, "7F00000100002A9F0000000000000063")]
        assert [r["properties"] for r in rows] == [[("origin", "EWR")], []]
        assert [(r["topic"], r["broker_name"], r["queue_id"], r["queue_offset"], r["reconsume_times"])
                for r in rows] == [("flights", "broker-a", 3, 7, 2), ("flights", "broker-a", 3, 8, 0)]
        assert (rows[0]["born_timestamp"], rows[0]["store_timestamp"]) == (1_700_000_000_123_000, 1_700_000_000_456_000)
        assert columns(body, c, 8, 9)[0] == rows[1:]  # [lo, hi) of queue offsets


def test_a_compressed_body_is_inflated() -> None:
    m = MessageExt(topic="T", body=zlib.compress(b"x" * 100), sys_flag=MessageSysFlag.COMPRESSED,
                   born_host="127.0.0.1:1", store_host="127.0.0.1:2")
    body = bytes(codec.encode_message_ext(m))
    for c in (True, False):
        assert columns(body, c)[0][0]["body"] == b"x" * 100


def test_a_malformed_record_raises_after_the_good_ones() -> None:
    good = bytes(codec.encode_message_ext(MessageExt(topic="T", body=b"1", born_host="127.0.0.1:1",
                                                     store_host="127.0.0.1:2")))
    for c in (True, False):
        rows, err = columns(good + good[:20], c)
        assert len(rows) == 1 and err is not None and "malformed message record at" in err


def test_empty_columns_make_an_empty_batch() -> None:
    batch = ar.RecordColumns().to_batch(PA_SCHEMA, "b")
    assert batch.num_rows == 0 and batch.schema == PA_SCHEMA


@pytest.mark.skipif(ar._c_decode_into is None, reason="C twin not built or disabled")
def test_plain_records_are_decoded_in_c_and_the_others_left_to_python() -> None:
    plain = bytes(codec.encode_message_ext(MessageExt(topic="T", body=b"x", properties={"TAGS": "a", "u": "1"},
                                                      born_host="127.0.0.1:1", store_host="127.0.0.1:2")))
    v6 = bytes(codec.encode_message_ext(MessageExt(topic="T", born_host="[::1]:1", store_host="127.0.0.1:2")))
    cols = ar.RecordColumns()
    assert ar._c_decode_into(cols.bufs, plain * 3, 0, len(plain) * 3, 0, 10) == len(plain) * 3
    assert len(cols) == 3
    assert ar._c_decode_into(cols.bufs, plain + v6, 0, len(plain) + len(v6), 0, 10) == len(plain)
    assert len(cols) == 4
