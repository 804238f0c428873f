"""Runs the console's Django cases with Django's own test runner in a child process (its own
settings, in-memory database and live server, apart from the rest of the suite).

* ``cases_views``: the views against the embedded cluster (test client).
* ``cases_browser``: the scenario in a real headless Chromium (Debian's ``chromium`` and
  ``chromium-driver``); skipped with one line when they are not installed.
"""

from __future__ import annotations

import http.client
import http.cookiejar
import os
import queue
import re
import shutil
import ssl
import subprocess
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.pki import server_pki

REPO = Path(__file__).resolve().parents[2]
pytest.importorskip("django", reason="the console needs Django (pip install -e '.[django]')")


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
    assert ran == 29, out[-4000:]


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


def test_standalone_sets_the_webhook_and_acl_keys_and_refuses_bad_ones(monkeypatch, capsys) -> None:
    """A stand-alone operator can have lag alarms POSTed to a webhook and sign for an ACL
    cluster (both were settings of an embedding project only); the secret comes from the
    environment, never the command line."""
    from rocketmq_sdk.integrations.django.console import standalone

    monkeypatch.setenv("ROCKETMQ_CONSOLE_SECRET_KEY", "s3cret-key")
    args = standalone.parse_args(["--namesrv", "127.0.0.1:9876", "--webhook-url", "https://hooks.example/alarm",
                                  "--access-key", "console-admin"])
    assert standalone.console_settings(args) == {
        "TRACE_TOPIC": "RMQ_SYS_TRACE_TOPIC", "SAMPLE_INTERVAL_S": 10.0, "WEBHOOK_URL": "https://hooks.example/alarm",
        "ACCESS_KEY": "console-admin", "SECRET_KEY": "s3cret-key"}
    for bad, reason in ((["--webhook-url", "file:///etc/passwd"], "is not an http(s) URL"),
                        (["--access-key", "console-admin"], "needs its secret key in $ROCKETMQ_CONSOLE_SECRET_KEY")):
        if "--access-key" in bad:
            monkeypatch.delenv("ROCKETMQ_CONSOLE_SECRET_KEY")
        with pytest.raises(SystemExit) as exited:
            standalone.parse_args(["--namesrv", "127.0.0.1:9876", *bad])
        assert exited.value.code == 2 and reason in capsys.readouterr().err


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


class AuditLines:
    """The audit logger's lines on a server's stderr, read by a thread; :meth:`next` waits for
    the next one up to a deadline (other lines are skipped)."""

    def __init__(self, stream) -> None:
        self.lines: queue.Queue[str] = queue.Queue()
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream) -> None:
        for line in iter(stream.readline, ""):
            if ".console.audit " in line:
                self.lines.put(line.rstrip("\n"))

    def next(self, timeout_s: float = 30.0) -> str:
        try:
            return self.lines.get(timeout=timeout_s)
        except queue.Empty:
            raise AssertionError(f"no audit line within {timeout_s} s") from None


def test_standalone_serves_on_loopback_with_login_and_read_only_account(tmp_path) -> None:
    from rocketmq_broker import embedded

    tmp = tmp_path / "tmp"  # where the server's temporary user database goes
    tmp.mkdir()
    with embedded.start_cluster(("broker-a",)) as cluster:
        env = {**os.environ, "ROCKETMQ_CONSOLE_PASSWORD": "op-secret", "ROCKETMQ_CONSOLE_READONLY_PASSWORD": "ro-secret",
               "TMPDIR": str(tmp)}
        proc = subprocess.Popen([sys.executable, "-m", "rocketmq_sdk.integrations.django.console", "--namesrv",
                                 cluster.namesrv_addr, "--port", "0", "--read-only-user", "viewer"],
                                stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                                text=True, env=env, cwd=REPO)
        audits: AuditLines | None = None
        try:
            line = proc.stderr.readline()  # blocks until the announcement (or the process ends)
            m = re.search(r"http://(127\.0\.0\.1):(\d+)/", line)
            assert m, f"no announcement: {line!r}"
            base = m.group(0)
            audits = AuditLines(proc.stderr)  # reads to the end of stderr from here on
            viewer = Browser(base)
            assert viewer.get("")[1] == base + "login/?next=/"
            status, landed, page = viewer.login("viewer", "ro-secret", next="/")
            assert (status, landed) == (200, base)
            assert "broker-a" in page and "read-only" in page
            denied = viewer.post("topics/create/", {"topic": "X", "cluster": "DefaultCluster"})
            assert denied[0] == 403
            # audit lines carry a timestamp, refusals included (written before each answer, so
            # already there; the server's request lines in between are skipped)
            audit = audits.next()
            assert re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO rocketmq_sdk\.integrations\.django\."
                            r"console\.audit user=viewer addr=127\.0\.0\.1 action=login .*outcome=ok$", audit), audit
            audit = audits.next()
            assert re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} WARNING .*audit user=viewer .*action=create/update "
                            r"topic .*outcome=refused: no operate_console permission \(403\)$", audit), audit
            # the operator logs in from the login page itself (no "next"): lands on the cluster page
            op = Browser(base)
            status, landed, page = op.login("admin", "op-secret")
            assert (status, landed) == (200, base) and "operator" in page
            assert [p.name for p in tmp.iterdir() if p.name.startswith("rocketmq-console-")]
        finally:
            proc.terminate()  # SIGTERM, as a service manager stops it
            proc.wait(30)
            if audits is not None:
                audits.thread.join(10)  # stderr at its end: the reader is done with it
            proc.stderr.close()
        # a clean exit: the temporary database (password hashes, audit-relevant state) is gone
        # (SIGTERM used to end the process before its clean-up: one directory left per run)
        assert proc.returncode == 0
        assert list(tmp.iterdir()) == []


def test_standalone_serves_https_with_certfile_and_keyfile(tmp_path) -> None:
    pki = server_pki(tmp_path, ("127.0.0.1",))
    cert_path, key_path = pki.cert_path, pki.key_path
    proc = subprocess.Popen([sys.executable, "-m", "rocketmq_sdk.integrations.django.console", "--namesrv",
                             "127.0.0.1:1", "--port", "0", "--certfile", str(cert_path), "--keyfile", str(key_path)],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True,
                            env={**os.environ, "ROCKETMQ_CONSOLE_PASSWORD": "op-secret"}, cwd=REPO)
    try:
        line = proc.stderr.readline()
        m = re.search(r"https://127\.0\.0\.1:(\d+)/", line)
        assert m, f"no https announcement: {line!r}"
        trusted = ssl.create_default_context(cafile=None)
        pki.ca.configure_trust(trusted)
        with urllib.request.urlopen(m.group(0) + "login/", timeout=30, context=trusted) as resp:
            assert resp.status == 200 and "Log in" in resp.read().decode()
            cookie = resp.headers["Set-Cookie"]
        assert "csrftoken=" in cookie and "Secure" in cookie
        # plain HTTP to the TLS port gets no page
        with pytest.raises((urllib.error.URLError, ConnectionError, http.client.HTTPException)):
            urllib.request.urlopen(m.group(0).replace("https", "http") + "login/", timeout=30)
    finally:
        proc.terminate()
        proc.wait(30)
        proc.stderr.close()


def test_console_consume_mode_on_5x_brokers_with_djangos_runner() -> None:
    ran, out = run_django_tests("tests.console.cases_rmq5", 300)
    assert ran == 1, out[-4000:]
