"""Sends one message with the official 5.x Producer signed with the credentials given (access key,
secret key; empty: none); prints one JSON line: the message id, or the error class and 5.x code
(startup queries the topic's route, so a refusal may come there)."""

import json
import sys

from rocketmq import ClientConfiguration, Credentials, Message, Producer

endpoints, topic, ak, sk = sys.argv[1:5]
producer = Producer(ClientConfiguration(endpoints, Credentials(ak, sk)), (topic,))
try:
    producer.startup()
    m = Message()
    m.topic, m.body = topic, b"signed"
    print(json.dumps({"id": producer.send(m).message_id}), flush=True)
except Exception as exc:  # noqa: BLE001 - reported to the test
    print(json.dumps({"error": type(exc).__name__, "code": getattr(exc, "code", None), "text": str(exc)}), flush=True)
finally:
    try:
        producer.shutdown()
    except Exception:  # noqa: BLE001 - a producer that never started
        pass
