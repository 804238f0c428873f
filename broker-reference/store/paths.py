"""Store paths built from names: one join that cannot leave the store directory.

Topics become directory names (``consumequeue/<topic>/<queueId>/``). The request guard and the
CommitLog already refuse topics outside ``^[%|a-zA-Z0-9_-]+$``; :func:`safe_join` is the second
line: every path the store builds from a name goes through it, so even a name that slipped past
a check cannot point outside the root (``..``, ``/``, NUL, absolute paths, symlinked escapes).
"""

from __future__ import annotations

import os

__all__ = ["UnsafePathError", "safe_join"]


class UnsafePathError(ValueError):
    """A name would make a path outside the store directory (or is no valid file name)."""


def safe_join(root: str, *parts: str) -> str:
    """``root/part1/part2...`` when every part is one plain file name and the result stays
    inside ``root`` (after resolving symlinks).

    Raises:
        UnsafePathError: a part is empty, ``.``/``..``, contains a path separator or NUL, or the
            resolved path leaves ``root``.
    """
    for part in parts:
        if (not isinstance(part, str) or part in ("", ".", "..") or "/" in part or "\0" in part
                or (os.altsep and os.altsep in part) or os.sep in part):
            raise UnsafePathError(f"unsafe path component {part!r} under {root}")
    path = os.path.join(root, *parts)
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    if os.path.commonpath([real_root, real]) != real_root:
        raise UnsafePathError(f"{path!r} resolves outside {root}")
    return path
