"""The demo's closing report (plain text)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .audit import AuditResult, Expected
from .stream import CarrierStats, StreamRun


@dataclass
class Timings:
    """Wall times in seconds of the demo's phases, and first/last delivery times."""

    cluster_start_s: float = 0.0
    #: starting the Spark session (the JVM), part of ``load_s``; it runs while the cluster starts
    spark_start_s: float = 0.0
    #: Spark start, loading the flights and Spark's expected figures
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
    streamed: dict[str, CarrierStats] | None = None
    stream_run: StreamRun | None = None


def _mins(value: float | None) -> str:
    return f"{'-':>6}" if value is None else f"{value:6.2f}"


def _stream_lines(r: Report) -> list[str]:
    """Per-carrier delay statistics of the streaming query beside the group's tallies."""
    run = r.stream_run
    lines = [f"streaming query          {run.rows:>10,}   messages in {len(run.batch_rows)} micro-batch{'' if len(run.batch_rows) == 1 else 'es'}, "
             f"{_rate(run.rows, run.elapsed_s)} ({run.elapsed_s:.1f} s)",
             "delays by carrier (streaming query; consumer group and Spark batch groupBy beside):",
             "  carrier   group   stream    batch  avg dep  avg arr (min)"]
    for carrier in sorted(r.expected.delay_stats, key=lambda c: (-r.expected.delay_stats[c].flights, c)):
        want, got = r.expected.delay_stats[carrier], r.streamed.get(carrier)
        group = r.audit.carrier_counts.get(carrier, 0)
        if got is None:
            lines.append(f"  {carrier:<4} {group:>9,} {'-':>8} {want.flights:>8,}  MISSING")
            continue
        ok = group == got.flights == want.flights and _mins(got.avg_dep_delay) == _mins(want.avg_dep_delay) \
            and _mins(got.avg_arr_delay) == _mins(want.avg_arr_delay)
        lines.append(f"  {carrier:<4} {group:>9,} {got.flights:>8,} {want.flights:>8,}  {_mins(got.avg_dep_delay)}"
                     f"   {_mins(got.avg_arr_delay)}  {'ok' if ok else 'MISMATCH'}")
    return lines


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
        f"elapsed                  cluster start {t.cluster_start_s:.1f} s, load {t.load_s:.1f} s "
        f"(Spark start {t.spark_start_s:.1f} s), "
        f"total {t.total_s:.1f} s",
    ]
    if r.streamed is not None and r.stream_run is not None:
        lines += _stream_lines(r)
    lines += [f"note: {n}" for n in r.notes]
    if a.ok:
        lines.append(r.ok_verdict)
    else:
        lines.append("RESULT: FAILED")
        lines += [f"  - {p}" for p in a.problems]
    return "\n".join(lines)
