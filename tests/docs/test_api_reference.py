"""The API reference pages (docs/reference/, built by ``make docs``) name objects that exist
(issue 17 item 10); the HTML build itself runs in ``make docs``, not here."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "reference"
IDENTIFIERS = sorted({(page.name, m) for page in REFERENCE.glob("*.md")
                      for m in re.findall(r"^::: ([\w.]+)\s*$", page.read_text(), re.M)})


def _resolve(dotted: str) -> object:
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for name in parts[i:]:
            obj = getattr(obj, name)
        return obj
    raise ImportError(dotted)


def test_every_page_documents_something():
    pages = {p for p, _ in IDENTIFIERS}
    assert pages == {p.name for p in REFERENCE.glob("*.md")} and len(IDENTIFIERS) >= 30


@pytest.mark.parametrize("page, dotted", IDENTIFIERS)
def test_reference_identifier_resolves(page, dotted):
    obj = _resolve(dotted)
    assert getattr(obj, "__doc__", None), f"{dotted} ({page}) has no docstring"
