"""Client keyword arguments are typed for IDEs, and a typo names the setting meant (issue 17 item 8)."""

from __future__ import annotations

import dataclasses
import typing

import pytest
from rocketmq_sdk import LitePullConsumer, Producer, PullConsumer, PushConsumer
from rocketmq_sdk.config import ConsumerConfig, LitePullConsumerConfig, ProducerConfig
from rocketmq_sdk.config_types import ConsumerSettings, LitePullConsumerSettings, ProducerSettings
from rocketmq_sdk.exceptions import IllegalArgumentError
from rocketmq_sdk.producer import TransactionProducer


@pytest.mark.parametrize("config, settings", [(ProducerConfig, ProducerSettings), (ConsumerConfig, ConsumerSettings),
                                              (LitePullConsumerConfig, LitePullConsumerSettings)])
def test_typed_settings_list_exactly_the_config_fields(config, settings):
    fields = {f.name for f in dataclasses.fields(config)} - {"namesrv_addr"}
    assert set(typing.get_type_hints(settings)) == fields


@pytest.mark.parametrize("cls, settings", [(Producer, ProducerSettings), (TransactionProducer, ProducerSettings),
                                           (PushConsumer, ConsumerSettings), (PullConsumer, ConsumerSettings),
                                           (LitePullConsumer, LitePullConsumerSettings)])
def test_client_signatures_unpack_their_settings(cls, settings):
    hints = typing.get_type_hints(cls.__init__)
    assert hints["config"] == typing.Unpack[settings]


def test_unknown_setting_suggests_the_nearest_name():
    with pytest.raises(IllegalArgumentError, match=r"send_msg_timout \(did you mean send_msg_timeout\?\)"):
        Producer("g", "127.0.0.1:9876", send_msg_timout=1000)
    with pytest.raises(IllegalArgumentError, match=r"pull_batch_sise \(did you mean pull_batch_size\?\)"):
        PushConsumer("g", "127.0.0.1:9876", pull_batch_sise=8)
    with pytest.raises(IllegalArgumentError) as exc:
        Producer("g", "127.0.0.1:9876", zzz=1)
    assert "did you mean" not in str(exc.value)


def test_name_server_list_of_every_client_and_the_admin_client(monkeypatch):
    from rocketmq_sdk.admin import parse_namesrv_addr
    from rocketmq_sdk.config import ClientConfig, split_namesrv_addr

    monkeypatch.setenv("NAMESRV_ADDR", "env-a:9876; env-b:9876")
    assert ClientConfig(namesrv_addr=" a:9876;b:9876; ").namesrv_addr_list == ["a:9876", "b:9876"]
    assert ClientConfig().namesrv_addr_list == ["env-a:9876", "env-b:9876"]
    assert split_namesrv_addr(["x:1", " ", "y:2 "]) == ["x:1", "y:2"]
    assert parse_namesrv_addr("") == ["env-a:9876", "env-b:9876"]
    monkeypatch.delenv("NAMESRV_ADDR")
    assert ClientConfig().namesrv_addr_list == []
    with pytest.raises(IllegalArgumentError, match="NAMESRV_ADDR"):
        parse_namesrv_addr(None)
