"""The C accelerators: one C twin per Python module, beside it.

Every ``*.c`` file of the tree is ``<folder>/_c<module>.c`` beside the ``<folder>/<module>.py`` it
accelerates; that module holds its twin in the attribute ``_c<module>``: the compiled module when it
is built and ``ROCKETMQ_PURE_PYTHON`` is not set, None (the pure-Python fallback) otherwise. Each twin
keeps the entry points its module (and the producer's send path) call.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from rocketmq_sdk import _speedups

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"sdk": "rocketmq_sdk", "broker-reference": "rocketmq_broker", "integrations": "rocketmq_sdk.integrations"}

# the entry points of each twin, as its Python module (and its callers) use them
ENTRY_POINTS = {
    "rocketmq_sdk.remoting._ccommand": {"configure", "decode", "encode"},
    "rocketmq_sdk.protocol._cheaders": {"read_header"},
    "rocketmq_sdk.protocol._cmessage_codec": {"configure_records", "decode_records", "encode_batch",
                                              "decode_properties", "encode_properties"},
    "rocketmq_sdk.protocol._cmsgid": {"uniq_configure", "uniq_create"},
    "rocketmq_sdk.producer._cprepare": {"render_send"},
    "rocketmq_broker.store._ccommit_log": {"encode_record"},
    "rocketmq_broker.store._cbatch_records": {"encode_batch", "finish_batch", "encode_single", "place_single"},
    "rocketmq_broker.store._cindex_file": {"key_hash", "put_keys"},
    "rocketmq_sdk.integrations.spark._carrow_records": {"configure", "decode_into"},
    "rocketmq_sdk.integrations.spark._cbatch_bodies": {"configure", "encode_rows"},
}


def _twins() -> list[tuple[Path, str, str]]:
    """(C file, twin module, Python module) for every ``*.c`` file of the tree."""
    out = []
    for folder, package in PACKAGES.items():
        for src in sorted((ROOT / folder).rglob("*.c")):
            parts = src.relative_to(ROOT / folder).with_suffix("").parts
            out.append((src, ".".join((package, *parts)), ".".join((package, *parts[:-1], parts[-1][2:]))))
    return out


# where each module keeps the twin's function it calls (module, attribute, twin's entry point)
USES = [
    ("rocketmq_sdk.remoting.command", "_c_decode", "decode"),
    ("rocketmq_sdk.remoting.command", "_c_encode", "encode"),
    ("rocketmq_sdk.protocol.headers", "_c_read_header", "read_header"),
    ("rocketmq_sdk.protocol.message_codec", "_c_decode_records", "decode_records"),
    ("rocketmq_sdk.protocol.message_codec", "decode_properties", "decode_properties"),
    ("rocketmq_sdk.protocol.msgid", "_c_uniq_create", "uniq_create"),
    ("rocketmq_sdk.producer.prepare", "c_render", "render_send"),
    ("rocketmq_broker.store.commit_log", "encode_record", "encode_record"),
    ("rocketmq_broker.store.batch_records", "encode_batch", "encode_batch"),
    ("rocketmq_broker.store.index_file", "index_key_hash", "key_hash"),
    ("rocketmq_sdk.integrations.spark.arrow_records", "_c_decode_into", "decode_into"),
    ("rocketmq_sdk.integrations.spark.batch_bodies", "_c_encode_rows", "encode_rows"),
]


def test_every_c_file_is_the_twin_of_the_module_beside_it():
    twins = _twins()
    assert {twin for _, twin, _ in twins} == set(ENTRY_POINTS)
    for src, _, _ in twins:
        assert src.name.startswith("_c"), src
        assert src.with_name(src.stem[2:] + ".py").is_file(), f"{src.name} has no {src.stem[2:]}.py beside it"


def test_each_module_holds_its_own_twin():
    for _, twin, module in _twins():
        held = getattr(importlib.import_module(module), twin.rpartition(".")[2])
        if _speedups.PURE_PYTHON:
            assert held is None, twin
        elif held is not None:
            assert held.__name__ == twin
            assert ENTRY_POINTS[twin] <= set(dir(held)), twin


@pytest.mark.skipif(_speedups.PURE_PYTHON, reason="ROCKETMQ_PURE_PYTHON set: nothing is loaded")
@pytest.mark.skipif(shutil.which(sysconfig.get_config_var("CC").split()[0] if sysconfig.get_config_var("CC")
                                 else "cc") is None, reason="no C compiler: the twins cannot be built")
def test_every_twin_is_built_and_used():
    for src, twin, module in _twins():
        held = getattr(importlib.import_module(module), twin.rpartition(".")[2])
        assert held is not None, f"{twin} is not built (make ext)"
        assert Path(held.__file__).parent == src.parent, f"{twin} loaded from {held.__file__}, not beside {src}"
    for module, attr, entry in USES:
        mod = importlib.import_module(module)
        twin = getattr(mod, "_c" + module.rpartition(".")[2])
        assert getattr(mod, attr) is getattr(twin, entry), f"{module}.{attr} is not {twin.__name__}.{entry}"


def test_pure_python_switch_gives_every_module_its_fallback():
    # the other mode in a fresh interpreter: every module holds None, and the functions the twins
    # replace are the Python ones
    code = ("import importlib, json, sys; out = {}\n"
            "for twin, module in json.loads(sys.argv[1]):\n"
            "    out[twin] = getattr(importlib.import_module(module), twin.rpartition('.')[2]) is None\n"
            "from rocketmq_sdk.protocol import message_codec as mc, msgid\n"
            "from rocketmq_broker.store import batch_records as br, commit_log as cl\n"
            "out['python functions'] = (mc.decode_properties is mc.decode_properties_py and "
            "msgid._c_uniq_create is None and cl.encode_record is cl.encode_record_py and "
            "br.encode_batch is br.encode_batch_py)\n"
            "print(json.dumps(out))")
    env = dict(os.environ, ROCKETMQ_PURE_PYTHON="1")
    pairs = [(twin, module) for _, twin, module in _twins()]
    out = subprocess.run([sys.executable, "-c", code, json.dumps(pairs)], env=env, capture_output=True, text=True,
                         timeout=120, check=True).stdout
    assert json.loads(out) == {**{twin: True for twin, _ in pairs}, "python functions": True}
