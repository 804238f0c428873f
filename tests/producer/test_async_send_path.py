"""The Task-free send_async/send_oneway paths (``producer/async_send.py``) on a scripted fake:
same requests, results, errors, retries and timeouts as the coroutine path they replace."""

from __future__ import annotations

import asyncio
import time

import pytest
from rocketmq_sdk import Message, MQBrokerError, Producer, RemotingTimeoutError, SendStatus
from rocketmq_sdk.producer import async_send
from rocketmq_sdk.protocol.codes import RequestCode, ResponseCode
from rocketmq_sdk.protocol.headers import SendMessageRequestHeader

from tests.conftest import wait_until
from tests.sdk.fakes import ScriptedCluster

SEND = RequestCode.SEND_MESSAGE_V2


class SilentCluster(ScriptedCluster):
    """Sends to broker ``silent`` are recorded and never answered."""

    async def _send(self, channel, cmd):
        if SendMessageRequestHeader.from_v2(cmd.ext_fields).bname == "silent":
            await asyncio.sleep(30)
        return await super()._send(channel, cmd)


@pytest.fixture
def paths(monkeypatch):
    """Counts first attempts started without a Task and those that fell back to a coroutine."""
    seen = {"fast": 0, "fallback": 0}
    start, fallback = async_send.AsyncSend.start, async_send.AsyncSend.fallback

    def counted_start(self):
        seen["fast"] += 1
        return start(self)

    def counted_fallback(self):
        seen["fallback"] += 1
        return fallback(self)

    monkeypatch.setattr(async_send.AsyncSend, "start", counted_start)
    monkeypatch.setattr(async_send.AsyncSend, "fallback", counted_fallback)
    return seen


def test_results_match_the_broker_answers_and_the_connection_is_reused(paths):
    with ScriptedCluster(brokers=("b",)) as fake, Producer("pg_as1", fake.addr) as p:
        p.send(Message("TopicAs", b"warm"))  # route, broker address and connection cached
        futs = [p.send_async(Message("TopicAs", f"m{i}".encode(), tags="T")) for i in range(50)]
        results = [f.result(5) for f in futs]
        assert p.wait_for_in_flight(5)
    assert paths["fast"] == 50 and paths["fallback"] == 0
    assert all(r.send_status is SendStatus.SEND_OK for r in results)
    stored = {m.body: m for m in fake.stored("TopicAs")}
    for i, r in enumerate(results):
        m = stored[f"m{i}".encode()]
        assert r.msg_id == m.properties["UNIQ_KEY"] and r.queue_offset == m.queue_offset
        assert r.message_queue.queue_id == m.queue_id and m.properties["TAGS"] == "T"


def test_non_retryable_code_fails_the_future_after_one_request(paths):
    with ScriptedCluster(brokers=("bad",), fail_send={"bad": ResponseCode.MESSAGE_ILLEGAL}) as fake:
        with Producer("pg_as2", fake.addr) as p:
            p.fetch_publish_queues("TopicAs2")  # route cached (the fake's one address is connected)
            with pytest.raises(MQBrokerError) as first:
                p.send_async(Message("TopicAs2", b"x")).result(5)
            with pytest.raises(MQBrokerError) as second:
                p.send_async(Message("TopicAs2", b"x")).result(5)
        assert first.value.code == second.value.code == ResponseCode.MESSAGE_ILLEGAL
        assert len(fake.requests_of(SEND)) == 2
    assert paths == {"fast": 2, "fallback": 0}


def test_retryable_failures_retry_on_the_other_broker_and_not_store_ok_results_too():
    with ScriptedCluster(brokers=("bad", "good"), fail_send={"bad": ResponseCode.SYSTEM_ERROR}) as fake:
        with Producer("pg_as3", fake.addr, retry_times_when_send_async_failed=1) as p:
            p.fetch_publish_queues("TopicAs3")
            results = [p.send_async(Message("TopicAs3", b"x")).result(5) for _ in range(8)]
    assert {r.message_queue.broker_name for r in results} == {"good"}
    with ScriptedCluster(brokers=("slow", "good"), fail_send={"slow": ResponseCode.FLUSH_DISK_TIMEOUT}) as fake:
        with Producer("pg_as4", fake.addr, retry_another_broker_when_not_store_ok=True) as p:
            p.fetch_publish_queues("TopicAs4")
            results = [p.send_async(Message("TopicAs4", b"x")).result(5) for _ in range(8)]
    assert {r.send_status for r in results} == {SendStatus.SEND_OK}


