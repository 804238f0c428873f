"""Part 1: the ROCKETMQ settings dict and its system checks (``manage.py check``)."""

from __future__ import annotations

import io
import logging
import socket

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test.utils import override_settings
from rocketmq_sdk import MQError
from rocketmq_sdk.integrations.django import conf, rocketmq_template
from rocketmq_sdk.integrations.django.checks import check_name_server, check_settings

from django_integration.testapp.models import Order


def ids(messages) -> list[str]:
    return sorted(m.id for m in messages)


def test_keys_map_to_sdk_settings_including_spring_aliases():
    s = conf.load({
        "NAME_SERVER": "10.0.0.1:9876;10.0.0.2:9876",
        "ACCESS_KEY": "ak", "SECRET_KEY": "sk", "NAMESPACE": "ns", "USE_TLS": False,
        "CONNECT_TIMEOUT": 1000,
        "PRODUCER": {"GROUP": "shop", "SEND_MSG_TIMEOUT": 3000, "RETRY_TIMES_WHEN_SEND_FAILED": 2,
                     "SEND_MESSAGE_TIMEOUT": 4000, "COMPRESS_MESSAGE_BODY_THRESHOLD": 1024,
                     "LATENCY_MAX": [1, 2, 3, 4, 5, 6, 7]},
        "CONSUMER": {"PULL_BATCH_SIZE": 16, "CONSUME_FROM_WHERE": "CONSUME_FROM_FIRST_OFFSET"},
        "TRANSACTION": {"GROUP": "shop_tx2", "CHECK_THREAD_POOL_SIZE": 2},
    })
    assert s.problems == []
    assert s.producer_group == "shop"
    kw = s.producer_kwargs()
    assert kw["namesrv_addr"] == "10.0.0.1:9876;10.0.0.2:9876"
    assert kw["access_key"] == "ak" and kw["namespace"] == "ns" and kw["connect_timeout"] == 1000
    assert kw["send_msg_timeout"] == 4000  # the Spring alias came last and wins
    assert kw["compress_msg_body_over_howmuch"] == 1024
    assert kw["latency_max"] == (1, 2, 3, 4, 5, 6, 7)
    ckw = s.consumer_kwargs()
    assert ckw["pull_batch_size"] == 16 and "namespace" not in ckw
    assert s.transaction_group == "shop_tx2" and s.transaction == {"check_thread_pool_size": 2}


def test_transaction_group_defaults_to_producer_group_tx():
    assert conf.load({"PRODUCER": {"GROUP": "shop"}}).transaction_group == "shop_tx"


@pytest.mark.parametrize("raw, kind, path", [
    ({"NAME_SERVERS": "x"}, "unknown", 'ROCKETMQ["NAME_SERVERS"]'),
    ({"PRODUCER": {"GROUP": "g", "SEND_TIMEOUT": 1}}, "unknown", 'ROCKETMQ["PRODUCER"]["SEND_TIMEOUT"]'),
    ({"PRODUCER": {"GROUP": "g", "send_msg_timeout": 1}}, "unknown", 'ROCKETMQ["PRODUCER"]["send_msg_timeout"]'),
    ({"PRODUCER": {"GROUP": 7}}, "type", 'ROCKETMQ["PRODUCER"]["GROUP"]'),
    ({"PRODUCER": {"SEND_MSG_TIMEOUT": "3000"}}, "type", 'ROCKETMQ["PRODUCER"]["SEND_MSG_TIMEOUT"]'),
    ({"USE_TLS": 1}, "type", 'ROCKETMQ["USE_TLS"]'),
    ({"CONSUMER": {"PULL_BATCH_SIZE": True}}, "type", 'ROCKETMQ["CONSUMER"]["PULL_BATCH_SIZE"]'),
    ({"CONSUMER": []}, "type", 'ROCKETMQ["CONSUMER"]'),
    ({"CONSUMER": {"MESSAGE_MODEL": "EVERYONE"}}, "value", 'ROCKETMQ["CONSUMER"]["MESSAGE_MODEL"]'),
    ({"CONSUMER": {"PULL_BATCH_SIZE": 5000}}, "value", 'ROCKETMQ["CONSUMER"]["PULL_BATCH_SIZE"]'),
    ({"PRODUCER": {"GROUP": "g", "RETRY_TIMES_WHEN_SEND_FAILED": -5}}, "value",
     'ROCKETMQ["PRODUCER"]["RETRY_TIMES_WHEN_SEND_FAILED"]'),
    ({"PRODUCER": {"GROUP": "g", "SEND_MESSAGE_TIMEOUT": -1}}, "value", 'ROCKETMQ["PRODUCER"]["SEND_MESSAGE_TIMEOUT"]'),
    ({"PRODUCER": {"GROUP": "g"}, "CUSTOMIZED_TRACE_TOPIC": "my traces"}, "value", 'ROCKETMQ["CUSTOMIZED_TRACE_TOPIC"]'),
])
def test_bad_settings_are_problems_not_exceptions(raw, kind, path):
    s = conf.load(raw)
    assert [(p.kind, p.path) for p in s.problems] == [(kind, path)]


