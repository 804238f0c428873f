"""Sync scenarios run in alternating rounds: totals over the rounds, each round in the notes."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import run  # noqa: E402 - benchmarks/run.py


def _round(count: int, elapsed: float, cpu: float, broker: float) -> dict:
    return run.derive({"count": count, "errors": 0, "elapsed_s": elapsed, "cpu_s": cpu, "process_cpu_s": cpu + 0.1,
                       "process_wall_s": elapsed + 1, "broker_cpu_s": broker, "settle_s": 0.0})


def test_rounds_merge_into_totals_not_a_mean_of_rates() -> None:
    fast, slow = _round(9_000, 1.0, 0.36, 0.6), _round(3_000, 1.0, 0.18, 0.3)
    merged = run.merge_rounds([fast, slow])
    assert merged["count"] == 12_000 and merged["elapsed_s"] == 2.0
    assert merged["msgs_per_s"] == 6_000  # 12,000 in 2 s (the mean of the rates would be the same here)
    assert abs(merged["client_cpu_us_per_msg"] - 0.54 / 12_000 * 1e6) < 1e-9  # 45 µs, not (40 + 60) / 2
    assert abs(merged["broker_cpu_us_per_msg"] - 75.0) < 1e-9
    assert [r["msgs_per_s"] for r in merged["rounds"]] == [9_000, 3_000]


def test_one_round_is_kept_as_is_and_a_failed_round_fails_the_scenario() -> None:
    one = _round(5_000, 1.0, 0.2, 0.4)
    assert run.merge_rounds([one]) is one
    failed = run.merge_rounds([one, {"error": "no result (exit 1)"}])
    assert failed["error"] == "no result (exit 1)" and "msgs_per_s" not in failed


def test_plan_runs_sync_in_rounds_and_the_report_lists_them() -> None:
    p = run.plan(quick=False)
    assert run.rounds_of("sync", p) == 3 and run.rounds_of("async", p) == 1
    assert run.scenario_args("sync1", 100, p)[1]["max_seconds"] == p["sync_seconds"]
    assert run.scenario_args("oneway", 100, p)[1]["max_seconds"] == p["seconds"] != p["sync_seconds"]
    assert run.rounds_of("sync", run.plan(quick=True)) == 1
    sdk = run.merge_rounds([_round(8_000, 1.0, 0.36, 0.6), _round(6_000, 1.0, 0.3, 0.5)])
    cpp = run.merge_rounds([_round(4_000, 1.0, 0.7, 0.4), _round(2_000, 1.0, 0.4, 0.2)])
    (note,) = run.round_notes({("ASYNC_FLUSH", 100, "sync1"): {"sdk": sdk, "cpp": cpp}})
    assert "SDK 8,000 msg/s (45.0 µs), 6,000 msg/s (50.0 µs)" in note
    assert note.endswith("ratio per round 2.00, 3.00")


def test_broker_line_states_the_busy_poll_setting() -> None:
    assert run.broker_line(None) == []  # results files from before the setting existed
    (on,) = run.broker_line({"busy_poll_us": 100})
    assert "busy polling up to 100 µs" in on
    (off,) = run.broker_line({"busy_poll_us": 0})
    assert "sleeping between reads" in off
