"""Runs the console's Django cases with Django's own test runner in a child process (its own
settings, in-memory database and live server, apart from the rest of the suite).

* ``cases_views``: the views against the embedded cluster (test client).
* ``cases_browser``: the scenario in a real headless Chromium (Debian's ``chromium`` and
  ``chromium-driver``); skipped with one line when they are not installed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytest.importorskip("django", reason="the console needs Django (pip install -e '.[console]')")


def run_django_tests(label: str, timeout_s: float, env: dict | None = None) -> tuple[int, str]:
    cmd = [sys.executable, "-m", "django", "test", label, "--settings=tests.console.settings", "-v", "2",
           "--noinput"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout_s,
                          env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)
    out = proc.stdout + proc.stderr
    ran = re.search(r"Ran (\d+) tests?", out)
    assert proc.returncode == 0, out[-12000:]
    assert ran and re.search(r"^OK", out, re.M), out[-4000:]
    return int(ran.group(1)), out


def test_console_views_with_djangos_runner() -> None:
    ran, out = run_django_tests("tests.console.cases_views", 600)
    assert ran == 15, out[-4000:]


def browser_missing() -> str | None:
    for path in ("/usr/bin/chromium", "/usr/bin/chromedriver"):
        if not os.path.exists(path):
            return f"{path} not installed (apt-get install chromium chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium not installed"
    return None


@pytest.mark.skipif(browser_missing() is not None, reason=f"browser tests skipped: {browser_missing()}")
def test_console_in_headless_chromium() -> None:
    assert shutil.which("chromium") or os.path.exists("/usr/bin/chromium")
    ran, out = run_django_tests("tests.console.cases_browser", 600)
    assert ran >= 1 and "skipped" not in out.split("Ran")[-1], out[-4000:]


def test_standalone_refuses_a_non_loopback_address_without_allow_remote() -> None:
    proc = subprocess.run([sys.executable, "-m", "rocketmq_sdk.integrations.django.console", "--namesrv",
                           "127.0.0.1:9876", "--host", "0.0.0.0"], capture_output=True, text=True, timeout=60,
                          cwd=REPO, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2
    assert "not a loopback address; add --allow-remote" in proc.stderr


def test_standalone_serves_on_loopback_with_login_and_read_only_account() -> None:
    requests = pytest.importorskip("requests")
    from rocketmq_broker import embedded

    with embedded.start_cluster(("broker-a",)) as cluster:
        env = {**os.environ, "ROCKETMQ_CONSOLE_PASSWORD": "op-secret", "ROCKETMQ_CONSOLE_READONLY_PASSWORD": "ro-secret"}
        proc = subprocess.Popen([sys.executable, "-m", "rocketmq_sdk.integrations.django.console", "--namesrv",
                                 cluster.namesrv_addr, "--port", "0", "--read-only-user", "viewer"],
                                stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                                text=True, env=env, cwd=REPO)
        try:
            line = proc.stderr.readline()  # blocks until the announcement (or the process ends)
            m = re.search(r"http://(127\.0\.0\.1):(\d+)/", line)
            assert m, f"no announcement: {line!r}"
            base = m.group(0)
            s = requests.Session()
            assert s.get(base, timeout=30).url == base + "login/?next=/"
            s.post(base + "login/", data={"username": "viewer", "password": "ro-secret", "next": "/",
                                          "csrfmiddlewaretoken": s.cookies["csrftoken"]},
                   headers={"Referer": base}, timeout=30)
            page = s.get(base, timeout=30)
            assert "broker-a" in page.text and "read-only" in page.text
            denied = s.post(base + "topics/create/", data={"topic": "X", "cluster": "DefaultCluster",
                                                           "csrfmiddlewaretoken": s.cookies["csrftoken"]},
                            headers={"Referer": base}, timeout=30)
            assert denied.status_code == 403
            s2 = requests.Session()
            s2.get(base + "login/", timeout=30)
            s2.post(base + "login/", data={"username": "admin", "password": "op-secret", "next": "/",
                                           "csrfmiddlewaretoken": s2.cookies["csrftoken"]},
                    headers={"Referer": base}, timeout=30)
            assert "operator" in s2.get(base, timeout=30).text
        finally:
            proc.terminate()
            proc.wait(30)
            proc.stderr.close()


def test_console_consume_mode_on_5x_brokers_with_djangos_runner() -> None:
    ran, out = run_django_tests("tests.console.cases_rmq5", 300)
    assert ran == 1, out[-4000:]
