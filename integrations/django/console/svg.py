"""Server-side SVG pictures (no JavaScript, nothing downloaded): line charts of sampled series
and the trace timeline of a message. Every text is escaped."""

from __future__ import annotations

from datetime import UTC, datetime
from html import escape

from django.utils import timezone
from rocketmq_sdk.trace import TraceGraph

__all__ = ["axis_ticks", "line_chart", "local_time", "trace_timeline"]

PALETTE = ("#2563eb", "#dc2626", "#16a34a", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#4b5563")


def local_time(epoch_ms: float, fmt: str = "%Y-%m-%d %H:%M:%S") -> str:
    """``epoch_ms`` in the project's ``TIME_ZONE`` (Django's current time zone)."""
    moment = datetime.fromtimestamp(epoch_ms / 1000, tz=UTC)
    return timezone.localtime(moment).strftime(fmt)


def _fmt(v: float) -> str:
    return f"{v:.0f}" if v >= 100 or v == int(v) else f"{v:.2f}"


def line_chart(title: str, series: dict[str, list[tuple[float, float]]], *, width: int = 640,
               height: int = 220, unit: str = "") -> str:
    """An SVG line chart: one line per named series of ``(epoch s, value)`` points."""
    left, right, top, bottom = 56, 170, 28, 28
    pw, ph = width - left - right, height - top - bottom
    pts = [p for s in series.values() for p in s]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="100%" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">',
           f'<text x="{left}" y="18" class="chart-title">{escape(title)}</text>',
           f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" class="plot"/>']
    if not pts:
        out.append(f'<text x="{left + pw / 2}" y="{top + ph / 2}" text-anchor="middle" class="muted">'
                   'no samples yet</text></svg>')
        return "".join(out)
    t0, t1 = min(p[0] for p in pts), max(p[0] for p in pts)
    vmax = max(max(p[1] for p in pts), 1.0)
    span = max(t1 - t0, 1.0)

    def xy(t: float, v: float) -> tuple[float, float]:
        return left + (t - t0) / span * pw, top + ph - v / vmax * ph

    for i in range(5):  # horizontal grid and labels
        v = vmax * i / 4
        y = top + ph - ph * i / 4
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + pw}" y2="{y:.1f}" class="grid"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" class="axis">{_fmt(v)}</text>')
    for t, anchor, fmt in ((t0, "start", "%H:%M:%S"), (t1, "end", "%H:%M:%S %Z")):
        out.append(f'<text x="{xy(t, 0)[0]:.1f}" y="{height - 8}" text-anchor="{anchor}" class="axis">'
                   f'{local_time(t * 1000, fmt)}</text>')
    for i, (name, points) in enumerate(sorted(series.items())):
        color = PALETTE[i % len(PALETTE)]
        coords = " ".join(f"{x:.1f},{y:.1f}" for x, y in (xy(t, v) for t, v in points))
        if len(points) == 1:
            x, y = xy(*points[0])
            out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{color}"/>')
        else:
            out.append(f'<polyline points="{coords}" fill="none" stroke="{color}" stroke-width="2" '
                       f'data-series="{escape(name)}"/>')
        last = points[-1][1] if points else 0
        ly = top + 12 + i * 16
        out.append(f'<rect x="{left + pw + 10}" y="{ly - 8}" width="10" height="10" fill="{color}"/>')
        out.append(f'<text x="{left + pw + 24}" y="{ly + 1}" class="legend">{escape(name[:18])} '
                   f'{_fmt(last)}{escape(unit)}</text>')
    out.append("</svg>")
    return "".join(out)


def axis_ticks(span_ms: int, intervals: int = 4) -> list[int]:
    """Distinct whole-ms tick values from 0 to ``span_ms``: at most ``intervals`` + 1 of them,
    fewer when the span is shorter (a 1 ms trace gets +0 and +1, not +0 three times)."""
    n = max(1, min(intervals, span_ms))
    return sorted({round(span_ms * i / n) for i in range(n + 1)})


def trace_timeline(graph: TraceGraph, *, width: int = 1180) -> str:
    """The trace of one message as a Gantt-like SVG: a row for the send (``Pub``), one per
    transaction end, one per delivery to each consumer group (green success, red failure, grey
    unknown), on a common time axis in ms from the send."""
    rows: list[tuple[str, int, int, str, str]] = []  # label, begin, end, css class, caption
    p = graph.producer
    if p is not None:
        rows.append((f"send · {p.group_name}", p.time_stamp, p.time_stamp + max(p.cost_time, 0),
                     "ok" if p.success else "fail", f"{p.cost_time} ms · {p.store_host}"))
    for t in graph.transactions:
        rows.append((f"end tx · {t.group_name}", t.time_stamp, t.time_stamp, "tx", t.transaction_state or ""))
    for group, nodes in sorted(graph.consumers.items()):
        for n in nodes:
            cls = {"SUCCESS": "ok", "FAILED": "fail"}.get(n.status, "unknown")
            rows.append((f"consume · {group}" + (f" · retry {n.retry_times}" if n.retry_times > 0 else ""),
                         n.begin, n.end, cls, f"{n.status} · {n.cost_time} ms"
                         + (f" · {n.client_host}" if n.client_host else "")))
    left, right, row_h, top = 250, 230, 30, 34
    height = top + row_h * max(1, len(rows)) + 30
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="timeline" width="100%" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="trace of {escape(graph.msg_id)}">']
    if not rows:
        out.append(f'<text x="20" y="{top + 10}" class="muted">no trace records found</text></svg>')
        return "".join(out)
    t0, t1 = graph.span()
    span = max(t1 - t0, 1)
    pw = width - left - right
    for ms in axis_ticks(span):
        x = left + pw * ms / span
        out.append(f'<line x1="{x:.1f}" y1="{top - 6}" x2="{x:.1f}" y2="{height - 24}" class="grid"/>')
        out.append(f'<text x="{x:.1f}" y="{top - 12}" text-anchor="middle" class="axis">+{ms} ms</text>')
    for i, (label, b, e, cls, caption) in enumerate(rows):
        y = top + i * row_h
        x0 = left + (b - t0) / span * pw
        w = max(4.0, (max(e, b) - b) / span * pw)
        out.append(f'<text x="{left - 8}" y="{y + 19}" text-anchor="end" class="label">{escape(label)}</text>')
        out.append(f'<rect x="{x0:.1f}" y="{y + 6}" width="{w:.1f}" height="18" rx="3" class="bar {cls}">'
                   f'<title>{escape(label)}: {escape(caption)}</title></rect>')
        out.append(f'<text x="{min(x0 + w + 6, left + pw + 6):.1f}" y="{y + 19}" class="caption">{escape(caption)}</text>')
    out.append(f'<text x="{left}" y="{height - 6}" class="axis">{local_time(t0)} {timezone.get_current_timezone_name()}'
               "</text></svg>")
    return "".join(out)
