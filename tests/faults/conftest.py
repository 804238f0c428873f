"""Fixtures of the fault suite (``make faults``; see faults_helpers)."""

from __future__ import annotations

from tests.broker.conftest import client, server_process  # noqa: F401 - fixtures shared with the broker tests
