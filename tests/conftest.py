"""Shared pytest configuration.

Paths to the golden data recorded from Apache RocketMQ 4.9.8 live in ``../shared/captures``
relative to the repository root (CI clones the repo with ``shared/`` beside it).
"""

from __future__ import annotations

import json
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
