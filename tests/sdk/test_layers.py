"""The SDK's layers point one way (docs/architecture.md): a package imports only from itself, the
layers below it and the shared top-level modules, and a top-level module only from what lies
below it (``config.py`` sits above ``protocol`` and ``remoting``, below ``client``). Imports under
``if TYPE_CHECKING:`` do not count (they never run); imports inside functions do."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SDK = Path(__file__).resolve().parents[2] / "sdk"

# every sdk/ package, the sdk/ packages (and top-level modules) it may import at run time
SHARED = {"exceptions", "properties", "config", "config_types", "retry", "lifecycle", "aio", "_speedups",
          "_version", "_lazy"}
ALLOWED = {
    "protocol": {"exceptions", "properties", "_speedups", "_lazy"},
    "remoting": {"protocol", "exceptions", "properties", "_speedups", "_lazy"},
    "client": {"protocol", "remoting"} | SHARED,
    # RocketMQ 5's gRPC wire (beside remoting): message classes, codec, the proxy connection
    "grpc": {"protocol", "exceptions", "_version"},
    "trace": {"protocol", "remoting", "client"} | SHARED,
    "producer": {"protocol", "remoting", "client", "trace", "grpc"} | SHARED,
    "consumer": {"protocol", "remoting", "client", "trace", "grpc"} | SHARED,
    "admin": {"protocol", "remoting", "client"} | SHARED,
}
# every top-level module of sdk/, the sdk/ packages and top-level modules it may import at run time
BASE = {"exceptions", "properties", "_speedups", "_version"}
ALLOWED_TOP = {
    "exceptions": set(),
    "properties": set(),
    "_speedups": set(),
    "_version": set(),
    "_lazy": set(),  # PEP 562 exports of the package __init__s
    "lifecycle": {"exceptions"},
    "retry": {"exceptions"},
    "aio": set(),
    "config_types": {"protocol"} | BASE,
    "config": {"protocol", "remoting"} | BASE,
}


def _runtime_imports(path: Path, package: str | None) -> set[str]:
    """The first component under rocketmq_sdk of every import of ``path`` that can run
    (``package`` None: ``path`` is a top-level module of ``sdk/``)."""
    tree = ast.parse(path.read_text(), str(path))
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for other in child.orelse:
                    visit(other)
                continue
            if isinstance(child, ast.ImportFrom):
                mod = child.module or ""
                if child.level == 0:
                    if mod.startswith("rocketmq_sdk."):
                        found.add(mod.split(".")[1])
                elif child.level == 1 and package is None:
                    found.update([mod.split(".")[0]] if mod else [a.name for a in child.names])
                elif child.level == 1:
                    found.add(package)
                elif child.level == 2:
                    found.update([mod.split(".")[0]] if mod else [a.name for a in child.names])
            elif isinstance(child, ast.Import):
                for alias in child.names:
                    if alias.name.startswith("rocketmq_sdk."):
                        found.add(alias.name.split(".")[1])
            visit(child)

    visit(tree)
    found.discard(package if package is not None else path.stem)
    return found


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_a_layer_imports_only_what_lies_below_it(package):
    wrong = {}
    for path in sorted((SDK / package).glob("*.py")):
        bad = _runtime_imports(path, package) - ALLOWED[package]
        if bad:
            wrong[path.name] = sorted(bad)
    assert not wrong, f"sdk/{package} imports upward: {wrong}"


def test_every_top_level_module_has_its_place():
    assert {p.stem for p in SDK.glob("*.py")} - {"__init__"} == set(ALLOWED_TOP)


@pytest.mark.parametrize("module", sorted(ALLOWED_TOP))
def test_a_top_level_module_imports_only_what_lies_below_it(module):
    bad = _runtime_imports(SDK / f"{module}.py", None) - ALLOWED_TOP[module]
    assert not bad, f"sdk/{module}.py imports upward: {sorted(bad)}"


def test_the_checker_sees_an_upward_import(tmp_path):
    bad = tmp_path / "m.py"
    bad.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..producer import Producer\n"
                   "def f():\n    from ..producer.dispatch import SendDispatcher\n    from .. import consumer\n")
    assert _runtime_imports(bad, "client") == {"producer", "consumer"}


def test_the_checker_sees_a_top_level_module_importing_a_package_in_a_function(tmp_path):
    bad = tmp_path / "config.py"
    bad.write_text("from .exceptions import E\nfrom .protocol.codes import X\n"
                   "def f():\n    from .client.namesrv_lookup import url\n")
    assert _runtime_imports(bad, None) == {"exceptions", "protocol", "client"}
