"""Runs the console's Django cases with Django's own test runner in a child process (its own
settings, in-memory database and live server, apart from the rest of the suite).

* ``cases_views``: the views against the embedded cluster (test client).
* ``cases_browser``: the scenario in a real headless Chromium (Debian's ``chromium`` and
  ``chromium-driver``); skipped with one line when they are not installed.
"""

from __future__ import annotations

import http.cookiejar
import os
import re
import shutil
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
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
    assert ran == 19, out[-4000:]


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


class Browser:
    """A cookie-keeping HTTP client from the standard library (the test needs nothing beyond
    Django): ``get``/``post`` follow redirects and return (status, final URL, text)."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def cookie(self, name: str) -> str:
        return next(c.value for c in self.jar if c.name == name)

    def _open(self, req: urllib.request.Request) -> tuple[int, str, str]:
        try:
            with self.opener.open(req, timeout=30) as resp:
                return resp.status, resp.geturl(), resp.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as err:
            with err:
                return err.code, err.geturl(), err.read().decode("utf-8", "replace")

    def get(self, path: str) -> tuple[int, str, str]:
        return self._open(urllib.request.Request(self.base + path))

    def post(self, path: str, data: dict[str, str]) -> tuple[int, str, str]:
        body = urllib.parse.urlencode({**data, "csrfmiddlewaretoken": self.cookie("csrftoken")}).encode()
        return self._open(urllib.request.Request(self.base + path, data=body, headers={"Referer": self.base}))

    def login(self, user: str, password: str, **extra: str) -> tuple[int, str, str]:
        self.get("login/")
        return self.post("login/", {"username": user, "password": password, **extra})


def test_standalone_serves_on_loopback_with_login_and_read_only_account() -> None:
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
            viewer = Browser(base)
            assert viewer.get("")[1] == base + "login/?next=/"
            status, landed, page = viewer.login("viewer", "ro-secret", next="/")
            assert (status, landed) == (200, base)
            assert "broker-a" in page and "read-only" in page
            denied = viewer.post("topics/create/", {"topic": "X", "cluster": "DefaultCluster"})
            assert denied[0] == 403
            # the operator logs in from the login page itself (no "next"): lands on the cluster page
            op = Browser(base)
            status, landed, page = op.login("admin", "op-secret")
            assert (status, landed) == (200, base) and "operator" in page
        finally:
            proc.terminate()
            proc.wait(30)
            proc.stderr.close()
