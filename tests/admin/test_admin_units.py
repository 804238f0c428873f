"""Pure helpers of the admin client and CLI: addresses, properties, times, tables, watch mode."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner
from rocketmq_sdk.admin import cli as cli_module
from rocketmq_sdk.admin.cli import cli, parse_time_ms
from rocketmq_sdk.admin.client import parse_namesrv_addr, parse_properties
from rocketmq_sdk.admin.render import fmt_ms, table
from rocketmq_sdk.exceptions import IllegalArgumentError

from .test_admin_capture import GROUP, NS


def test_namesrv_list_from_argument_and_env(monkeypatch):
    assert parse_namesrv_addr("a:9876; b:9876;") == ["a:9876", "b:9876"]
    assert parse_namesrv_addr(["a:1"]) == ["a:1"]
    monkeypatch.setenv("NAMESRV_ADDR", "x:9876;y:9876")
    assert parse_namesrv_addr(None) == ["x:9876", "y:9876"]
    monkeypatch.delenv("NAMESRV_ADDR")
    with pytest.raises(IllegalArgumentError, match="NAMESRV_ADDR"):
        parse_namesrv_addr(None)


def test_broker_config_properties_text():
    assert parse_properties("a=1\n# c\n\nbrokerName=broker-a\nx=y=z\n") == {"a": "1", "brokerName": "broker-a",
                                                                              "x": "y=z"}


def test_time_forms():
    assert parse_time_ms("1700000000000") == 1700000000000
    assert parse_time_ms("-1") == -1
    assert abs(parse_time_ms("now") - parse_time_ms(str(int(__import__("time").time() * 1000)))) < 5000
    assert parse_time_ms("2026-11-22#10:00:00:123") % 1000 == 123
    with pytest.raises(click.BadParameter):
        parse_time_ms("yesterday")
    assert fmt_ms(0) == "-"


def test_table_aligns_columns_and_right_aligns_numbers():
    out = table(["#Name", "#N", "#Note"], [("a", 5, "x"), ("long-name", 12345, None)], numeric=(1,))
    assert out.splitlines() == ["#Name         #N  #Note",
                                "a              5  x",
                                "long-name  12345  -"]


def test_watch_redraws_on_a_terminal(replay, monkeypatch):
    monkeypatch.setattr(cli_module, "stdout_is_tty", lambda: True)
    r = CliRunner().invoke(cli, ["consumerProgress", "-n", NS, "-g", GROUP, "--watch", "--interval", "0",
                                 "--count", "2"])
    assert r.exit_code == 0, r.output
    assert r.output.count("\x1b[H\x1b[2J") == 2 and r.output.count("Diff Total: 0") == 2


def test_watch_json_lines(replay):
    import json

    r = CliRunner().invoke(cli, ["consumerProgress", "-n", NS, "-g", GROUP, "--watch", "--interval", "0",
                                 "--count", "2", "--json"])
    assert r.exit_code == 0, r.output
    docs = [json.loads(ln) for ln in r.output.splitlines()]
    assert len(docs) == 2 and all(d["group"] == GROUP and d["total_lag"] == 0 and "time" in d for d in docs)


def test_watch_keeps_going_through_a_network_error(replay, monkeypatch):
    from rocketmq_sdk.admin.client import AdminClient
    from rocketmq_sdk.exceptions import RemotingTimeoutError

    real = AdminClient.consumer_progress
    calls = []

    def flaky(self, group, topic=None):
        calls.append(group)
        if len(calls) == 1:
            raise RemotingTimeoutError("127.0.0.1:10911", 5000)
        return real(self, group, topic)

    monkeypatch.setattr(AdminClient, "consumer_progress", flaky)
    r = CliRunner().invoke(cli, ["consumerProgress", "-n", NS, "-g", GROUP, "--watch", "--interval", "0",
                                 "--count", "2"])
    assert r.exit_code == 0
    assert "ERROR: request to 127.0.0.1:10911 timed out" in r.stderr
    assert r.stdout.count("lag=0") == 1
