"""A gRPC PushConsumer in a process of its own, for the SIGKILL test: prints one line per
consumed message body (flushed) and holds every listener call for ``hold`` seconds, so messages
are in flight when the process dies. Arguments: endpoints, topic, group, invisible_s, hold_s."""

import sys
import threading
import time

from rocketmq_sdk import PushConsumer
from rocketmq_sdk.consumer.listener import ConsumeConcurrentlyStatus

endpoints, topic, group, invisible_s, hold_s = sys.argv[1:6]
lock = threading.Lock()
consumer = PushConsumer(group, endpoints=endpoints, protocol="grpc", await_duration=1,
                        invisible_duration=float(invisible_s), consume_thread_min=4, consume_thread_max=4,
                        consume_from_where="CONSUME_FROM_FIRST_OFFSET")
consumer.subscribe(topic)


@consumer.listener
def handle(msgs, ctx):
    time.sleep(float(hold_s))  # the work: messages stay unacknowledged meanwhile
    with lock:
        for m in msgs:
            print(m.body.decode(), flush=True)
    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS


consumer.start()
threading.Event().wait()  # until killed
