"""Timer messages from the template and the on-commit publishers against reference brokers
answering as RocketMQ 5.3.3 (kept as timers) and 4.9.8 (the nearest delay level not shorter, with
a WARNING). Run by Django's test runner from test_django_timers.py."""

from __future__ import annotations

import asyncio
import logging
import time

from django.db import transaction
from django.dispatch import Signal
from django.test import TestCase
from rocketmq_broker.embedded import start_dev_cluster
from rocketmq_sdk.integrations.django import rocketmq_template
from rocketmq_sdk.integrations.django.publishers import publish_model_events, publish_on_signal
from rocketmq_sdk.integrations.django.testing import using_name_server
from rocketmq_sdk.protocol.codes import MessageConst as MC

from django_integration.conftest import read_topic, unique
from django_integration.testapp.models import Order

LOGGER = "rocketmq_sdk.integrations.django"
_clusters: dict = {}
shipped = Signal()


def setUpModule() -> None:  # noqa: N802 - unittest's name
    # the broker's default delay levels (1 s, 5 s, 10 s ...), not the test settings' all-1 s table
    for version in ("5.3.3", "4.9.8"):
        _clusters[version] = start_dev_cluster(in_process=True, broker_config={"broker_version": version})


def tearDownModule() -> None:  # noqa: N802
    for cluster in _clusters.values():
        cluster.stop()


def _now_ms() -> int:
    return int(time.time() * 1000)


class TimersOn5x(TestCase):
    def test_template_sends_timer_messages_that_are_delivered_when_due_never_early(self) -> None:
        cluster = _clusters["5.3.3"]
        topic = unique("dj_timer5")
        with using_name_server(cluster.namesrv_addr), self.assertNoLogs(LOGGER, logging.WARNING):
            template = rocketmq_template()
            at = _now_ms() + 2000
            template.send(topic, {"n": 1}, keys="delay", delay_ms=1500)
            template.send(topic, {"n": 2}, keys="deliver", deliver_time_ms=at)
            template.send_async(topic, {"n": 3}, keys="async", delay_ms=1000).result(10)
            asyncio.run(template.asend(topic, {"n": 4}, keys="asend", delay_ms=1000))
            template.send_oneway(topic, {"n": 5}, keys="oneway", delay_ms=1000)
            got = {m.keys[0]: m for m in read_topic(cluster, topic, 5)}
        self.assertEqual(sorted(got), ["asend", "async", "delay", "deliver", "oneway"])
        for key, m in got.items():
            # stored by the broker's timer wheel (TIMER_OUT_MS), not as a delay level
            self.assertIn(MC.TIMER_OUT_MS, m.properties, key)
            self.assertNotIn(MC.DELAY_TIME_LEVEL, m.properties, key)
        self.assertGreaterEqual(got["delay"].store_timestamp - got["delay"].born_timestamp, 1500)
        self.assertGreaterEqual(got["deliver"].store_timestamp, at)
        self.assertGreaterEqual(got["async"].store_timestamp - got["async"].born_timestamp, 1000)

    def test_model_events_published_on_commit_wait_delay_ms_in_the_broker(self) -> None:
        cluster = _clusters["5.3.3"]
        topic = unique("dj_timer5_events")
        publish_model_events(Order, topic, events=("created",), delay_ms=1500)
        with using_name_server(cluster.namesrv_addr), self.assertNoLogs(LOGGER, logging.WARNING):
            with self.captureOnCommitCallbacks(execute=True), transaction.atomic():
                Order.objects.create(number="T5-1")
                self.assertEqual(read_topic(cluster, topic, 0, timeout_s=0.5), [])  # nothing before commit
            (m,) = read_topic(cluster, topic, 1)
        self.assertIn(MC.TIMER_OUT_MS, m.properties)
        self.assertEqual((m.tags, m.keys), ("created", ["testapp.order-" + str(Order.objects.get().pk)]))
        self.assertGreaterEqual(m.store_timestamp - m.born_timestamp, 1500)


class DelayLevelsOn4x(TestCase):
    def test_template_timer_becomes_the_nearest_delay_level_not_shorter_with_one_warning(self) -> None:
        cluster = _clusters["4.9.8"]
        topic = unique("dj_timer4")
        with using_name_server(cluster.namesrv_addr), self.assertLogs(LOGGER, logging.DEBUG) as logs:
            template = rocketmq_template()
            template.send(topic, "soon", keys="soon", delay_ms=800)            # level 1: 1 s
            template.send(topic, "past", keys="past", deliver_time_ms=_now_ms() - 5000)   # no delay
            got = {m.keys[0]: m for m in read_topic(cluster, topic, 2)}
        warnings = [r.getMessage() for r in logs.records if r.levelno == logging.WARNING]
        self.assertEqual(len(warnings), 1, logs.output)
        self.assertIn("timer of 800 ms sent as delay level 1 (1 s)", warnings[0])
        self.assertTrue(any("sent as no delay (time past)" in r.getMessage() and r.levelno == logging.DEBUG
                            for r in logs.records), logs.output)
        for m in got.values():
            self.assertFalse(set(MC.TIMER_PROPERTIES) & set(m.properties), m.properties)
        self.assertGreaterEqual(got["soon"].store_timestamp - got["soon"].born_timestamp, 900)
        self.assertLess(got["past"].store_timestamp - got["past"].born_timestamp, 900)

    def test_signal_publisher_on_commit_falls_back_to_a_delay_level(self) -> None:
        cluster = _clusters["4.9.8"]
        topic = unique("dj_timer4_signal")

        @publish_on_signal(shipped, topic, keys="shipped-1", delay_ms=700)
        def on_shipped(sender, **kwargs):
            return {"shipped": kwargs["number"]}

        with using_name_server(cluster.namesrv_addr), self.assertLogs(LOGGER, logging.WARNING) as logs:
            with self.captureOnCommitCallbacks(execute=True), transaction.atomic():
                shipped.send(sender=None, number="S1")
            (m,) = read_topic(cluster, topic, 1)
        self.assertIn("timer of 700 ms sent as delay level 1 (1 s)", logs.output[0])
        self.assertFalse(set(MC.TIMER_PROPERTIES) & set(m.properties), m.properties)
        self.assertGreaterEqual(m.store_timestamp - m.born_timestamp, 900)
