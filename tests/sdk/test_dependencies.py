"""The client SDK imports with nothing but the standard library and its declared core
dependencies (pyproject ``[project] dependencies``); the command-line tools and the reference
broker, which need extras, say which extra when it is missing."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib

from tests.conftest import REPO_ROOT

# Every module of rocketmq_sdk but the framework integrations (each has its own extra) and the
# command line (the ``cli`` extra) is imported while any third-party top-level module outside the
# declared core dependencies is refused; optional accelerators (uvloop, zlib-ng, OpenTelemetry)
# are guarded imports and must cope with the refusal.
_PROBE = r"""
import importlib, pkgutil, sys

ALLOWED = set(sys.argv[1].split(",")) | set(sys.stdlib_module_names) | {"rocketmq_sdk", "rocketmq_broker", "_distutils_hack"}

class Deny:
    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        if top not in ALLOWED and not top.startswith("_"):
            raise ModuleNotFoundError(f"refused: {name}", name=name)
        return None

sys.meta_path.insert(0, Deny())
import rocketmq_sdk
names = []
for info in pkgutil.walk_packages(rocketmq_sdk.__path__, "rocketmq_sdk."):
    if info.name.startswith(("rocketmq_sdk.integrations", "rocketmq_sdk.admin.cli", "rocketmq_sdk.admin.__main__",
                             "rocketmq_sdk.grpc", "rocketmq_sdk.producer.grpc_", "rocketmq_sdk.consumer.grpc_")):
        continue
    importlib.import_module(info.name)
    names.append(info.name)
from rocketmq_sdk import Producer, PushConsumer  # noqa
from rocketmq_sdk.admin import AdminClient  # noqa
print(len(names))
for extra, module in (("cli", "rocketmq_sdk.admin.cli"), ("broker", "rocketmq_broker"),
                      ("grpc", "rocketmq_sdk.producer.grpc_producer")):
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as exc:
        print(module, "->", exc)
"""


def _core_dependencies() -> list[str]:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return [re.split(r"[<>=!~; \[]", dep, maxsplit=1)[0].lower().replace("-", "_") for dep in project["dependencies"]]


def test_core_dependencies_are_what_a_client_needs():
    assert _core_dependencies() == []  # the standard library is enough (retries: rocketmq_sdk.retry)


def test_the_sdk_imports_with_only_its_core_dependencies():
    done = subprocess.run([sys.executable, "-c", _PROBE, ",".join(_core_dependencies())], capture_output=True,
                          text=True, timeout=120, cwd=REPO_ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert int(lines[0]) > 50  # the whole SDK was walked
    assert "rocketmq_sdk.admin.cli -> rocketmq-admin needs click: pip install 'rocketmq-python-sdk[cli]'" in lines
    assert ("rocketmq_broker -> the reference broker needs click: "
            "pip install 'rocketmq-python-sdk[broker]'") in lines
    assert any(line.startswith("rocketmq_sdk.producer.grpc_producer -> RocketMQ 5 gRPC needs grpcio and protobuf: "
                               "pip install 'rocketmq-python-sdk[grpc]'") for line in lines)
