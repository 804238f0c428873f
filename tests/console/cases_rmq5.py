"""The console against reference brokers answering as RocketMQ 5.3.3: a group's page shows the
consume mode set with ``setConsumeMode`` (run by Django's test runner from test_console.py)."""

from __future__ import annotations

from django.test import TestCase
from django.test.utils import override_settings
from django.urls import reverse
from rocketmq_broker import embedded
from rocketmq_sdk.admin import AdminClient
from rocketmq_sdk.integrations.django.console import lifecycle

from .support import make_user

_state: dict = {}


def setUpModule() -> None:  # noqa: N802 - unittest's name
    cluster = embedded.start_cluster(("broker-a",), broker_config={"broker_version": "5.3.3"})
    override = override_settings(ROCKETMQ_CONSOLE={"NAMESRV_ADDR": cluster.namesrv_addr, "SAMPLE_INTERVAL_S": 0.5})
    override.enable()
    _state.update(cluster=cluster, override=override)
    with AdminClient(cluster.namesrv_addr) as adm:
        adm.create_topic("PopOrders", cluster="DefaultCluster", read_queue_nums=2, write_queue_nums=2)
        adm.update_subscription_group("pop_cg", cluster="DefaultCluster")
        adm.set_consume_mode("pop_cg", "PopOrders", "POP", 2, cluster="DefaultCluster")


def tearDownModule() -> None:  # noqa: N802
    lifecycle.reset_clients()
    _state.pop("override").disable()
    _state.pop("cluster").stop()


class ConsumeModeTests(TestCase):
    @classmethod
    def setUpTestData(cls) -> None:
        make_user("viewer", "view_console")

    def test_group_page_shows_the_consume_mode(self) -> None:
        self.client.login(username="viewer", password="viewer-pw")
        resp = self.client.get(reverse("rocketmq_console:group", args=("pop_cg",)))
        self.assertContains(resp, 'id="consume-modes"')
        self.assertContains(resp, "<td>PopOrders</td><td>broker-a</td><td>POP</td><td class=\"num\">2</td>", html=False)
        resp = self.client.get(reverse("rocketmq_console:group", args=("other_cg",)))
        self.assertNotContains(resp, 'id="consume-modes"')
