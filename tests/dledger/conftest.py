"""Fixtures of the DLedger tests."""

from __future__ import annotations

import pytest

from .brokers import DLedgerBrokers


@pytest.fixture
def group(tmp_path):
    """A name server and a started three-member DLedger group of reference brokers (fast timers)."""
    g = DLedgerBrokers(str(tmp_path))
    g.start()
    yield g
    g.stop()
