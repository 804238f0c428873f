"""Transactions with the official 5.x Producer and a TransactionChecker: one committed, one
rolled back, one left open for the broker's check (the checker commits it). Prints one JSON line
per half message and per check, then stays up (answering checks) until stdin closes."""

import json
import sys

from rocketmq import ClientConfiguration, Credentials, Message, Producer, TransactionChecker
from rocketmq.grpc_protocol import TransactionResolution


class Checker(TransactionChecker):
    def check(self, message):
        print(json.dumps({"kind": "check", "id": message.message_id, "body": message.body.decode()}), flush=True)
        return TransactionResolution.COMMIT


endpoints, topic = sys.argv[1], sys.argv[2]
producer = Producer(ClientConfiguration(endpoints, Credentials()), (topic,), Checker())
producer.startup()
try:
    for body, end in (("tx-commit", "commit"), ("tx-rollback", "rollback"), ("tx-open", None)):
        tx = producer.begin_transaction()
        m = Message()
        m.topic, m.body, m.tag = topic, body.encode(), "TagT"
        r = producer.send(m, tx)
        if end == "commit":
            tx.commit()
        elif end == "rollback":
            tx.rollback()
        print(json.dumps({"kind": body, "id": r.message_id, "tx": r.transaction_id}), flush=True)
    sys.stdin.read()  # until the test closes stdin
finally:
    producer.shutdown()