def test_system_checks_report_ids_and_hints():
    with override_settings(ROCKETMQ={"NAME_SERVR": "x", "PRODUCER": {"GROUP": 1, "SEND_MSG_TIMEOUT": "slow"},
                                     "CONSUMER": {"MESSAGE_MODEL": "EVERYONE"},
                                     "MESSAGE_CONVERTER": "no.such.Converter"}):
        messages = check_settings()
        assert ids(messages) == ["rocketmq.E002", "rocketmq.E003", "rocketmq.E003", "rocketmq.E004",
                                 "rocketmq.E005"]
        unknown = next(m for m in messages if m.id == "rocketmq.E002")
        assert unknown.hint == 'did you mean "NAME_SERVER"?'
        with pytest.raises(SystemCheckError) as err:  # manage.py check fails the build on errors
            call_command("check", stdout=io.StringIO(), stderr=io.StringIO())
        assert "rocketmq.E002" in str(err.value)
        # a bad setting is an error at first use, never an import-time crash
        with pytest.raises(ImproperlyConfigured, match="NAME_SERVR"):
            rocketmq_template().send("t", b"x")
    with override_settings(ROCKETMQ=["not", "a", "dict"]):
        assert ids(check_settings()) == ["rocketmq.E001"]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_name_server_is_a_warning_so_builds_pass():
    port = _closed_port()
    with override_settings(ROCKETMQ={"NAME_SERVER": f"127.0.0.1:{port}", "PRODUCER": {"GROUP": "g"}}):
        messages = check_name_server()
        assert ids(messages) == ["rocketmq.W002"]
        assert f"127.0.0.1:{port}" in messages[0].msg
        out = io.StringIO()
        call_command("check", stdout=out, stderr=out)  # warnings only: no SystemCheckError
        assert "rocketmq.W002" in out.getvalue()
    with override_settings(ROCKETMQ={"PRODUCER": {"GROUP": "g"}}), pytest.MonkeyPatch.context() as mp:
        mp.delenv("NAMESRV_ADDR", raising=False)
        mp.delenv("ROCKETMQ_NAMESRV_DOMAIN", raising=False)
        assert ids(check_name_server()) == ["rocketmq.W001"]


def test_reachable_name_server_passes(rocketmq):
    assert check_name_server() == []
    assert check_settings() == []


def test_broker_down_first_send_raises_the_sdk_error():
    with override_settings(ROCKETMQ={"NAME_SERVER": f"127.0.0.1:{_closed_port()}",
                                     "PRODUCER": {"GROUP": "down", "SEND_MSG_TIMEOUT": 1500}}):
        with pytest.raises(MQError):
            rocketmq_template().send("down_topic", b"x")


def test_missing_producer_group_is_explained():
    with override_settings(ROCKETMQ={"NAME_SERVER": "127.0.0.1:9"}):
        with pytest.raises(ImproperlyConfigured, match=r'ROCKETMQ\["PRODUCER"\]\["GROUP"\]'):
            rocketmq_template().send("t", b"x")


def test_listener_check_reports_shared_groups():
    from rocketmq_sdk.integrations.django.checks import check_listeners
    from rocketmq_sdk.integrations.django.listeners import registry, rocketmq_listener

    assert check_listeners() == []
    try:
        rocketmq_listener(topic="t1", consumer_group="dj_order_audit", name="dup")(lambda payload: None)
        messages = check_listeners()
        assert ids(messages) == ["rocketmq.E006"]
        assert "dj_order_audit" in messages[0].msg
        rocketmq_listener(topic="t1", consumer_group="no_params", name="no_params")(lambda: None)
        assert ids(check_listeners()) == ["rocketmq.E006", "rocketmq.E007"]
    finally:
        registry.pop("dup", None)
        registry.pop("no_params", None)


