"""Regenerate the console screenshots in docs/console/ (shown in docs/console.md).

Runs the browser scenario of tests/console/cases_browser.py (Django's test runner, headless
Debian chromium + chromium-driver, the embedded cluster) with ``CONSOLE_SCREENSHOTS`` pointing at
docs/console/::

    .venv/bin/python docs/tools/console_screenshots.py
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def main() -> int:
    out = REPO / "docs" / "console"
    out.mkdir(exist_ok=True)
    env = {**os.environ, "CONSOLE_SCREENSHOTS": str(out), "TZ": "UTC"}
    cmd = [sys.executable, "-m", "django", "test", "tests.console.cases_browser", "--settings=tests.console.settings",
           "--noinput"]
    return subprocess.call(cmd, cwd=REPO, env=env)


if __name__ == "__main__":
    sys.exit(main())
