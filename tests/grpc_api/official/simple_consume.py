"""Receives with the official 5.x SimpleConsumer until COUNT distinct messages were acked: the
first delivery of the message whose body is b"redeliver" is not acked (it must come again after
its invisible duration, with delivery attempt 2); prints one JSON line per delivery."""

import json
import sys
import time

from rocketmq import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer

endpoints, topic, group, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
consumer = SimpleConsumer(ClientConfiguration(endpoints, Credentials()), group, {topic: FilterExpression()},
                          await_duration=2)
consumer.startup()
acked: set[str] = set()
deadline = time.monotonic() + 60
try:
    while len(acked) < count and time.monotonic() < deadline:
        for m in consumer.receive(16, 2):  # invisible for 2 s
            print(json.dumps({"id": m.message_id, "body": m.body.decode(), "tag": m.tag, "keys": sorted(m.keys),
                              "props": dict(m.properties), "group": m.message_group,
                              "attempt": m.delivery_attempt}), flush=True)
            if m.body == b"redeliver" and m.delivery_attempt == 1:
                continue
            consumer.ack(m)
            acked.add(m.message_id)
finally:
    consumer.shutdown()
sys.exit(0 if len(acked) >= count else 3)
