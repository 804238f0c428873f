"""Checking what the consumer group received against what Spark sent.

Pure Python over plain records, so it is unit-tested with synthetic data. The checks:

- per-carrier tallies equal Spark's ``groupBy("carrier").count()``;
- the multiset of message keys equals the expected one (keys are not unique in the data:
  a flight number can fly twice a day, so lost and duplicated keys are counted, not just
  compared as sets);
- every row, identified by ``(tailnum, tail_seq)``, arrived exactly once, and no message id
  (``UNIQ_KEY``) arrived twice;
- each tail number's messages sit in one queue, stored in send order (``tail_seq`` grows with
  the queue offset), and reached the listener in that order.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Received:
    """One delivered message, as the listener saw it.

    Attributes:
        key: the message key (``KEYS`` property).
        carrier: the tag.
        tail: the tail number from the body (``""`` for none).
        seq: ``tail_seq`` from the body (1-based order of the aircraft's flights).
        queue: ``(broker_name, queue_id)``.
        queue_offset: the message's offset in its queue.
        msg_id: the client message id (``UNIQ_KEY``).
        consumer: name of the consumer instance that received it.
        arrival: global arrival index (0, 1, 2... in listener call order).
    """

    key: str
    carrier: str
    tail: str
    seq: int
    queue: tuple[str, int]
    queue_offset: int
    msg_id: str
    consumer: str
    arrival: int


@dataclass
class Expected:
    """What Spark sent: per-carrier counts, key multiset, rows per tail number, and per-carrier
    delay statistics (``carrier -> flights_kit.stream.CarrierStats``, from Spark's batch
    ``groupBy``)."""

    carrier_counts: dict[str, int]
    key_counts: Counter
    tail_counts: dict[str, int]
    delay_stats: dict = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.carrier_counts.values())


@dataclass
class AuditResult:
    """Findings; ``ok`` is True when ``problems`` is empty."""

    consumed: int
    carrier_counts: dict[str, int]
    problems: list[str] = field(default_factory=list)
    duplicate_keys_expected: int = 0
    tails_checked: int = 0
    queues_used: int = 0
    per_consumer: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems


def _sample(items: Iterable[object], n: int = 5) -> str:
    items = list(items)
    more = f" (+{len(items) - n} more)" if len(items) > n else ""
    return ", ".join(map(str, items[:n])) + more


def _counter_diff(name: str, expected: Mapping[str, int], got: Mapping[str, int]) -> list[str]:
    problems = []
    lost = Counter(expected) - Counter(got)
    extra = Counter(got) - Counter(expected)
    if lost:
        problems.append(f"{sum(lost.values())} {name} lost: {_sample(sorted(lost.items()))}")
    if extra:
        problems.append(f"{sum(extra.values())} {name} duplicated or unexpected: {_sample(sorted(extra.items()))}")
    return problems


def audit(expected: Expected, received: list[Received]) -> AuditResult:
    """Compare ``received`` with ``expected`` (see the module docstring for the checks)."""
    carriers = Counter(r.carrier for r in received)
    result = AuditResult(consumed=len(received), carrier_counts=dict(carriers),
                         duplicate_keys_expected=sum(c - 1 for c in expected.key_counts.values() if c > 1),
                         per_consumer=dict(Counter(r.consumer for r in received)))
    problems = result.problems
    if len(received) != expected.total:
        problems.append(f"consumed {len(received)} messages, expected {expected.total}")
    for carrier in sorted(set(expected.carrier_counts) | set(carriers)):
        want, got = expected.carrier_counts.get(carrier, 0), carriers.get(carrier, 0)
        if want != got:
            problems.append(f"carrier {carrier}: consumed {got}, Spark counted {want}")
    problems += _counter_diff("keys", expected.key_counts, Counter(r.key for r in received))

    ids = Counter(r.msg_id for r in received)
    redelivered = {i: c for i, c in ids.items() if c > 1}
    if redelivered:
        problems.append(f"{sum(c - 1 for c in redelivered.values())} redeliveries of the same message id: "
                        f"{_sample(sorted(redelivered))}")

    by_tail: dict[str, list[Received]] = defaultdict(list)
    for r in received:
        by_tail[r.tail].append(r)
    rows_lost = rows_dup = 0
    split_tails, store_disorder, arrival_disorder = [], [], []
    for tail, want in expected.tail_counts.items():
        got = by_tail.get(tail, [])
        seqs = Counter(r.seq for r in got)
        rows_lost += sum(1 for s in range(1, want + 1) if s not in seqs)
        rows_dup += sum(c - 1 for c in seqs.values() if c > 1) + sum(1 for s in seqs if not 1 <= s <= want)
        if len({r.queue for r in got}) > 1:
            split_tails.append(tail)
            continue
        by_offset = [r.seq for r in sorted(got, key=lambda r: r.queue_offset)]
        if any(a >= b for a, b in zip(by_offset, by_offset[1:], strict=False)):
            store_disorder.append(tail)
        by_arrival = [r.seq for r in sorted(got, key=lambda r: r.arrival)]
        if any(a >= b for a, b in zip(by_arrival, by_arrival[1:], strict=False)):
            arrival_disorder.append(tail)
    unknown_tails = set(by_tail) - set(expected.tail_counts)
    if unknown_tails:
        problems.append(f"messages for unexpected tail numbers: {_sample(sorted(unknown_tails))}")
    if rows_lost:
        problems.append(f"{rows_lost} rows (tailnum, tail_seq) never arrived")
    if rows_dup:
        problems.append(f"{rows_dup} rows (tailnum, tail_seq) arrived more than once")
    if split_tails:
        problems.append(f"{len(split_tails)} tail numbers spread over several queues: {_sample(split_tails)}")
    if store_disorder:
        problems.append(f"{len(store_disorder)} tail numbers stored out of send order: {_sample(store_disorder)}")
    if arrival_disorder:
        problems.append(f"{len(arrival_disorder)} tail numbers delivered out of send order: "
                        f"{_sample(arrival_disorder)}")
    result.tails_checked = len(expected.tail_counts)
    result.queues_used = len({r.queue for r in received})
    return result
