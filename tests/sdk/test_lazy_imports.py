"""``import rocketmq_sdk`` and its package ``__init__``s import their public names when first used
(PEP 562, ``rocketmq_sdk._lazy``): a process pays only for the clients it uses (Spark's data
source planners, issue 28), and the public API stays what it was."""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap

import pytest
import rocketmq_sdk
from rocketmq_sdk import _lazy

CLIENTS = ("rocketmq_sdk.producer.producer", "rocketmq_sdk.consumer.push_consumer",
           "rocketmq_sdk.consumer.pull_consumer", "rocketmq_sdk.client.instance", "rocketmq_sdk.remoting.client",
           "rocketmq_sdk.trace.dispatcher", "rocketmq_sdk.protocol.admin_bodies", "asyncio")


def _modules_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``code``."""
    probe = textwrap.dedent(code) + "\nimport sys\nprint('\\n'.join(sys.modules))\n"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return set(done.stdout.split())


def test_importing_the_package_imports_no_client():
    loaded = _modules_after("import rocketmq_sdk")
    assert not loaded & set(CLIENTS), sorted(loaded & set(CLIENTS))


def test_a_name_imports_only_its_own_module():
    loaded = _modules_after("from rocketmq_sdk import Message, MQClientError")
    assert "rocketmq_sdk.protocol.message" in loaded
    assert not loaded & set(CLIENTS), sorted(loaded & set(CLIENTS))


@pytest.mark.parametrize("package", ["rocketmq_sdk", "rocketmq_sdk.consumer", "rocketmq_sdk.producer",
                                     "rocketmq_sdk.protocol", "rocketmq_sdk.client", "rocketmq_sdk.remoting"])
def test_every_public_name_resolves_and_is_listed_by_dir(package):
    module = importlib.import_module(package)
    table = _lazy._type_checking_imports(module.__file__, package)
    for name in module.__all__:
        if name in table:  # what the eager ``from .x import name`` gave
            source, attribute = table[name]
            assert getattr(module, name) is getattr(importlib.import_module(source), attribute), (package, name)
        else:
            assert name in vars(module), (package, name)
    assert set(module.__all__) <= set(dir(module))


def test_star_import_and_pickled_classes_keep_working():
    loaded = _modules_after("""
        import pickle
        from rocketmq_sdk import *
        assert Producer.__module__ == "rocketmq_sdk.producer.producer"
        assert pickle.loads(pickle.dumps(MessageQueue("t", "b", 1))) == MessageQueue("t", "b", 1)
    """)
    assert "rocketmq_sdk.producer.producer" in loaded


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="has no attribute 'Prodcer'"):
        rocketmq_sdk.Prodcer  # noqa: B018
    with pytest.raises(ImportError):
        from rocketmq_sdk import Prodcer  # noqa: F401


def test_a_submodule_is_an_attribute_of_its_package_as_before():
    loaded = _modules_after("""
        import rocketmq_sdk.protocol
        assert rocketmq_sdk.protocol.fastjson.__name__ == "rocketmq_sdk.protocol.fastjson"
        from rocketmq_sdk.consumer import push_consumer
        assert push_consumer.PushConsumer
    """)
    assert "rocketmq_sdk.consumer.push_consumer" in loaded


def test_the_table_is_read_from_the_type_checking_block(tmp_path):
    init = tmp_path / "__init__.py"
    init.write_text("from typing import TYPE_CHECKING\nimport os\nif TYPE_CHECKING:\n"
                    "    from .a import A, B as C\n    from . import sub\n    from x.y import Z\n")
    assert _lazy._type_checking_imports(str(init), "pkg.inner") == {
        "A": ("pkg.inner.a", "A"), "C": ("pkg.inner.a", "B"), "sub": ("pkg.inner.sub", ""), "Z": ("x.y", "Z")}
