"""A consumer application stopped with Ctrl-C while a listener is busy (tests/first_hour).

argv: name server address, await_termination_timeout (ms), optional "orderly" (an orderly
listener instead of a concurrent one). Prints DONE/BUSY lines as the
listener sees messages; the test sends SIGINT once or twice.
"""

import logging
import sys
import threading
import time

from rocketmq_sdk import ConsumeConcurrentlyStatus, ConsumeOrderlyStatus, PushConsumer

logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")


def listener(msgs, context):
    for m in msgs:
        if m.body == b"slow":
            print("BUSY", flush=True)
            time.sleep(120)  # a listener that does not finish any time soon
        else:
            print("DONE", m.body.decode(), flush=True)
    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS


def orderly_listener(msgs, context):
    listener(msgs, context)
    return ConsumeOrderlyStatus.SUCCESS



consumer = PushConsumer("ctrl_c_cg", sys.argv[1], consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                        await_termination_timeout=int(sys.argv[2]), persist_consumer_offset_interval=600_000,
                        consume_thread_min=2, consume_thread_max=2, consume_message_batch_max_size=1)
consumer.subscribe("ctrl_c_topic", "*")
if sys.argv[3:] == ["orderly"]:
    consumer.register_message_listener(orderly_listener, orderly=True)
else:
    consumer.register_message_listener(listener)
consumer.start()
print("STARTED", flush=True)
try:
    threading.Event().wait()
except KeyboardInterrupt:
    print("INTERRUPTED", flush=True)
finally:
    consumer.shutdown()
print("EXITED", flush=True)
