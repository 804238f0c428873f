"""Shared pytest configuration.

Paths to the golden data recorded from Apache RocketMQ 4.9.8 live in ``../shared/captures``
relative to the repository root (CI clones the repo with ``shared/`` beside it).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED = REPO_ROOT.parent / "shared"
CAPTURES = SHARED / "captures"


def load_capture(name: str) -> list[dict]:
    """Return the frames of ``../shared/captures/<name>.jsonl`` as dicts (see its README)."""
    path = CAPTURES / f"{name}.jsonl"
    if not path.exists():
        pytest.skip(f"golden captures not found at {path}")
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def wait_until(cond: Callable[[], object], timeout_s: float = 20.0, what: str = "condition") -> None:
    """Poll ``cond`` every 20 ms until it is truthy; AssertionError naming ``what`` after
    ``timeout_s`` seconds (the suite's one way to wait: never a bare sleep)."""
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.02)
