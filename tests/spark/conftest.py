"""Fixtures of the Spark integration tests; puts ``examples/`` on ``sys.path`` for the demo kit."""

from __future__ import annotations

import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))


import pytest  # noqa: E402


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    """A quiet ``local[2]`` Spark session for one test module (skips without PySpark/Java)."""
    pytest.importorskip("pyspark")
    import shutil

    if shutil.which("java") is None and "JAVA_HOME" not in __import__("os").environ:
        pytest.skip("Spark needs a Java runtime")
    from flights_kit.data import build_spark

    session = build_spark(tmp_path_factory.mktemp("spark"), app_name="rocketmq-spark-tests", shuffle_partitions=4)
    yield session
    session.stop()
