"""Rows that make no valid message fail the write naming the row and the column, before the
batch they would join is sent (fake producer, no broker, no Spark)."""

from __future__ import annotations

import pytest
from rocketmq_sdk.exceptions import IllegalArgumentError
from rocketmq_sdk.integrations.spark import RowMessageMapper, send_rows
from rocketmq_sdk.integrations.spark.mapping import ColumnValue


class Config:
    max_message_size = 64


class RecordingProducer:
    config = Config()

    def __init__(self) -> None:
        self.sent: list[list[bytes]] = []

    def fetch_publish_queues(self, topic):
        return ["q0"]

    def send(self, msg, selector=None, arg=None, *, mq=None, timeout_ms=3000):
        self.sent.append([msg.body])

    def send_batch(self, msgs, *, mq=None, timeout_ms=3000):
        self.sent.append([m.body for m in msgs])


def rows_with(bad: dict) -> list[dict]:
    good = {"body": "ok", "tag": "A", "keys": "k", "props": {"p": "1"}}
    return [dict(good), dict(good), {**good, **bad}, dict(good)]


@pytest.mark.parametrize("bad, words", [
    ({"body": None}, ["row 2", "column 'body' is null"]),
    ({"body": ""}, ["row 2", "column 'body' is empty"]),
    ({"body": "x" * 65}, ["row 2", "column 'body' is 65 bytes", "1..64"]),
    ({"tag": "A||B"}, ["row 2", "column 'tag'", "'||'"]),
    ({"tag": "A\x01B"}, ["row 2", "column 'tag'", "separator"]),
    ({"keys": "k\x02x"}, ["row 2", "column 'keys'", "separator"]),
    ({"props": {"p\x01": "1"}}, ["row 2", "column 'props'", "separator"]),
    ({"props": {"TAGS": "forged"}}, ["row 2", "column 'props'", "TAGS"]),
])
@pytest.mark.parametrize("batch_size", [1, 3])
def test_a_bad_row_fails_naming_row_and_column_and_its_batch_is_not_sent(bad, words, batch_size):
    producer = RecordingProducer()
    mapper = RowMessageMapper("t", body="body", tag_col="tag", keys_col="keys", properties_fn=ColumnValue("props"))
    with pytest.raises(IllegalArgumentError) as err:
        send_rows(rows_with(bad), mapper, producer, batch_size=batch_size)
    for word in words:
        assert word in str(err.value)
    # one by one: the two rows before it were sent; batched (3): nothing of the bad row's batch
    assert producer.sent == ([[b"ok"], [b"ok"]] if batch_size == 1 else [])


def test_unsupported_body_type_names_the_row():
    producer = RecordingProducer()
    with pytest.raises(IllegalArgumentError, match=r"row 0 .*not JSON serialisable"):
        send_rows([{"body": object()}], RowMessageMapper("t", body="body"), producer)
    assert producer.sent == []


def test_max_batch_bytes_cuts_batches_by_size_as_well_as_count():
    producer = RecordingProducer()
    rows = [{"body": "x" * 10} for _ in range(7)]
    assert send_rows(rows, RowMessageMapper("t", body="body"), producer, batch_size=5, max_batch_bytes=30) == 7
    assert [len(b) for b in producer.sent] == [3, 3, 1]
