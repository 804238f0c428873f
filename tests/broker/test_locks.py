"""LOCK_BATCH_MQ / UNLOCK_BATCH_MQ: one owner per queue, renewal, expiry, release."""

from __future__ import annotations

from rocketmq_broker.broker.lock_manager import RebalanceLockManager
from rocketmq_sdk.protocol.bodies import LockBatchRequestBody, LockBatchResponseBody
from rocketmq_sdk.protocol.codes import RequestCode, ResponseCode
from rocketmq_sdk.protocol.message import MessageQueue

MQS = [MessageQueue("T", "broker-a", i) for i in range(3)]


def test_lock_grants_each_queue_to_one_client_until_released(cluster, client):
    def lock(cid, mqs):
        body = LockBatchRequestBody(client_id=cid, consumer_group="G", mq_set=mqs).to_json(standard=True)
        r = client.invoke(cluster.broker_addr, RequestCode.LOCK_BATCH_MQ, body=body)
        assert r.code == ResponseCode.SUCCESS
        return sorted(LockBatchResponseBody.from_json(r.body).lock_ok_mq_set)

    assert lock("c1", MQS[:2]) == MQS[:2]
    assert lock("c2", MQS) == [MQS[2]]            # c1's queues stay c1's
    assert lock("c1", MQS[:2]) == MQS[:2]         # renewal by the owner
    body = LockBatchRequestBody(client_id="c1", consumer_group="G", mq_set=[MQS[0]]).to_json(standard=True)
    assert client.invoke(cluster.broker_addr, RequestCode.UNLOCK_BATCH_MQ, body=body).code == ResponseCode.SUCCESS
    assert lock("c2", MQS) == [MQS[0], MQS[2]]


def test_an_expired_lock_can_be_taken_over():
    m = RebalanceLockManager(lock_max_live_time_ms=-1)  # every lock is already expired
    assert m.try_lock_batch("G", MQS, "c1") == MQS
    assert m.try_lock_batch("G", MQS, "c2") == MQS
