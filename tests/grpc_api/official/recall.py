"""The official 5.x Producer's recall (RocketMQ 5.3): sends a message delivered in DELAY_S
seconds and a normal one, prints their receipts (with the recall handle), recalls the delayed one
and prints the message id the proxy answered."""

import json
import sys
import time

from rocketmq import ClientConfiguration, Credentials, Message, Producer

endpoints, topic, delay_s = sys.argv[1], sys.argv[2], int(sys.argv[3])
producer = Producer(ClientConfiguration(endpoints, Credentials()), (topic,))
producer.startup()
try:
    m = Message()
    m.topic, m.body = topic, b"recall-me"
    m.delivery_timestamp = int(time.time()) + delay_s  # this client takes seconds since the epoch
    delayed = producer.send(m)
    print(json.dumps({"kind": "delay", "id": delayed.message_id, "handle": delayed.recall_handle}), flush=True)
    m = Message()
    m.topic, m.body = topic, b"keep-me"
    normal = producer.send(m)
    print(json.dumps({"kind": "normal", "id": normal.message_id, "handle": normal.recall_handle}), flush=True)
    recalled = producer.recall_message(topic, delayed.recall_handle)
    print(json.dumps({"kind": "recalled", "id": recalled}), flush=True)
finally:
    producer.shutdown()
