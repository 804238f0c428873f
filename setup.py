"""Maps the repository's fixed folder layout onto import packages.

``sdk/`` is imported as ``rocketmq_sdk``, ``broker-reference/`` as ``rocketmq_broker`` and
``integrations/`` as ``rocketmq_sdk.integrations``; pyproject.toml holds everything else.

The C accelerators are optional: without a C compiler the build says so in one line and goes
on in pure Python. ``ROCKETMQ_NO_EXTENSIONS=1`` skips them on purpose, which makes the
pure-Python wheel (``py3-none-any``) that installs on every Python 3.11+ and platform::

    ROCKETMQ_NO_EXTENSIONS=1 pip wheel --no-deps -w dist .
"""

import os
import sys
from pathlib import Path

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

NO_EXTENSIONS = os.environ.get("ROCKETMQ_NO_EXTENSIONS", "") not in ("", "0")

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


def _note(text: str) -> None:
    """One line in the build log (pip shows it with ``-v``, and on failure)."""
    sys.stderr.write(f"rocketmq-python-sdk: {text}\n")


class OptionalBuildExt(build_ext):
    """``build_ext`` that turns a failed accelerator into one clear line instead of a compiler
    traceback: the package works without it (``rocketmq_sdk._speedups`` picks the pure-Python twin)."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # no compiler at all (DistutilsPlatformError...)
            _note(f"C accelerators skipped ({type(exc).__name__}: {exc}); the pure-Python code is used "
                  "(same behaviour, slower; see docs/performance.md)")

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:  # CompileError, LinkError, missing Python headers...
            _note(f"C accelerator {ext.name} skipped ({type(exc).__name__}: {exc}); its pure-Python twin "
                  "is used (same behaviour, slower; see docs/performance.md)")


def _sources(folder: str, pattern: str) -> list[Path]:
    return [p for p in sorted(Path(folder).rglob(pattern)) if ".venv" not in p.parts and "build" not in p.parts]


def _extensions() -> list[Extension]:
    """Optional C accelerators: every ``*.c`` file under a package folder becomes the extension
    module of the same name in that package, the C twin of the Python module beside it
    (``sdk/protocol/_cmessage_codec.c`` -> ``rocketmq_sdk.protocol._cmessage_codec``, twin of
    ``message_codec.py``). The ``*.h`` files of the same folder tree are the helpers the twins include
    (``sdk/_chelpers.h``, ``broker-reference/store/_crecord.h``): listed as dependencies, so editing
    one rebuilds its twins. ``optional=True``: without a C compiler the install goes on and the
    pure-Python code runs (``rocketmq_sdk._speedups`` picks the twin or the fallback)."""
    if NO_EXTENSIONS:
        _note("ROCKETMQ_NO_EXTENSIONS is set: no C accelerators, a pure-Python (py3-none-any) build")
        return []
    exts = []
    for name, folder in ROOTS.items():
        headers = [str(h) for h in _sources(folder, "*.h")]
        for src in _sources(folder, "*.c"):
            rel = src.relative_to(folder).with_suffix("")
            module = ".".join((name, *rel.parts))
            exts.append(Extension(module, [str(src)], depends=headers, optional=True, extra_compile_args=["-O2"]))
    return exts


PACKAGES, PACKAGE_DIR = _packages()
# pyspark_rocketmq.py: a top-level module, so Spark finds the ``rocketmq`` data source by itself
# (it registers ``DefaultSource`` of every ``pyspark_*`` module; docs/spark.md)
setup(packages=PACKAGES, package_dir=PACKAGE_DIR, py_modules=["pyspark_rocketmq"], ext_modules=_extensions(),
      cmdclass={"build_ext": OptionalBuildExt})
