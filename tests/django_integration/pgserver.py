"""A private, throwaway PostgreSQL server for the Django tests' PostgreSQL pass.

Debian's ``postgresql`` package's binaries (``/usr/lib/postgresql/<version>/bin``) create a
cluster in a temporary directory (``initdb``, trust authentication for 127.0.0.1 only) and start
it on a free 127.0.0.1 port with durability off (a test database is thrown away); :meth:`stop`
stops it and deletes the directory. PostgreSQL refuses to run as root, so as root the cluster
belongs to Debian's ``postgres`` user.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rocketmq_broker.embedded import free_fixed_port

__all__ = ["PgServer", "find_bindir", "start"]

USER = "rocketmq"


def find_bindir() -> Path | None:
    """The newest installed PostgreSQL's bin directory with ``initdb`` and ``pg_ctl``, else None."""
    found = [Path(p) for p in glob.glob("/usr/lib/postgresql/*/bin") if os.access(Path(p) / "pg_ctl", os.X_OK)]
    found.sort(key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0)
    return found[-1] if found else None


@dataclass
class PgServer:
    """A running throwaway cluster: connect as :data:`USER` (a superuser, no password) to
    127.0.0.1:``port``."""

    bindir: Path
    base: Path
    port: int
    run_as: list[str]

    def _ctl(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self.run_as, str(self.bindir / "pg_ctl"), "-D", str(self.base / "data"), *args],
                              capture_output=True, text=True, timeout=timeout, check=False)

    def stop(self) -> None:
        """Stop the server (immediate: nothing is worth keeping) and delete its directory."""
        self._ctl("-m", "immediate", "-w", "stop")
        shutil.rmtree(self.base, ignore_errors=True)


def start(base: Path | None = None) -> PgServer:
    """initdb a cluster under ``base`` (default a new temporary directory) and start it.

    Raises:
        FileNotFoundError: PostgreSQL is not installed.
        RuntimeError: initdb or the start failed (with the server's log).
    """
    bindir = find_bindir()
    if bindir is None:
        raise FileNotFoundError("no PostgreSQL under /usr/lib/postgresql/*/bin (Debian package postgresql)")
    base = Path(base or tempfile.mkdtemp(prefix="rocketmq-pg-"))
    run_as: list[str] = []
    if os.geteuid() == 0:
        owner = pwd.getpwnam("postgres")
        os.chown(base, owner.pw_uid, owner.pw_gid)
        run_as = ["runuser", "-u", "postgres", "--"]
    init = subprocess.run([*run_as, str(bindir / "initdb"), "-D", str(base / "data"), "-U", USER, "-A", "trust",
                           "-E", "UTF8", "--no-sync"], capture_output=True, text=True, timeout=120, check=False)
    if init.returncode:
        raise RuntimeError(f"initdb failed: {init.stderr[-2000:]}")
    port = free_fixed_port()
    server = PgServer(bindir, base, port, run_as)
    options = (f"-p {port} -k {base} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off "
               "-c full_page_writes=off -c max_connections=200")
    started = server._ctl("-o", options, "-l", str(base / "server.log"), "-w", "-t", "60", "start", timeout=90)
    if started.returncode:
        log = (base / "server.log").read_text(errors="replace")[-2000:] if (base / "server.log").exists() else ""
        shutil.rmtree(base, ignore_errors=True)
        raise RuntimeError(f"PostgreSQL did not start: {started.stderr[-1000:]} {log}")
    return server
