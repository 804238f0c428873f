"""Run by ``make wheel-check`` with the Python of a clean virtual environment holding only the
built pure-Python wheel: the installed package imports, is the pure-Python build, is typed and
versioned, and sends and consumes a message through its own embedded broker.

Exits 0 on success; prints what failed otherwise. Runs outside the repository (the caller's
working directory is build/wheel-check) so nothing is imported from the source tree.
"""

from __future__ import annotations

import importlib.machinery
import importlib.metadata
import importlib.resources
import sys
import time
from pathlib import Path

import rocketmq_broker
import rocketmq_sdk
from rocketmq_broker.embedded import start_dev_cluster
from rocketmq_sdk import LitePullConsumer, Message, Producer
from rocketmq_sdk._speedups import load


def main() -> int:
    assert "site-packages" in rocketmq_sdk.__file__, f"imported from {rocketmq_sdk.__file__}, not the wheel"
    assert rocketmq_sdk.__version__ == importlib.metadata.version("rocketmq-python-sdk"), rocketmq_sdk.__version__
    assert importlib.resources.files("rocketmq_sdk").joinpath("py.typed").is_file(), "py.typed missing"
    assert importlib.resources.files("rocketmq_broker").joinpath("py.typed").is_file(), "py.typed missing"
    console = importlib.resources.files("rocketmq_sdk.integrations.django.console")
    assert console.joinpath("templates", "rocketmq_console", "base.html").is_file(), "console templates missing"
    assert console.joinpath("migrations", "0001_initial.py").is_file(), "console migrations missing"
    dist = importlib.metadata.distribution("rocketmq-python-sdk")
    assert any(str(f).endswith("LICENSE") for f in dist.files or []), "LICENSE missing from the wheel"
    assert load("rocketmq_sdk.remoting._ccommand") is None, "a C accelerator is in the pure-Python wheel"
    built = [p for pkg in (rocketmq_sdk, rocketmq_broker) for suffix in importlib.machinery.EXTENSION_SUFFIXES
             for p in Path(pkg.__file__).parent.rglob(f"*{suffix}")]
    assert not built, f"C twins in the pure-Python wheel: {built}"
    with start_dev_cluster(in_process=True) as cluster:
        with Producer("wheel_check_pg", cluster.namesrv_addr) as producer:
            sent = producer.send(Message("wheel_check", b"from the wheel"))
        consumer = LitePullConsumer("wheel_check_cg", cluster.namesrv_addr,
                                    consume_from_where="CONSUME_FROM_FIRST_OFFSET")
        consumer.subscribe("wheel_check", "*")
        with consumer:
            deadline = time.monotonic() + 30
            got: list[bytes] = []
            while not got and time.monotonic() < deadline:
                got = [m.body for m in consumer.poll(1000)]
    assert got == [b"from the wheel"], got
    print(f"wheel-check OK: rocketmq-python-sdk {rocketmq_sdk.__version__} (pure Python), "
          f"sent {sent.msg_id} and consumed it; rocketmq_broker from {rocketmq_broker.__file__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
