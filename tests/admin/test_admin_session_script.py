"""docs/tools/admin_session.py (the example session of docs/admin.md) runs cleanly against the
reference cluster and shows every rocketmq-admin subcommand, none of them refused."""

from __future__ import annotations

import importlib.util
import io
import re
from pathlib import Path

import pytest
from rocketmq_sdk.admin.cli import cli

pytest.importorskip("rocketmq_broker.embedded")

pytestmark = pytest.mark.timeout(60)

SCRIPT = Path(__file__).resolve().parents[2] / "docs" / "tools" / "admin_session.py"


def load_script():
    spec = importlib.util.spec_from_file_location("admin_session", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_session_shows_every_subcommand_and_no_refusal():
    out = io.StringIO()
    assert load_script().main(out) == 0
    text = out.getvalue()
    assert text.startswith("```console\n$ export NAMESRV_ADDR=127.0.0.1:") and text.endswith("```\n")
    shown = set(re.findall(r"^\$ rocketmq-admin (\w+)", text, re.MULTILINE))
    assert shown == set(cli.commands)
    assert "not supported" not in text
    # the one error shown is the intended one; every other command succeeded
    assert text.count("ERROR") == 1 and "ERROR: broker response code 17" in text
    assert "rocketmq-admin-session-" not in text  # the temporary store path is masked
    # what the setup promised: 16 keyed messages, consumed, lag 0; the resend reached the consumer
    assert "Diff Total: 0" in text and "KEYS=order-2" in text and "CR_SUCCESS" in text


def test_consumer_running_info_never_carries_credentials():
    """consumerStatus shows a consumer's settings: not its secret key (regression: it was sent
    in clear to whoever asked), no Python ``None``/``True`` (Java skips null fields, prints false)."""
    from rocketmq_sdk.consumer import PushConsumer

    consumer = PushConsumer("creds_cg", "127.0.0.1:1", access_key="OrderService", secret_key="order-secret-1")
    consumer.subscribe("Orders", "*")
    props = consumer.consumer_running_info().properties
    assert "order-secret-1" not in props.values()
    assert not {"secretKey", "securityToken", "sslContext"} & set(props)
    assert not {"None", "True", "False"} & set(props.values())
    assert props["useTls"] == "false" and props["accessKey"] == "OrderService"
