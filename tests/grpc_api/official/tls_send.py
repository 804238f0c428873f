"""Sends one message with the official 5.x Producer over TLS (tls_enable=True; the proxy's CA comes
from $GRPC_DEFAULT_SSL_ROOTS_FILE_PATH, grpc's root store override); prints its message id."""

import json
import sys

from rocketmq import ClientConfiguration, Credentials, Message, Producer

endpoints, topic = sys.argv[1], sys.argv[2]
producer = Producer(ClientConfiguration(endpoints, Credentials()), (topic,), tls_enable=True)
producer.startup()
try:
    m = Message()
    m.topic, m.body = topic, b"over tls"
    print(json.dumps({"id": producer.send(m).message_id}), flush=True)
finally:
    producer.shutdown()
