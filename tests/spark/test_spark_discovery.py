"""``format("rocketmq")`` without a registration call, from an installed wheel, outside the repository.

Spark registers the ``DefaultSource`` of every top-level ``pyspark_*`` module that
``pkgutil.iter_modules()`` lists in its Python worker. The wheel installs ``pyspark_rocketmq.py``
next to ``rocketmq_sdk``; an editable install's import hook is invisible to ``iter_modules``
(docs/spark.md), so this test builds the real wheel, installs it into a directory of its own and
runs a Spark session from ``tmp_path`` with that directory as the only place of the package.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

pytest.importorskip("pyspark")

REPO = Path(__file__).resolve().parents[2]
SOURCES = ("sdk", "broker-reference", "integrations", "setup.py", "pyproject.toml", "README.md", "LICENSE",
           "pyspark_rocketmq.py")

SCRIPT = """
import os, pkgutil, sys
site = sys.argv[1]
import pyspark_rocketmq, rocketmq_sdk
assert pyspark_rocketmq.__file__.startswith(site), pyspark_rocketmq.__file__
assert rocketmq_sdk.__file__.startswith(site), rocketmq_sdk.__file__
assert "pyspark_rocketmq" in {m.name for m in pkgutil.iter_modules()}
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[1]").appName("rocketmq-discovery")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.warehouse.dir", os.path.abspath("warehouse"))
         .config("spark.driver.extraJavaOptions", "-Dderby.system.home=" + os.path.abspath("derby"))
         .getOrCreate())
try:
    # no register_data_source(): Spark's own lookup found the format (schema only, no broker)
    df = spark.read.format("rocketmq").option("nameServer", "127.0.0.1:9").option("topic", "t").load()
    print("COLUMNS", ",".join(df.columns), flush=True)
finally:
    spark.stop()
"""


@pytest.mark.timeout(600)  # builds a wheel (pip fetches setuptools for the isolated build) and starts a JVM
def test_format_rocketmq_registers_itself_from_an_installed_wheel(tmp_path):
    if shutil.which("java") is None and "JAVA_HOME" not in os.environ:
        pytest.skip("Spark needs a Java runtime")
    src = tmp_path / "src"  # a copy: the build writes its build/ and egg-info next to the sources
    src.mkdir()
    for name in SOURCES:
        (shutil.copytree if (REPO / name).is_dir() else shutil.copy2)(
            REPO / name, src / name, **({"ignore": shutil.ignore_patterns("__pycache__", "*.so")}
                                        if (REPO / name).is_dir() else {}))
    env = {**os.environ, "ROCKETMQ_NO_EXTENSIONS": "1"}
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(tmp_path / "dist"),
                    str(src)], check=True, env=env, cwd=tmp_path, timeout=400)
    wheel = next((tmp_path / "dist").glob("rocketmq_python_sdk-*-py3-none-any.whl"))
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site), str(wheel)],
                   check=True, cwd=tmp_path, timeout=120)
    assert (site / "pyspark_rocketmq.py").is_file(), "the wheel installs the top-level module"

    work = tmp_path / "work"  # not the repository: nothing found through the working directory
    work.mkdir()
    run_env = {**os.environ, "PYTHONPATH": str(site), "PYSPARK_PYTHON": sys.executable,
               "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    run_env.pop("ROCKETMQ_SPARK_LOG_FILE", None)
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(site)], cwd=work, env=run_env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "COLUMNS body,topic,tags,keys,properties,broker_name,queue_id,queue_offset,msg_id,born_timestamp," \
           "store_timestamp,reconsume_times" in done.stdout


def test_make_install_lists_pyspark_rocketmq_from_any_working_directory(tmp_path):
    # what Spark's lookup does in its Python worker, from a directory outside the repository:
    # make install links the module into a folder a .pth file puts on sys.path (Makefile)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    code = "import pkgutil; print('pyspark_rocketmq' in {m.name for m in pkgutil.iter_modules()})"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120, check=True)
    assert out.stdout.strip() == "True", "pyspark_rocketmq is not on sys.path outside the repository (make install)"
