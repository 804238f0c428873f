"""A small tmpfs for tests of a really full disk (root only; skipped with one line otherwise)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

import pytest


@contextmanager
def small_tmpfs(where, size: str) -> Iterator:
    """Mount a tmpfs of ``size`` (``"3m"``) at the new directory ``where``; unmounted at exit.
    Skips the test when not root or when mounting is not allowed here."""
    if os.geteuid() != 0:
        pytest.skip("a real full disk needs a tmpfs mount, which needs root")
    where.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True,
                       timeout=30)
    if r.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode(errors='replace').strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, timeout=30)
