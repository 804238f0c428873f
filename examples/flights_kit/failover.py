"""The ``--failover`` variant of the flights demo: a 2m-2s-sync cluster loses one master mid-run.

With SYNC_MASTER every message acknowledged SEND_OK is on the master's slave too, so after the
master is SIGKILLed nothing acknowledged may be missing: the consumers read the dead master's
queues from its slave, the producers continue on the other master. What changes against the
plain demo: a send whose answer was lost in the kill is sent again (to the other master), so
rows may arrive twice - counted and reported, not a failure - and the producer picks the queue
(a queue per tail number cannot survive the loss of half the queues), so the per-tail order is
not checked. The checks (pure Python, unit-tested with synthetic data):

- every row ``(tailnum, tail_seq)`` arrived at least once, and nothing unexpected arrived;
- per carrier, the number of distinct rows equals Spark's count;
- duplicates (deliveries beyond the first of a row) are counted.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass

from rocketmq_sdk.protocol import fastjson
from rocketmq_sdk.protocol.codes import RequestCode, ResponseCode
from rocketmq_sdk.remoting.client import RemotingClient
from rocketmq_sdk.remoting.command import RemotingCommand
from rocketmq_sdk.remoting.loop import EventLoopThread

from .audit import AuditResult, Expected, Received, _sample


@dataclass
class FailoverAudit:
    """:class:`AuditResult` of the loss checks plus the duplicate figures."""

    result: AuditResult
    duplicate_rows: int
    redelivered_ids: int


def audit_failover(expected: Expected, received: list[Received]) -> FailoverAudit:
    """Check that every row arrived at least once (see the module docstring)."""
    rows = Counter((r.tail, r.seq) for r in received)
    distinct = {}
    for r in received:
        distinct.setdefault((r.tail, r.seq), r.carrier)
    carriers = Counter(distinct.values())
    result = AuditResult(consumed=len(received), carrier_counts=dict(carriers),
                         duplicate_keys_expected=sum(c - 1 for c in expected.key_counts.values() if c > 1),
                         per_consumer=dict(Counter(r.consumer for r in received)))
    lost = [(tail, s) for tail, want in expected.tail_counts.items() for s in range(1, want + 1)
            if (tail, s) not in rows]
    if lost:
        result.problems.append(f"{len(lost)} rows (tailnum, tail_seq) never arrived: {_sample(lost)}")
    unknown = [k for k in rows if k[0] not in expected.tail_counts or not 1 <= k[1] <= expected.tail_counts[k[0]]]
    if unknown:
        result.problems.append(f"{len(unknown)} unexpected rows arrived: {_sample(sorted(unknown))}")
    for carrier in sorted(set(expected.carrier_counts) | set(carriers)):
        want, got = expected.carrier_counts.get(carrier, 0), carriers.get(carrier, 0)
        if want != got:
            result.problems.append(f"carrier {carrier}: {got} distinct rows consumed, Spark counted {want}")
    result.tails_checked = len(expected.tail_counts)
    result.queues_used = len({r.queue for r in received})
    ids = Counter(r.msg_id for r in received)
    return FailoverAudit(result, sum(c - 1 for c in rows.values() if c > 1),
                         sum(c - 1 for c in ids.values() if c > 1))


async def _slaves_know(slave_addrs: list[str], topic: str, timeout_s: float) -> None:
    client = RemotingClient()
    try:
        deadline = time.monotonic() + timeout_s
        pending = list(slave_addrs)
        while pending:
            addr = pending[0]
            resp = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG), 3000)
            if resp.code == ResponseCode.SUCCESS and topic in (fastjson.loads(resp.body).get("topicConfigTable") or {}):
                pending.pop(0)
                continue
            if time.monotonic() > deadline:
                raise TimeoutError(f"slave {addr} did not get topic {topic} from its master in {timeout_s} s")
            await asyncio.sleep(0.2)  # polling the slave, not synchronising
    finally:
        await client.close()


def wait_slaves_know_topic(slave_addrs: list[str], topic: str, timeout_s: float = 30.0) -> None:
    """Wait until every slave has ``topic`` (copied by SlaveSynchronize): pulls from a slave
    for a topic it does not know answer TOPIC_NOT_EXIST.

    Raises:
        TimeoutError: a slave did not get the topic in time.
    """
    loop = EventLoopThread("flights-failover")
    try:
        loop.run(_slaves_know(slave_addrs, topic, timeout_s), timeout_s + 10)
    finally:
        loop.stop()
