"""Lazy package exports (PEP 562): a package's public names are imported when first used.

A package ``__init__`` lists its public names once, as imports under ``if TYPE_CHECKING:``
(what type checkers and readers see), and ends with::

    __getattr__, __dir__ = lazy_exports(__name__)

``from rocketmq_sdk import Producer`` then imports ``rocketmq_sdk.producer.producer`` at that
moment, not when ``rocketmq_sdk`` is imported: a process that needs only part of the SDK (Spark's
data source planners, a CLI command) pays only for that part. The name -> module table is read
from the ``TYPE_CHECKING`` block of the package's own source, so the list is not written twice
(the same idea as ``lazy_loader.attach_stub``, which reads a ``.pyi`` stub).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from typing import Any


def _type_checking_imports(path: str, package: str) -> dict[str, tuple[str, str]]:
    """Public name -> (module, attribute) of every ``from X import a`` under ``if TYPE_CHECKING:``
    in the source at ``path`` (a package ``__init__``; relative imports are against ``package``)."""
    import ast  # here: read once per package, at its first lazy look-up

    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    found: dict[str, tuple[str, str]] = {}
    for node in tree.body:
        if not (isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)):
            continue
        for stmt in node.body:
            if not isinstance(stmt, ast.ImportFrom):
                continue
            if stmt.level:
                base = package.rsplit(".", stmt.level - 1)[0] if stmt.level > 1 else package
                module = f"{base}.{stmt.module}" if stmt.module else base
            else:
                module = stmt.module or ""
            for alias in stmt.names:  # ``from . import sub``: the submodule itself ("" attribute)
                found[alias.asname or alias.name] = (f"{module}.{alias.name}", "") if not stmt.module \
                    else (module, alias.name)
    return found


def lazy_exports(package: str) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module-level ``__getattr__`` and ``__dir__`` of ``package`` (its ``__name__``; the
    package must already be in ``sys.modules``, i.e. call this from its ``__init__``).

    ``__getattr__(name)`` imports the module the ``TYPE_CHECKING`` block names for ``name``, stores
    the value in the package (later look-ups are plain attribute reads) and returns it; it raises
    ``AttributeError`` for a name that is neither listed there nor a submodule. ``__dir__()`` lists the package's
    attributes and every lazy name.
    """
    module = sys.modules[package]
    table: dict[str, tuple[str, str]] = {}
    loaded = False

    def exports() -> dict[str, tuple[str, str]]:
        nonlocal loaded
        if not loaded:
            table.update(_type_checking_imports(str(module.__file__), package))
            loaded = True
        return table

    def __getattr__(name: str) -> Any:  # noqa: N807 - PEP 562's name
        if name.startswith("__"):
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        target = exports().get(name)
        if target is None:  # a submodule, as the eager ``__init__`` had imported them all
            if importlib.util.find_spec(f"{package}.{name}") is None:
                raise AttributeError(f"module {package!r} has no attribute {name!r}")
            target = (f"{package}.{name}", "")
        imported = importlib.import_module(target[0])
        value = getattr(imported, target[1]) if target[1] else imported
        setattr(module, name, value)
        return value

    def __dir__() -> list[str]:  # noqa: N807 - PEP 562's name
        return sorted(set(vars(module)) | set(exports()))

    return __getattr__, __dir__
