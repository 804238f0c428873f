"""The official 5.x PushConsumer: QueryAssignment, ReceiveMessage, AckMessage; the first delivery
of b"fail-once" returns FAILURE (the consumer asks for it again). Prints one JSON line per
delivery and exits once COUNT distinct messages succeeded."""

import json
import sys
import threading
import time

from rocketmq import (
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    MessageListener,
    PushConsumer,
)

endpoints, topic, group, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
done: set[str] = set()
lock = threading.Lock()
all_done = threading.Event()


class Listener(MessageListener):
    def consume(self, message):
        line = json.dumps({"id": message.message_id, "body": message.body.decode(), "tag": message.tag,
                           "attempt": message.delivery_attempt})
        with lock:  # the listener runs on several threads: one whole line at a time
            print(line, flush=True)
        if message.body == b"fail-once" and message.delivery_attempt == 1:
            return ConsumeResult.FAILURE
        with lock:
            done.add(message.message_id)
            if len(done) >= count:
                all_done.set()
        return ConsumeResult.SUCCESS


consumer = PushConsumer(ClientConfiguration(endpoints, Credentials()), group, Listener(), {topic: FilterExpression()})
consumer.startup()
ok = all_done.wait(60)
time.sleep(0.5)  # let the last ack go out before shutdown
consumer.shutdown()
sys.exit(0 if ok else 3)
