"""The demo's closing report (plain text)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .audit import AuditResult, Expected


@dataclass
class Timings:
    """Wall times in seconds of the demo's phases, and first/last delivery times."""

    cluster_start_s: float = 0.0
    load_s: float = 0.0
    send_s: float = 0.0
    consume_s: float = 0.0
    drain_after_send_s: float = 0.0
    total_s: float = 0.0


@dataclass
class Report:
    rows_read: int
    sent: int
    expected: Expected
    audit: AuditResult
    timings: Timings
    partitions: int
    notes: list[str] = field(default_factory=list)
    #: the RESULT line when the audit passed (default: the plain demo's exact-once verdict)
    ok_verdict: str = "RESULT: OK - counts match, nothing lost or duplicated, per-tail order kept"


def _rate(n: int, seconds: float) -> str:
    return f"{n / seconds:,.0f} msg/s" if seconds > 0 else "n/a"


def format_report(r: Report, top: int = 5) -> str:
    """The report as lines of text: counts, top carriers, throughput, timings, verdict."""
    a, t = r.audit, r.timings
    lines = [
        "== RocketMQ flights demo ==",
        f"rows read (Spark)        {r.rows_read:>10,}",
        f"messages sent            {r.sent:>10,}   ({r.partitions} Spark partitions)",
        f"messages consumed        {a.consumed:>10,}   "
        + ", ".join(f"{name}: {n:,}" for name, n in sorted(a.per_consumer.items())),
        f"queues used              {a.queues_used:>10}   tail numbers checked: {a.tails_checked:,}",
        f"rows repeating a key     {a.duplicate_keys_expected:>10}   (same day, carrier and flight number as another row)",
        "top carriers (consumed / Spark count):",
    ]
    ranked = sorted(r.expected.carrier_counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    for carrier, want in ranked:
        got = a.carrier_counts.get(carrier, 0)
        lines.append(f"  {carrier:<4} {got:>9,} / {want:<9,} {'ok' if got == want else 'MISMATCH'}")
    lines += [
        f"send throughput          {_rate(r.sent, t.send_s):>14}   ({t.send_s:.1f} s Spark job)",
        f"consume throughput       {_rate(a.consumed, t.consume_s):>14}   "
        f"({t.consume_s:.1f} s consuming; last message {t.drain_after_send_s:.1f} s after the send ended)",
        f"elapsed                  cluster start {t.cluster_start_s:.1f} s, load {t.load_s:.1f} s, "
        f"total {t.total_s:.1f} s",
    ]
    lines += [f"note: {n}" for n in r.notes]
    if a.ok:
        lines.append(r.ok_verdict)
    else:
        lines.append("RESULT: FAILED")
        lines += [f"  - {p}" for p in a.problems]
    return "\n".join(lines)
