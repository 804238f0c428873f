"""Optional C accelerators and their pure-Python twins.

A few hot paths (frame/header codec, commit-log record encoding, index writes) have a C
implementation built by ``pip install`` when a C compiler is present (``setup.py`` builds every
``*.c`` under a package folder as an optional extension). Each has a pure-Python twin holding the
same behaviour, used when the extension is missing or when the environment variable
``ROCKETMQ_PURE_PYTHON`` is set to anything but ``""``/``"0"`` (read once, at import). Tests
compare the two byte for byte.
"""

from __future__ import annotations

import importlib
import logging
import os
from types import ModuleType

__all__ = ["PURE_PYTHON", "load", "loaded"]

log = logging.getLogger("rocketmq_sdk.speedups")

PURE_PYTHON: bool = os.environ.get("ROCKETMQ_PURE_PYTHON", "") not in ("", "0")
"""True when ``ROCKETMQ_PURE_PYTHON`` asks for the pure-Python code everywhere."""

_loaded: dict[str, bool] = {}


def load(module: str) -> ModuleType | None:
    """The compiled module ``module`` (a dotted name such as ``"rocketmq_sdk.protocol._ccodec"``),
    or None when ``ROCKETMQ_PURE_PYTHON`` is set or it was not built (no compiler at install time);
    the caller then uses its pure-Python twin."""
    if PURE_PYTHON:
        _loaded[module] = False
        return None
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        log.debug("C accelerator %s not available (%s); using pure Python", module, exc)
        _loaded[module] = False
        return None
    _loaded[module] = True
    return mod


def loaded() -> dict[str, bool]:
    """Which accelerators were asked for so far, and whether the compiled one is in use."""
    return dict(_loaded)
