"""Maps the repository's fixed folder layout onto import packages.

``sdk/`` is imported as ``rocketmq_sdk``, ``broker-reference/`` as ``rocketmq_broker`` and
``integrations/`` as ``rocketmq_sdk.integrations``; pyproject.toml holds everything else.
"""

from pathlib import Path

from setuptools import Extension, find_packages, setup

ROOTS = {
    "rocketmq_sdk": "sdk",
    "rocketmq_broker": "broker-reference",
    "rocketmq_sdk.integrations": "integrations",
}


def _packages() -> tuple[list[str], dict[str, str]]:
    packages: list[str] = []
    package_dir: dict[str, str] = {}
    for name, folder in ROOTS.items():
        package_dir[name] = folder
        packages.append(name)
        for sub in find_packages(where=folder):
            full = f"{name}.{sub}"
            if full.startswith("rocketmq_sdk.integrations") and name == "rocketmq_sdk":
                continue
            packages.append(full)
            package_dir[full] = f"{folder}/{sub.replace('.', '/')}"
    return sorted(set(packages)), package_dir


def _extensions() -> list[Extension]:
    """Optional C accelerators: every ``*.c`` file under a package folder becomes the extension
    module of the same name in that package (``sdk/protocol/_ccodec.c`` -> ``rocketmq_sdk.protocol._ccodec``).
    ``optional=True``: without a C compiler the install goes on and the pure-Python code runs
    (each accelerator has a pure-Python twin; ``rocketmq_sdk._speedups`` picks one)."""
    exts = []
    for name, folder in ROOTS.items():
        for src in sorted(Path(folder).rglob("*.c")):
            if ".venv" in src.parts or "build" in src.parts:
                continue
            rel = src.relative_to(folder).with_suffix("")
            module = ".".join((name, *rel.parts))
            exts.append(Extension(module, [str(src)], optional=True, extra_compile_args=["-O2"]))
    return exts


PACKAGES, PACKAGE_DIR = _packages()
# pyspark_rocketmq.py: a top-level module, so Spark finds the ``rocketmq`` data source by itself
# (it registers ``DefaultSource`` of every ``pyspark_*`` module; docs/spark.md)
setup(packages=PACKAGES, package_dir=PACKAGE_DIR, py_modules=["pyspark_rocketmq"], ext_modules=_extensions())
