"""kombu's shared integration suite (``t/integration/common.py``), taken from kombu's source
distribution on the package index for the installed kombu version and cached in the virtual
environment (``<sys.prefix>/kombu-sdist/<version>/``); nothing of it is kept in the repository."""

from __future__ import annotations

import fcntl
import importlib.util
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from types import ModuleType

import kombu

MEMBER = "t/integration/common.py"


def cache_dir() -> Path:
    return Path(sys.prefix) / "kombu-sdist" / kombu.__version__


def common_path() -> Path:
    """The cached ``common.py`` of the installed kombu, downloaded on first use.

    Raises:
        RuntimeError: pip could not download the sdist (no index reachable) or it has no
            ``t/integration/common.py``.
    """
    target = cache_dir() / "common.py"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.exists():
            return target
        with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
            cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-binary", ":all:", "--no-deps",
                   "--disable-pip-version-check", f"kombu=={kombu.__version__}", "-d", tmp]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            archives = list(Path(tmp).glob("kombu-*.tar.gz"))
            if proc.returncode != 0 or not archives:
                raise RuntimeError(f"pip download of kombu {kombu.__version__} sdist failed: {proc.stderr[-500:]}")
            with tarfile.open(archives[0]) as tar:
                member = next((m for m in tar.getmembers() if m.name.endswith(MEMBER) and m.isfile()), None)
                if member is None:
                    raise RuntimeError(f"{archives[0].name} has no {MEMBER}")
                data = tar.extractfile(member).read()
            tmp_target = target.with_suffix(".tmp")
            tmp_target.write_bytes(data)
            tmp_target.replace(target)
    return target


def load_common() -> ModuleType:
    """kombu's ``t/integration/common.py`` as the module ``kombu_integration_common``."""
    name = "kombu_integration_common"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, common_path())
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
