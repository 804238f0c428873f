"""examples/celery_app: its demo (embedded broker, a real prefork worker, tasks, chain, group,
a retried task) exits 0."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_example_demo_runs():
    # run as a user would: without the DJANGO_SETTINGS_MODULE the Django tests of this run set
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    out = subprocess.run([sys.executable, "-m", "celery_app.demo"], cwd=EXAMPLES, capture_output=True, text=True,
                         timeout=240, env=env)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    assert "add(2, 3)  -> 5" in out.stdout
    assert "retry      -> 'order 42 notified'" in out.stdout
    assert "MISMATCH" not in out.stdout
