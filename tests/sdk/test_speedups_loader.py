"""``rocketmq_sdk._speedups``: the switch between the optional C accelerators and their twins,
and setup.py's mapping of ``*.c`` files to extension modules."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from rocketmq_sdk import _speedups

ROOT = Path(__file__).resolve().parents[2]


def _probe(env_value: str | None) -> str:
    env = dict(os.environ)
    env.pop("ROCKETMQ_PURE_PYTHON", None)
    if env_value is not None:
        env["ROCKETMQ_PURE_PYTHON"] = env_value
    code = ("from rocketmq_sdk import _speedups as s; "
            "print(s.PURE_PYTHON, s.load('json') is None, s.loaded()['json'])")
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=60, check=True).stdout.strip()


@pytest.mark.parametrize(("value", "pure"), [(None, False), ("", False), ("0", False), ("1", True),
                                             ("yes", True)])
def test_env_switch(value, pure):
    # any importable module stands in for a compiled one: the switch alone decides
    assert _probe(value) == f"{pure} {pure} {not pure}"


def test_missing_module_falls_back(caplog):
    if _speedups.PURE_PYTHON:
        pytest.skip("pure-Python mode: load() never imports")
    with caplog.at_level("DEBUG", logger="rocketmq_sdk.speedups"):
        assert _speedups.load("rocketmq_sdk._no_such_accelerator") is None
    assert _speedups.loaded()["rocketmq_sdk._no_such_accelerator"] is False
    assert "not available" in caplog.text


def test_setup_maps_c_files_to_package_modules(tmp_path, monkeypatch):
    # setup.py's _extensions(): sdk/x/_y.c -> rocketmq_sdk.x._y, broker-reference/... -> rocketmq_broker...
    (tmp_path / "sdk" / "protocol").mkdir(parents=True)
    (tmp_path / "sdk" / "protocol" / "_cmessage_codec.c").write_text("")
    (tmp_path / "sdk" / "_chelpers.h").write_text("")
    (tmp_path / "broker-reference" / "store").mkdir(parents=True)
    (tmp_path / "broker-reference" / "store" / "_ccommit_log.c").write_text("")
    (tmp_path / "integrations").mkdir()
    monkeypatch.chdir(tmp_path)
    source = (ROOT / "setup.py").read_text()
    namespace: dict = {"__name__": "setup_under_test"}
    exec(compile(source.split("PACKAGES, PACKAGE_DIR = _packages()")[0], "setup.py", "exec"), namespace)
    exts = namespace["_extensions"]()
    assert sorted((e.name, tuple(e.sources), tuple(e.depends), e.optional) for e in exts) == [
        ("rocketmq_broker.store._ccommit_log", ("broker-reference/store/_ccommit_log.c",), (), True),
        ("rocketmq_sdk.protocol._cmessage_codec", ("sdk/protocol/_cmessage_codec.c",), ("sdk/_chelpers.h",), True),
    ]
