"""The console's clients and sampler are per process: a worker forked after they were made
(gunicorn ``--preload``) makes and uses its own, and the parent's keep working. Run in a child
interpreter (the console's own settings, apart from the rest of the suite)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytest.importorskip("django", reason="the console needs Django (pip install -e '.[django]')")
pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")

SCRIPT = """
import json, os, select, sys
os.environ["DJANGO_SETTINGS_MODULE"] = "tests.console.settings"
import django
django.setup()
from django.conf import settings
settings.ROCKETMQ_CONSOLE = {**settings.ROCKETMQ_CONSOLE, "NAMESRV_ADDR": sys.argv[1], "SAMPLE_INTERVAL_S": 3600}
from rocketmq_sdk.integrations.django.console import lifecycle, sampler, service

admin, producer, smp = service.admin(), service.producer(), sampler.ensure_sampler()
brokers = sorted(b.broker_name for b in admin.cluster_list(runtime=False))
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    try:
        os.close(r)
        report = {}
        try:
            mine = service.admin()
            report["admin"] = [mine is not admin, sorted(b.broker_name for b in mine.cluster_list(runtime=False))]
            report["producer"] = service.producer() is not producer
            own = sampler.ensure_sampler()
            report["sampler"] = [own is not smp, own._thread.is_alive(), sampler.get_sampler() is own]
            lifecycle.reset_clients()
        except Exception as exc:
            report["error"] = repr(exc)
        os.write(w, json.dumps(report).encode())
    finally:
        os._exit(0)
os.close(w)
with os.fdopen(r) as fh:
    child = json.loads(fh.read() if select.select([fh], [], [], 60)[0] else '{"error": "no answer in 60 s"}')
os.waitpid(pid, 0)
parent = {"same": [service.admin() is admin, service.producer() is producer, sampler.get_sampler() is smp],
          "admin_works": sorted(b.broker_name for b in admin.cluster_list(runtime=False)) == brokers,
          "sampler_alive": smp._thread.is_alive()}
lifecycle.reset_clients()
print(json.dumps({"brokers": brokers, "child": child, "parent": parent}))
"""


def test_a_forked_worker_makes_its_own_console_clients_and_sampler():
    from rocketmq_broker import embedded

    with embedded.start_dev_cluster() as cluster:
        proc = subprocess.run([sys.executable, "-c", textwrap.dedent(SCRIPT), cluster.namesrv_addr], cwd=REPO,
                              capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    brokers = report["brokers"]
    assert brokers and report["child"] == {"admin": [True, brokers], "producer": True, "sampler": [True, True, True]}
    assert report["parent"] == {"same": [True, True, True], "admin_works": True, "sampler_alive": True}
