"""The flights demo's audit, progress and report (synthetic data, no Spark needed)."""

from __future__ import annotations

import io
from collections import Counter

from flights_kit.audit import Expected, Received, audit
from flights_kit.progress import Progress
from flights_kit.report import Report, Timings, format_report


def _expected() -> Expected:
    # N1 flies UA1 twice on the same day: the key repeats, so keys form a multiset
    return Expected(carrier_counts={"UA": 3, "AA": 1},
                    key_counts=Counter({"2013-1-1-UA1": 2, "2013-1-2-UA1": 1, "2013-1-1-AA7": 1}),
                    tail_counts={"N1": 3, "": 1})


def _received() -> list[Received]:
    rows = [("2013-1-1-UA1", "UA", "N1", 1, 0), ("2013-1-1-UA1", "UA", "N1", 2, 1),
            ("2013-1-1-AA7", "AA", "", 1, 0), ("2013-1-2-UA1", "UA", "N1", 3, 2)]
    return [Received(key, carrier, tail, seq, ("b", 0 if tail else 1), off, f"id{i}", "c1", i)
            for i, (key, carrier, tail, seq, off) in enumerate(rows)]


def test_exact_delivery_passes():
    result = audit(_expected(), _received())
    assert result.ok, result.problems
    assert result.consumed == 4 and result.duplicate_keys_expected == 1 and result.queues_used == 2


def test_lost_message_is_reported_by_count_carrier_key_and_row():
    result = audit(_expected(), _received()[:-1])
    text = "\n".join(result.problems)
    assert "consumed 3 messages, expected 4" in text
    assert "carrier UA: consumed 2, Spark counted 3" in text
    assert "1 keys lost: ('2013-1-2-UA1', 1)" in text
    assert "1 rows (tailnum, tail_seq) never arrived" in text


def test_duplicate_of_a_repeated_key_is_caught_by_the_multiset_and_the_msg_id():
    received = _received()
    dup = received[0]
    received.append(Received(dup.key, dup.carrier, dup.tail, dup.seq, dup.queue, dup.queue_offset,
                             dup.msg_id, "c2", 99))
    text = "\n".join(audit(_expected(), received).problems)
    assert "1 keys duplicated or unexpected: ('2013-1-1-UA1', 1)" in text
    assert "1 redeliveries of the same message id: id0" in text
    assert "1 rows (tailnum, tail_seq) arrived more than once" in text


def test_out_of_order_arrival_and_storage_and_split_queues_are_reported():
    r = _received()
    late_first = [Received(x.key, x.carrier, x.tail, x.seq, x.queue, x.queue_offset, x.msg_id, x.consumer,
                           10 if x.seq == 1 and x.tail == "N1" else x.arrival) for x in r]
    assert any("delivered out of send order: N1" in p for p in audit(_expected(), late_first).problems)

    stored_wrong = [Received(x.key, x.carrier, x.tail, x.seq, x.queue, 9 if x.seq == 1 and x.tail == "N1"
                             else x.queue_offset, x.msg_id, x.consumer, x.arrival) for x in r]
    assert any("stored out of send order: N1" in p for p in audit(_expected(), stored_wrong).problems)

    split = [Received(x.key, x.carrier, x.tail, x.seq, ("b", 3) if x.seq == 2 else x.queue, x.queue_offset,
                      x.msg_id, x.consumer, x.arrival) for x in r]
    assert any("spread over several queues: N1" in p for p in audit(_expected(), split).problems)


def test_progress_plain_lines_when_piped_and_live_line_on_a_tty():
    out = io.StringIO()
    p = Progress("sent", 200, stream=out, interval_s=3600)
    p.update(50)
    p.update(60)  # within the interval: not shown
    p.finish(200)
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and lines[0].startswith("sent: 50/200 ( 25.0%)") and "200/200 (100.0%)" in lines[1]

    class Tty(io.StringIO):
        def isatty(self):
            return True

    tty = Tty()
    live = Progress("consumed", 10, stream=tty)
    live.update(3, force=True)
    live.finish(10)
    assert tty.getvalue().startswith("\r\x1b[2Kconsumed: 3/10") and tty.getvalue().endswith("\n")
    assert tty.getvalue().count("\n") == 1


def test_report_shows_counts_top_carriers_throughput_and_verdict():
    expected = _expected()
    result = audit(expected, _received())
    text = format_report(Report(rows_read=4, sent=4, expected=expected, audit=result,
                                timings=Timings(send_s=2.0, consume_s=4.0, total_s=9.0), partitions=2))
    assert "messages sent                     4" in text
    assert "UA           3 / 3         ok" in text
    assert "2 msg/s" in text and "1 msg/s" in text
    assert text.endswith("RESULT: OK - counts match, nothing lost or duplicated, per-tail order kept")
    bad = format_report(Report(4, 4, expected, audit(expected, _received()[:2]), Timings(), 2))
    assert "RESULT: FAILED" in bad and "MISMATCH" in bad