def test_no_answer_times_out_and_leaves_nothing_pending(paths):
    with SilentCluster(brokers=("silent",)) as fake:
        with Producer("pg_as5", fake.addr, send_msg_timeout=300, retry_times_when_send_async_failed=0) as p:
            p.fetch_publish_queues("TopicAs5")
            started = time.monotonic()
            with pytest.raises(RemotingTimeoutError):
                p.send_async(Message("TopicAs5", b"x")).result(5)
            assert 0.25 < time.monotonic() - started < 3
            # a shorter timeout queued behind a longer one still expires on time
            slow = p.send_async(Message("TopicAs5", b"long"), timeout_ms=2500)
            started = time.monotonic()
            with pytest.raises(RemotingTimeoutError):
                p.send_async(Message("TopicAs5", b"short"), timeout_ms=200).result(5)
            assert time.monotonic() - started < 1.5
            with pytest.raises(RemotingTimeoutError):
                slow.result(5)
            remoting = p.instance.remoting
            channels = [remoting.ready_channel(addr) for addr in remoting.addresses]
            assert channels and all(ch.pending_count == 0 for ch in channels)
            assert p.wait_for_in_flight(5)
    assert paths == {"fast": 3, "fallback": 0}


def test_explicit_queue_is_one_attempt_without_retry(paths):
    with ScriptedCluster(brokers=("bad", "good"), fail_send={"bad": ResponseCode.SYSTEM_ERROR}) as fake:
        with Producer("pg_as6", fake.addr) as p:
            queues = p.fetch_publish_queues("TopicAs6")
            p.send(Message("TopicAs6", b"warm"), mq=next(q for q in queues if q.broker_name == "good"))
            bad = next(q for q in queues if q.broker_name == "bad")
            with pytest.raises(MQBrokerError):
                p.send_async(Message("TopicAs6", b"x"), mq=bad).result(5)
        tried = [SendMessageRequestHeader.from_v2(r.ext_fields) for r in fake.requests_of(SEND)]
    assert [(h.bname, h.queue_id) for h in tried[1:]] == [("bad", bad.queue_id)]


def test_oneway_requests_carry_the_oneway_flag_and_the_same_header():
    with ScriptedCluster(brokers=("b",)) as fake, Producer("pg_as7", fake.addr) as p:
        p.send(Message("TopicAs7", b"warm"))
        for i in range(20):
            p.send_oneway(Message("TopicAs7", f"o{i}".encode(), keys="K"))
        assert p.wait_for_in_flight(5)
        wait_until(lambda: len(fake.stored("TopicAs7")) == 21, 5)
        sent = fake.requests_of(SEND)
    headers = [SendMessageRequestHeader.from_v2(r.ext_fields) for r in sent]
    assert {h.producer_group for h in headers} == {"pg_as7"} and all(h.bname == "b" for h in headers)
    assert sorted(m.body for m in fake.stored("TopicAs7"))[:3] == [b"o0", b"o1", b"o10"]


def test_closed_connection_falls_back_to_the_coroutine_path_and_reconnects(paths):
    embedded = pytest.importorskip("rocketmq_broker.embedded")
    with embedded.start_dev_cluster(in_process=True) as cluster, Producer("pg_as8", cluster.namesrv_addr) as p:
        assert p.send_async(Message("TopicAs8", b"route")).result(10).send_status is SendStatus.SEND_OK
        inst = p.instance
        addr = inst.find_broker_master(p.fetch_publish_queues("TopicAs8")[0].broker_name)

        async def close() -> None:
            inst.remoting.close_connection(addr)

        inst.run(close(), 5)
        before = dict(paths)
        results = [p.send_async(Message("TopicAs8", b"x")).result(10) for _ in range(3)]
    assert all(r.send_status is SendStatus.SEND_OK for r in results)
    assert paths["fast"] - before["fast"] == 3 and paths["fallback"] - before["fallback"] == 1


class _RecordingHook:
    def __init__(self) -> None:
        self.before: list[int] = []
        self.after: list[tuple[int, int]] = []

    def before_request(self, addr, cmd):
        cmd.ext_fields["hooked"] = "yes"  # a hook may change the header (ACL signing does)
        self.before.append(cmd.opaque)

    def after_response(self, addr, cmd, resp):
        self.after.append((cmd.opaque, resp.opaque))


def test_a_hook_installed_while_sends_wait_for_the_loop_sees_them_leave_and_return(paths):
    """Sends prepared without RPC hooks keep only their frame; a hook installed before the loop
    writes them gets a fresh request to sign, and sees its answer."""
    import threading

    with ScriptedCluster(brokers=("b",)) as fake, Producer("pg_as_hook", fake.addr) as p:
        p.send(Message("TopicAh", b"warm"))
        inst = p.instance
        hold = threading.Event()
        inst.loop_thread.loop.call_soon_threadsafe(lambda: hold.wait(5))  # the loop is busy
        futs = [p.send_async(Message("TopicAh", f"h{i}".encode())) for i in range(5)]
        hook = _RecordingHook()
        inst.remoting.rpc_hooks.append(hook)
        hold.set()
        results = [f.result(5) for f in futs]
        assert p.wait_for_in_flight(5)
        inst.remoting.rpc_hooks.remove(hook)
    assert all(r.send_status is SendStatus.SEND_OK for r in results)
    assert len(hook.before) == 5 and sorted(o for o, _ in hook.after) == sorted(hook.before)
    assert all(a == b for a, b in hook.after)
    sends = [r for r in fake.requests_of(SEND) if r.body.startswith(b"h")]
    assert len(sends) == 5 and all(r.ext_fields.get("hooked") == "yes" for r in sends)
