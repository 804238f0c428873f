"""Atomic JSON config files (RocketMQ ``MixAll.string2File``): write ``.tmp``, keep ``.bak``, rename."""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

from rocketmq_sdk.protocol import fastjson


def write_atomically(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    if os.path.exists(path):
        shutil.copyfile(path, path + ".bak")
    os.replace(tmp, path)


def read_json(path: str) -> Any | None:
    """Read ``path`` (or its ``.bak`` when the main file is missing or corrupt)."""
    for candidate in (path, path + ".bak"):
        try:
            with open(candidate, encoding="utf-8") as fh:
                return fastjson.loads(fh.read())
        except (OSError, ValueError):
            continue
    return None


def pretty(obj: Any) -> str:
    return json.dumps(obj, indent=1, sort_keys=True, ensure_ascii=False)
