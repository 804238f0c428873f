"""Fixtures of the Spark integration tests; puts ``examples/`` on ``sys.path`` for the demo kit."""

from __future__ import annotations

import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))
