"""Celery's own integration suite (``t/integration`` of the installed celery's sdist, see
sdist.py) run against a broker URL with a private Redis result backend: Debian's
``redis-server`` on a free 127.0.0.1 port, started and stopped here.

``python tests/celery/celery_suite.py [--broker rocketmq|redis|both] [pytest args]`` (``make
celery-suite``) runs the whole suite against the embedded reference broker (``rocketmq://``)
and/or Redis as the broker, and prints the outcome of every test side by side.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rocketmq_broker.embedded import free_fixed_port

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent

#: Celery's own pytest settings (its pyproject.toml), without --strict-markers: the suite's
#: ``flaky`` reruns are off (pytest-rerunfailures not loaded), each test runs once
INI = """[pytest]
python_classes = test_*
xfail_strict = true
markers =
    flaky
    timeout
    amqp
    celery
"""

#: modules of t/integration not run: they test something other than the broker and need
#: what is not installed here (documented in docs/celery.md)
IGNORED = {
    "t/integration/test_backend.py": "Azure Block Blob result backend (needs the azure SDK and an account)",
}

#: per-test limit (pytest-timeout, signal method: a hang fails that test, the run goes on):
#: Celery's own ``flaky`` limit; some tests wait by design (test_disabling_flag_allow_error_cb_on_chord_header
#: waits 10 s up to 21 times)
TEST_TIMEOUT_S = 300


def redis_server_path() -> str | None:
    return shutil.which("redis-server") or (os.path.exists("/usr/bin/redis-server") and "/usr/bin/redis-server") or None


@contextmanager
def redis_server() -> Iterator[int]:
    """A private ``redis-server`` on a free 127.0.0.1 port (no persistence, its own temporary
    directory); yields the port, stops it at exit.

    Raises:
        RuntimeError: redis-server is missing or did not answer PING within 10 s.
    """
    exe = redis_server_path()
    if exe is None:
        raise RuntimeError("redis-server is not installed")
    with tempfile.TemporaryDirectory(prefix="celery-suite-redis-") as tmp:
        port = free_fixed_port()
        proc = subprocess.Popen([exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                 "--appendonly", "no", "--dir", tmp, "--protected-mode", "yes"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 10.0
            while True:
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=1.0) as s:
                        s.sendall(b"PING\r\n")
                        if s.recv(16).startswith(b"+PONG"):
                            break
                except OSError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server did not start on port {port}")
                time.sleep(0.05)
            yield port
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def suite_dir() -> Path:
    """The installed celery's sdist files under ``t/`` (cached; see sdist.py)."""
    sys.path.insert(0, str(HERE))
    from sdist import extract
    return extract("celery", "t/")


