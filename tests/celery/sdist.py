"""Test sources of an installed package's source distribution (kombu's and Celery's
``t/integration``), downloaded from the package index at test time for the installed version
and cached in the virtual environment (``<sys.prefix>/<package>-sdist/<version>/``); nothing of
them is kept in the repository."""

from __future__ import annotations

import fcntl
import importlib.metadata
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path


def cache_dir(package: str) -> Path:
    return Path(sys.prefix) / f"{package}-sdist" / importlib.metadata.version(package)


def extract(package: str, prefix: str) -> Path:
    """The cache directory holding every file of the installed ``package``'s sdist under
    ``prefix`` (e.g. ``"t/"``), at the same relative paths; downloaded on first use.

    Raises:
        RuntimeError: pip could not download the sdist (no index reachable) or it has no
            file under ``prefix``.
    """
    target = cache_dir(package)
    done = target / f".extracted-{prefix.strip('/').replace('/', '_')}"
    if done.exists():
        return target
    target.mkdir(parents=True, exist_ok=True)
    with open(target / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists():
            return target
        version = importlib.metadata.version(package)
        with tempfile.TemporaryDirectory(dir=target) as tmp:
            cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-binary", ":all:", "--no-deps",
                   "--disable-pip-version-check", f"{package}=={version}", "-d", tmp]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            archives = list(Path(tmp).glob("*.tar.gz"))
            if proc.returncode != 0 or not archives:
                raise RuntimeError(f"pip download of {package} {version} sdist failed: {proc.stderr[-500:]}")
            staging = Path(tmp) / "files"
            found = 0
            with tarfile.open(archives[0]) as tar:
                for member in tar.getmembers():
                    # "<name>-<version>/<path>": keep regular files under prefix, nothing else
                    rel = member.name.split("/", 1)[-1]
                    if not member.isfile() or not rel.startswith(prefix) or ".." in rel.split("/"):
                        continue
                    dest = staging / rel
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    dest.write_bytes(tar.extractfile(member).read())
                    found += 1
            if not found:
                raise RuntimeError(f"{archives[0].name} has nothing under {prefix}")
            for path in staging.iterdir():
                dest = target / path.name
                if dest.is_dir():
                    shutil.rmtree(dest)
                shutil.move(str(path), dest)
        done.touch()
    return target