def test_settings_reload_on_override(caplog):
    caplog.set_level(logging.INFO)
    with override_settings(ROCKETMQ={"PRODUCER": {"GROUP": "first"}}):
        assert conf.get_settings().producer_group == "first"
    with override_settings(ROCKETMQ={"PRODUCER": {"GROUP": "second"}}):
        assert conf.get_settings().producer_group == "second"


def test_value_errors_name_the_key_and_the_valid_values():
    """Issue 25, defect 5: E004 names the bad key with its full path and the valid values."""
    (p,) = conf.load({"CONSUMER": {"CONSUME_FROM_WHERE": "FIRST"}, "PRODUCER": {"GROUP": "g"}}).problems
    assert p.path == 'ROCKETMQ["CONSUMER"]["CONSUME_FROM_WHERE"]'
    assert "'FIRST'" in p.message and "CONSUME_FROM_FIRST_OFFSET" in p.message and "CONSUME_FROM_TIMESTAMP" in p.message
    (p,) = conf.load({"PRODUCER": {"GROUP": "g", "RETRY_TIMES_WHEN_SEND_FAILED": -5}}).problems
    assert p.message.startswith('ROCKETMQ["PRODUCER"]["RETRY_TIMES_WHEN_SEND_FAILED"]') and "-5" in p.message
    with override_settings(ROCKETMQ={"NAME_SERVER": "127.0.0.1:9", "PRODUCER": {
            "GROUP": "g", "RETRY_TIMES_WHEN_SEND_FAILED": -5}}):
        (m,) = check_settings()
        assert m.id == "rocketmq.E004" and "RETRY_TIMES_WHEN_SEND_FAILED" in m.msg


def test_missing_producer_group_is_a_check_error():
    with override_settings(ROCKETMQ={"NAME_SERVER": "127.0.0.1:9"}):
        (m,) = check_settings()
        assert m.id == "rocketmq.E008" and 'ROCKETMQ["PRODUCER"]["GROUP"]' in m.msg


def test_name_server_without_a_port_is_explained():
    with override_settings(ROCKETMQ={"NAME_SERVER": "localhost", "PRODUCER": {"GROUP": "g"}}):
        (m,) = check_name_server()
        assert m.id == "rocketmq.W002" and "localhost" in m.msg and "host:port" in m.msg


def test_listener_keywords_values_and_payload_types_are_checked():
    """Issue 25, defect 5: a misspelt listener keyword, an out-of-range consumer option and a
    payload type the converter cannot produce (a Django model) are check errors naming the
    listener and the keyword; starting such a listener raises the same message."""
    from rocketmq_sdk.integrations.django.checks import check_listeners
    from rocketmq_sdk.integrations.django.listeners import ListenerContainer, registry, rocketmq_listener

    def takes_order(order: Order) -> None:
        pass

    try:
        rocketmq_listener(topic="t1", consumer_group="g_typo", name="typo", consume_thread_numbr=4)(
            lambda payload: None)
        rocketmq_listener(topic="t1", consumer_group="g_range", name="range", pull_batch_size=5000)(
            lambda payload: None)
        rocketmq_listener(topic="t1", consumer_group="g_model", name="model")(takes_order)
        messages = {m.id: m for m in check_listeners()}
        assert sorted(messages) == ["rocketmq.E004", "rocketmq.E009", "rocketmq.E010"]
        typo = messages["rocketmq.E009"]
        assert "typo" in typo.msg and "consume_thread_numbr" in typo.msg
        assert typo.hint == 'did you mean "consume_thread_number"?'
        assert "range" in messages["rocketmq.E004"].msg and "pull_batch_size" in messages["rocketmq.E004"].msg
        assert "Order" in messages["rocketmq.E010"].msg
        with pytest.raises(ImproperlyConfigured, match="consume_thread_numbr.*consume_thread_number"):
            ListenerContainer(registry["typo"])
    finally:
        for name in ("typo", "range", "model"):
            registry.pop(name, None)
