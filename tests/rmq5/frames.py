"""Frames of real RocketMQ 5.3.3 traffic copied from ../shared/captures/rmq5_*.jsonl into
tests/data/rmq5_frames.jsonl (same fields; ``file`` names the capture)."""

from __future__ import annotations

import json
import os

_PATH = os.path.join(os.path.dirname(__file__), "..", "data", "rmq5_frames.jsonl")
_FRAMES: dict[tuple[str, int], dict] = {}


def frame(name: str, seq: int) -> dict:
    """Frame ``seq`` of ``rmq5_<name>.jsonl``."""
    if not _FRAMES:
        with open(_PATH, encoding="utf-8") as fh:
            for line in fh:
                d = json.loads(line)
                _FRAMES[(d["file"], d["seq"])] = d
    return _FRAMES[(f"rmq5_{name}.jsonl", seq)]


def body_bytes(d: dict) -> bytes:
    """The frame's body as on the wire (Java's compact JSON for ``body_json``)."""
    if "body_hex" in d:
        return bytes.fromhex(d["body_hex"])
    if "body_json" in d:
        return json.dumps(d["body_json"], separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return d.get("body_text", "").encode("utf-8")
