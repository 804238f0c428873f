"""Optional C accelerators and their pure-Python twins.

A few hot paths have a C implementation built by ``pip install`` when a C compiler is present
(``setup.py`` builds every ``*.c`` under a package folder as an optional extension). Each C file is
the twin of the one Python module beside it, named after it (as aiokafka's ``_crecords``)::

    sdk/remoting/command.py          sdk/remoting/_ccommand.c           frames (RemotingCommand.decode/encode)
    sdk/protocol/headers.py          sdk/protocol/_cheaders.c           typed headers from extFields
    sdk/protocol/message_codec.py    sdk/protocol/_cmessage_codec.c     stored records, batch bodies, properties
    sdk/protocol/msgid.py            sdk/protocol/_cmsgid.c             the process-wide UNIQ_KEY ids
    sdk/producer/prepare.py          sdk/producer/_cprepare.c           SEND_MESSAGE_V2 frames from a template
    store/commit_log.py              store/_ccommit_log.c               one CommitLog record
    store/batch_records.py           store/_cbatch_records.c            batch and plain single-send records
    store/index_file.py              store/_cindex_file.c               IndexFile writes
    spark/arrow_records.py           spark/_carrow_records.c            pull bodies into Arrow columns
    spark/batch_bodies.py            spark/_cbatch_bodies.c             batch bodies from Arrow columns

(``store/`` is ``broker-reference/store/``, ``spark/`` is ``integrations/spark/``; helpers the twins share are in ``sdk/_chelpers.h`` and
``broker-reference/store/_crecord.h``.) The Python module loads its twin with :func:`load` into a
module attribute of the twin's name (``message_codec._cmessage_codec``) and keeps the behaviour in
Python as the reference and the fallback, used when the extension is missing or when the
environment variable ``ROCKETMQ_PURE_PYTHON`` is set to anything but ``""``/``"0"`` (read once, at
import). Tests compare the two byte for byte (tests/sdk/test_c_twins.py checks the pairing).
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
    """The compiled module ``module`` (a dotted name such as ``"rocketmq_sdk.protocol._cmessage_codec"``),
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
