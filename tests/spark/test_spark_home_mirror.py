"""``use_installed_pyspark``: Spark's Python processes import the installed pyspark (cached
bytecode) instead of compiling ``pyspark.zip`` at each start (issue 28's first-read cost)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from rocketmq_sdk.integrations.spark.spark_home import use_installed_pyspark  # noqa: E402


def _spark_python_path(home: Path) -> str:
    """The PYTHONPATH Spark gives its Python processes (``PythonUtils.sparkPythonPath``)."""
    lib = home / "python" / "lib"
    return os.pathsep.join([str(lib / "pyspark.zip"), *(str(p) for p in sorted(lib.glob("py4j-*.zip")))])


def _pyspark_file(home: Path) -> str:
    env = dict(os.environ, PYTHONPATH=_spark_python_path(home))
    done = subprocess.run([sys.executable, "-c", "import pyspark.daemon, pyspark; print(pyspark.__file__)"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_spark_processes_import_the_installed_pyspark_with_the_mirror(tmp_path, monkeypatch):
    import pyspark

    real = Path(pyspark.__file__).resolve().parent
    if not (real / "python" / "lib" / "pyspark.zip").is_file():
        pytest.skip("PySpark is not a pip install with python/lib/pyspark.zip")
    assert "pyspark.zip" in _pyspark_file(real)  # what Spark does by default: compiled from the zip
    monkeypatch.setenv("SPARK_HOME", "")  # unset for the function; the real value comes back after the test
    home = Path(use_installed_pyspark(tmp_path))
    assert os.environ["SPARK_HOME"] == str(home)
    assert _pyspark_file(home) == str(real / "__init__.py")
    assert (home / "jars").resolve() == (real / "jars").resolve()
    assert (home / "bin" / "spark-submit").is_file() and (home / "python" / "pyspark" / "shell.py").is_file()
    assert not list((home / "python" / "lib").glob("*.zip"))
    monkeypatch.setenv("SPARK_HOME", "")
    assert use_installed_pyspark(tmp_path) == str(home)  # reused
    assert [p.name for p in tmp_path.iterdir()] == [home.name]


def test_a_spark_home_set_elsewhere_is_left_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARK_HOME", "/opt/spark")
    assert use_installed_pyspark(tmp_path) is None
    assert os.environ["SPARK_HOME"] == "/opt/spark" and not list(tmp_path.iterdir())