def run_suite(broker_url: str, redis_port: int, args: list[str], junit: Path,
              timeout_s: float | None = None) -> subprocess.CompletedProcess:
    """Run Celery's ``t/integration`` (or the node ids / options in ``args``, relative to the
    sdist root) in a child pytest, results in the JUnit XML file ``junit``."""
    root = suite_dir()
    env = dict(os.environ, TEST_BROKER=broker_url, TEST_BACKEND=f"redis://127.0.0.1:{redis_port}/0",
               REDIS_HOST="127.0.0.1", REDIS_PORT=str(redis_port),
               # the in-process test worker's log level (Celery's own knob, default "error"):
               # test_trace_log_arguments asserts the worker's INFO records ("Task ... received",
               # "... succeeded") reach caplog, from the prefork children through Celery's log queue
               WORKER_LOGLEVEL=os.environ.get("WORKER_LOGLEVEL", "info"),
               PYTHONPATH=os.pathsep.join([str(root), str(HERE)]),
               # tests run the ``celery`` command by name: the venv's, also when it is not activated
               PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    env.pop("DJANGO_SETTINGS_MODULE", None)
    ini = root / "pytest-rocketmq.ini"
    ini.write_text(INI)
    cmd = [sys.executable, "-m", "pytest", "-c", str(ini), "-p", "celery.contrib.pytest", "-p", "celery_suite_plugin", "-p", "no:cacheprovider",
           "-p", "no:django", "-p", "no:rerunfailures", "--rootdir", str(root), "--timeout", str(TEST_TIMEOUT_S), "--junitxml", str(junit), "-v", "-rfEs", "--timeout-method=signal",
           *[f"--ignore={m}" for m in IGNORED], *args, *([] if any(a.startswith("t/") for a in args) else ["t/integration"])]
    return subprocess.run(cmd, cwd=root, env=env, timeout=timeout_s, text=True,
                          stdout=None if timeout_s is None else subprocess.PIPE, stderr=subprocess.STDOUT)


def outcomes(junit: Path) -> dict[str, str]:
    """``{test id: passed|failed|error|skipped}`` from a JUnit XML file."""
    result = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        kinds = {child.tag for child in case}
        result[name] = ("failed" if "failure" in kinds else "error" if "error" in kinds
                        else "skipped" if "skipped" in kinds else "passed")
    return result


def junit_name(node_id: str) -> str:
    """The JUnit XML name (``outcomes``) of a pytest node id:
    ``t/integration/test_tasks.py::test_x::test_y`` -> ``t.integration.test_tasks.test_x::test_y``."""
    *owners, name = node_id.replace(".py::", "::").replace("/", ".").split("::")
    return f"{'.'.join(owners)}::{name}"


def worse_than_redis(redis: dict[str, str], rocketmq: dict[str, str]) -> list[str]:
    """The JUnit names (``outcomes``) passing with Redis as the broker but not on rocketmq://,
    except those skipped on rocketmq:// with a listed reason: by this runner
    (``celery_suite_plugin.SKIPPED``) or by Celery itself on every broker but Redis
    (``celery_suite_plugin.REDIS_BROKER_ONLY``)."""
    from celery_suite_plugin import REDIS_BROKER_ONLY, SKIPPED
    listed = {junit_name(node_id) for node_id in (*SKIPPED, *REDIS_BROKER_ONLY)}
    return [n for n in sorted(set(redis) | set(rocketmq)) if redis.get(n) == "passed" and rocketmq.get(n) != "passed"
            and not (n.split("[", 1)[0] in listed and rocketmq.get(n) == "skipped")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--broker", choices=["rocketmq", "redis", "both"], default="rocketmq")
    opts, rest = parser.parse_known_args(argv)
    # SIGTERM (make interrupted, CI timeout) unwinds: redis-server, the broker and pytest stop
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sys.path.insert(0, str(REPO / "tests" / "celery"))
    from rocketmq_broker.embedded import start_dev_cluster
    results: dict[str, dict[str, str]] = {}
    with tempfile.TemporaryDirectory(prefix="celery-suite-") as tmp, redis_server() as port:
        brokers = ["redis", "rocketmq"] if opts.broker == "both" else [opts.broker]
        for broker in brokers:
            junit = Path(tmp) / f"{broker}.xml"
            print(f"== Celery {suite_dir().name} t/integration, broker {broker}", flush=True)
            if broker == "redis":
                run_suite(f"redis://127.0.0.1:{port}/1", port, rest, junit)
            else:
                with start_dev_cluster() as cluster:
                    run_suite(f"rocketmq://{cluster.namesrv_addr}", port, rest, junit)
            results[broker] = outcomes(junit) if junit.exists() else {}
    if len(results) == 2:
        names = sorted(set(results["redis"]) | set(results["rocketmq"]))
        worse = worse_than_redis(results["redis"], results["rocketmq"])
        print(f"\n{len(names)} tests; passing with Redis as broker but not on rocketmq://: {len(worse)}")
        for n in worse:
            print(f"  {n}: {results['rocketmq'].get(n)}")
        return 1 if worse else 0
    ((broker, only),) = results.items()
    counts = {kind: sum(1 for v in only.values() if v == kind) for kind in ("passed", "skipped", "failed", "error")}
    bad = sorted(n for n, v in only.items() if v not in ("passed", "skipped"))
    print(f"\n{broker}: {len(only)} tests, " + ", ".join(f"{n} {kind}" for kind, n in counts.items()))
    for n in bad:
        print(f"  {n}: {only[n]}")
    if not only:
        print(f"{broker}: no results (the run did not start or was interrupted)")
    return 0 if only and not bad else 1


if __name__ == "__main__":
    sys.exit(main())
