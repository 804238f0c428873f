"""The publish path's per-message work (issue 26, producer CPU): what a cut there must keep.

Every stored envelope carries a ``delivery_tag`` (a consumer of any version checks it is there,
and dead-letters a message without one), unique across channels and processes; publishing draws
no random UUID per message for it (kombu's default tag, ``uuid4()``, read ``os.urandom`` on
every publish).
"""

from __future__ import annotations

import json
from unittest import mock

import kombu
from celery_workers import isolated_options

from tests.celery.test_transport import read_topic


def test_every_envelope_has_its_own_delivery_tag_drawn_without_a_uuid_per_publish(rocketmq_cluster):
    opts = isolated_options(queue_nums=1)
    q = kombu.Queue("tags")
    conns = [kombu.Connection(f"rocketmq://{rocketmq_cluster.namesrv_addr}", transport_options=opts)
             for _ in range(2)]
    try:
        for c in conns:  # declared and warmed up first: the publishes below are the steady state
            kombu.Producer(c.default_channel).publish("warm", routing_key="tags", declare=[q])
        with mock.patch("kombu.transport.virtual.base.uuid", side_effect=AssertionError("uuid per publish")):
            for c in conns:
                producer = kombu.Producer(c.default_channel)
                for i in range(3):
                    producer.publish(i, routing_key="tags", declare=[q], serializer="json")
        topic = conns[0].transport.broker_client.naming.queue_topic("tags")
    finally:
        for c in conns:
            c.release()
    stored = read_topic(rocketmq_cluster.namesrv_addr, topic, 8)
    tags = [json.loads(m.body)["properties"]["delivery_tag"] for m in stored]
    assert len(stored) == 8
    assert all(isinstance(t, str) and t for t in tags)
    assert len(set(tags)) == 8
