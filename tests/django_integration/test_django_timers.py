"""Part 9: timer messages (``deliver_time_ms`` / ``delay_ms``) from the template and the
on-commit publishers: ``cases_timers`` run by Django's test runner in a child process, and the
4.x rounding table."""

from __future__ import annotations

import os
import re
import subprocess

import pytest
from rocketmq_sdk.protocol.delay_levels import delay_level_for

from django_integration.conftest import PY, REPO, child_env


@pytest.mark.parametrize("delay_ms,level", [(-5, 0), (0, 0), (1, 1), (800, 1), (1000, 1), (1001, 2), (4000, 2),
                                            (45_000, 5), (7_200_000, 18), (259_200_000, 18)])
def test_a_timer_on_a_4x_broker_gets_the_nearest_delay_level_not_shorter(delay_ms, level):
    assert delay_level_for(delay_ms) == level


def test_timer_cases_with_djangos_runner(tmp_path):
    # the child's runner creates and drops its own test database: never this session's (on
    # PostgreSQL both would be "test_rocketmq_tests", dropped under pytest-django's feet)
    db = f"rocketmq_timers_{os.getpid()}" if os.environ.get("ROCKETMQ_TEST_DATABASE") == "postgresql" \
        else str(tmp_path / "timers.sqlite3")
    proc = subprocess.run([PY, "-m", "django", "test", "django_integration.cases_timers", "--noinput", "-v", "2"],
                          cwd=REPO / "tests", env=child_env(ROCKETMQ_TEST_DB=db), capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-8000:]
    ran = re.search(r"Ran (\d+) tests?", out)
    assert ran and int(ran.group(1)) == 4 and re.search(r"^OK", out, re.M), out[-4000:]