def test_failover_audit_counts_duplicates_and_fails_only_on_loss():
    from flights_kit.failover import audit_failover

    received = _received()
    first = received[0]
    # the same row once more: re-sent after the kill (new id, other queue) and redelivered (same id)
    received.append(Received(first.key, first.carrier, first.tail, first.seq, ("b2", 3), 9, "id-resent", "c2", 4))
    received.append(Received(first.key, first.carrier, first.tail, first.seq, first.queue, first.queue_offset,
                             first.msg_id, "c1", 5))
    checked = audit_failover(_expected(), received)
    assert checked.result.ok, checked.result.problems
    assert (checked.duplicate_rows, checked.redelivered_ids) == (2, 1)
    assert checked.result.carrier_counts == {"UA": 3, "AA": 1}  # distinct rows per carrier
    lost = audit_failover(_expected(), [r for r in received if r.seq != 3])
    assert not lost.result.ok
    assert "1 rows (tailnum, tail_seq) never arrived: ('N1', 3)" in lost.result.problems[0]
    assert "carrier UA: 2 distinct rows consumed, Spark counted 3" in lost.result.problems[1]


def test_streaming_stage_comparison_and_report_lines():
    from flights_kit.stream import CarrierStats, StreamRun, compare_stats

    expected = _expected()
    expected.delay_stats = {"UA": CarrierStats(3, 12.5, None), "AA": CarrierStats(1, -3.0, 4.0)}
    same = {"UA": CarrierStats(3, 12.5 + 1e-12, None), "AA": CarrierStats(1, -3.0, 4.0)}
    assert compare_stats(expected.delay_stats, same, {"UA": 3, "AA": 1}) == []
    problems = compare_stats(expected.delay_stats, {"UA": CarrierStats(3, 12.6, None)}, {"UA": 2, "AA": 1})
    assert any(p.startswith("carrier UA: streaming") for p in problems)
    assert any("carrier UA: streaming query counted 3, consumer group 2" in p for p in problems)
    assert any("carrier AA: in the batch groupBy True, in the streaming query False" in p for p in problems)

    result = audit(expected, _received())
    text = format_report(Report(4, 4, expected, result, Timings(), 2, streamed=same,
                                stream_run=StreamRun([3, 1], 2.0)))
    assert "streaming query                   4   messages in 2 micro-batches, 2 msg/s" in text
    assert "  UA           3        3        3   12.50        -  ok" in text
    assert "  AA           1        1        1   -3.00     4.00  ok" in text


class _FakeConsumer:
    """What ConsumerGroup reads of a PushConsumer: its process queues."""

    def __init__(self, queues):
        self.queues = queues

    def process_queues(self):
        return dict(self.queues)


def _group_with_queues():
    from flights_kit.consume import ConsumerGroup
    from rocketmq_sdk.consumer.process_queue import ProcessQueue
    from rocketmq_sdk.protocol.message import MessageQueue

    group = ConsumerGroup("127.0.0.1:1", "flights", "g", instances=2)
    pqs = {MessageQueue("flights", "b", i): ProcessQueue() for i in range(4)}
    other = {MessageQueue("other", "b", 0): ProcessQueue()}  # another topic's queue is not the group's concern
    mqs = sorted(pqs)
    group.consumers = [_FakeConsumer({mq: pqs[mq] for mq in mqs[:2]} | other),
                       _FakeConsumer({mq: pqs[mq] for mq in mqs[2:]})]
    return group, pqs, mqs


def test_group_is_settled_only_with_its_assignment_and_nothing_in_flight():
    from rocketmq_sdk.protocol.message import MessageExt

    group, pqs, mqs = _group_with_queues()
    assignment = group.owned_queues()
    assert assignment == {"g-1": set(mqs[:2]), "g-2": set(mqs[2:])}
    assert group.settled(assignment)
    # a pulled message not yet through the listener: a delivery may still come
    msg = MessageExt(topic="flights", queue_offset=7, body=b"x")
    pqs[mqs[3]].put_messages([msg])
    assert not group.settled(assignment)
    assert group.wait_settled(assignment, timeout_s=0.2) is False  # returns at its deadline
    pqs[mqs[3]].remove_messages([msg])
    assert group.settled(assignment)
    assert group.wait_settled(assignment, timeout_s=0.2) is True
    # a queue changed hands since the assignment: its new owner re-reads from the committed offset
    group.consumers[1].queues.pop(mqs[3])
    group.consumers[0].queues[mqs[3]] = pqs[mqs[3]]
    assert not group.settled(assignment)


def test_default_partitions_fit_two_cores_and_the_full_table():
    import flights_demo

    assert flights_demo.default_partitions(3_000) == 2
    assert flights_demo.default_partitions(100_000) == 3
    assert flights_demo.default_partitions(336_776) == 8
    assert flights_demo.default_partitions(10_000_000) == 8
