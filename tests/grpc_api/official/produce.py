"""Sends with the official 5.x Producer: a normal message (tag, two keys, a property), three FIFO
messages of one message group, and a message delayed by 2-3 s; prints one JSON line per send.
Arguments: endpoints, topic [, namespace]."""

import json
import sys
import time

from rocketmq import ClientConfiguration, Credentials, Message, Producer

endpoints, topic = sys.argv[1], sys.argv[2]
namespace = sys.argv[3] if len(sys.argv) > 3 else ""  # the 5.x resource namespace, if any
producer = Producer(ClientConfiguration(endpoints, Credentials(), namespace=namespace), (topic,))
producer.startup()
try:
    m = Message()
    m.topic, m.body, m.tag = topic, b"normal", "TagN"
    m.keys = "k1"
    m.keys = "k2"
    m.add_property("color", "red")
    r = producer.send(m)
    print(json.dumps({"kind": "normal", "id": r.message_id}), flush=True)
    for i in range(3):
        m = Message()
        m.topic, m.body, m.tag, m.message_group = topic, f"fifo-{i}".encode(), "TagF", "order-42"
        r = producer.send(m)
        print(json.dumps({"kind": "fifo", "id": r.message_id}), flush=True)
    m = Message()
    m.topic, m.body = topic, b"delayed"
    deliver_s = int(time.time()) + 3  # this client takes seconds since the epoch
    m.delivery_timestamp = deliver_s
    r = producer.send(m)
    print(json.dumps({"kind": "delay", "id": r.message_id, "deliver_ms": deliver_s * 1000}), flush=True)
finally:
    producer.shutdown()
