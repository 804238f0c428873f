"""The properties/config toolkit (``rocketmq_sdk.properties``) shared by the SDK, the admin
client, the broker and the name server."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import pytest
from rocketmq_broker.broker.config import BrokerConfig
from rocketmq_broker.store.config import FlushDiskType, StoreConfig
from rocketmq_sdk.properties import (
    INLINE,
    apply_properties,
    camel,
    convert_value,
    format_properties,
    parse_properties,
    snake,
    typed_settings,
)


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclass
class Inner:
    ratio: float = 0.5
    mode: Color = Color.RED


@dataclass
class Outer:
    listen_port: int = 9876
    tls_enable: bool = False
    cert_path: str | None = None
    broker_ip1: str = "127.0.0.1"
    inner: Inner = field(default_factory=Inner, metadata=INLINE)


@pytest.mark.parametrize("py, java", [("broker_cluster_name", "brokerClusterName"), ("broker_ip1", "brokerIP1"),
                                      ("client_ip", "clientIP"), ("tls_enable", "tlsEnable"),
                                      ("disk_max_used_space_ratio", "diskMaxUsedSpaceRatio"),
                                      ("is_force", "isForce"), ("topic", "topic")])
def test_camel_and_snake_are_inverse_on_rocketmq_names(py, java):
    assert camel(py) == java and snake(java) == py


def test_parse_properties_reads_java_properties_text():
    text = "# comment\n! other comment\n\n a = 1 \nb:2\nc=x=y\nempty=\na=3\n"
    assert parse_properties(text) == {"a": "3", "b": "2", "c": "x=y", "empty": ""}


@pytest.mark.parametrize("raw, tp, want", [("true", bool, True), ("FALSE", bool, False), (" 42 ", int, 42),
                                           ("0.85", float, 0.85), ("", str | None, None),
                                           ("/x.pem", str | None, "/x.pem"), ("blue", Color, Color.BLUE),
                                           ("BLUE", Color, Color.BLUE), ("SYNC_FLUSH", FlushDiskType, FlushDiskType.SYNC_FLUSH)])
def test_convert_value(raw, tp, want):
    assert convert_value(raw, tp) == want


@pytest.mark.parametrize("raw, tp, says", [("yes", bool, "not a boolean"), ("1", bool, "not a boolean"),
                                           ("x", int, "not an integer"), ("7%", float, "not a number"),
                                           ("green", Color, "not one of red, blue")])
def test_convert_value_refuses_what_does_not_parse(raw, tp, says):
    with pytest.raises(ValueError, match=says):
        convert_value(raw, tp)


def test_typed_settings_routes_inline_keys_and_reports_unknown_ones():
    unknown: list[str] = []
    got = typed_settings(Outer, {"listenPort": "1", "tlsEnable": "false", "certPath": "", "ratio": "0.9",
                                 "mode": "blue", "nope": "1"}, on_unknown=unknown.append)
    assert got == {"listen_port": 1, "tls_enable": False, "cert_path": None, "ratio": 0.9, "mode": Color.BLUE}
    assert unknown == ["nope"]


def test_apply_properties_sets_nothing_when_one_value_is_bad():
    obj = Outer()
    with pytest.raises(ValueError, match="listenPort"):
        apply_properties(obj, {"tlsEnable": "true", "listenPort": "x"})
    assert obj == Outer()
    assert apply_properties(obj, {"tlsEnable": "true", "ratio": "0.1"}) == {"tls_enable": True, "ratio": 0.1}
    assert obj.tls_enable is True and obj.inner.ratio == 0.1


def test_format_properties_flattens_and_round_trips():
    obj = Outer(cert_path=None, inner=Inner(mode=Color.BLUE))
    text = format_properties(obj)
    assert text.splitlines() == ["listenPort=9876", "tlsEnable=false", "certPath=", "brokerIP1=127.0.0.1",
                                 "ratio=0.5", "mode=blue"]
    again = Outer()
    apply_properties(again, parse_properties(text))
    assert again == obj


def test_broker_config_holds_one_store_config():
    store = StoreConfig(store_path_root_dir="/s")
    cfg = BrokerConfig(store=store, broker_name="b1")
    assert cfg.store is store and cfg.store_path_root_dir == "/s"
    cfg.disk_max_used_space_ratio = 60  # flat access reads and writes the one StoreConfig
    assert store.disk_max_used_space_ratio == 60
    flat = BrokerConfig(store_path_root_dir="/t", flush_disk_type="SYNC_FLUSH", max_message_size="1024")
    assert flat.store.flush_disk_type is FlushDiskType.SYNC_FLUSH and flat.store.max_message_size == 1024
    assert "store_path_root_dir" not in vars(flat)  # not copied beside the store's
    with pytest.raises(TypeError, match="unknown BrokerConfig setting"):
        BrokerConfig(no_such_key=1)


def test_broker_conf_keys_of_broker_and_store_share_one_file():
    cfg = BrokerConfig.from_properties({"brokerName": "b2", "storePathRootDir": "/r", "flushDiskType": "SYNC_FLUSH",
                                        "flushIntervalCommitLog": "200", "diskMaxUsedSpaceRatio": "60"})
    assert (cfg.broker_name, cfg.store.store_path_root_dir, cfg.store.flush_disk_type,
            cfg.store.flush_interval_commit_log, cfg.store.disk_max_used_space_ratio) == \
        ("b2", "/r", FlushDiskType.SYNC_FLUSH, 200, 60)
    lines = format_properties(cfg).splitlines()
    assert "brokerName=b2" in lines and "flushDiskType=SYNC_FLUSH" in lines and "flushIntervalCommitLog=200" in lines


def test_no_broker_field_shadows_a_store_setting():
    """A store setting lives in StoreConfig only (BrokerConfig reaches it through ``store``); a
    BrokerConfig field of the same name would hold a second value the store never reads."""
    from dataclasses import fields

    shadowed = {f.name for f in fields(BrokerConfig) if f.name != "store"} & {f.name for f in fields(StoreConfig)}
    assert not shadowed, f"move {sorted(shadowed)} out of BrokerConfig: they are StoreConfig settings"
