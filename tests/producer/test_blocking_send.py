"""Sync sends from the caller thread (``sync_send_in_caller_thread``): after the route is cached,
``send``/``send_batch`` use a blocking connection owned by the calling thread."""

from __future__ import annotations

import threading

import pytest
from rocketmq_sdk import Message, Producer, SendStatus
from rocketmq_sdk.protocol.acl import verify
from rocketmq_sdk.protocol.codes import RequestCode

from tests.interop.fake_cluster import FakeCluster

from .conftest import stored_count, unique, wait_until


class ThreadRecorder:
    def __init__(self) -> None:
        self.threads: list[str] = []

    def before_request(self, addr, cmd):
        if cmd.code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
            self.threads.append(threading.current_thread().name)

    def after_response(self, addr, cmd, resp):
        pass


@pytest.mark.parametrize("in_caller", [True, False])
def test_sync_sends_run_in_the_caller_thread_once_the_route_is_cached(cluster, in_caller):
    rec = ThreadRecorder()
    topic = unique("TopicBlk")
    with Producer(unique("pg"), cluster.namesrv_addr, rpc_hooks=[rec], sync_send_in_caller_thread=in_caller) as p:
        results = [p.send(Message(topic, f"m{i}".encode())) for i in range(5)]
        results.append(p.send_batch([Message(topic, b"b1"), Message(topic, b"b2")]))
        io_thread = p.instance.loop_thread.name
    assert all(r.send_status is SendStatus.SEND_OK for r in results)
    me = threading.current_thread().name
    assert rec.threads[0] == io_thread  # the first send looks the route up on the I/O loop
    assert set(rec.threads[1:]) == ({me} if in_caller else {io_thread})
    wait_until(lambda: stored_count(cluster.broker, topic) == 7, what="7 stored")


def test_many_threads_each_use_their_own_connection(cluster):
    topic = unique("TopicBlkMany")
    with Producer(unique("pg"), cluster.namesrv_addr) as p:
        p.send(Message(topic, b"route"))
        errors: list[BaseException] = []
        done = threading.Semaphore(0)
        release = threading.Event()

        def worker(n: int) -> None:
            try:
                for i in range(50):
                    p.send(Message(topic, f"{n}-{i}".encode()))
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)
            done.release()
            release.wait(20)

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for _ in threads:
            assert done.acquire(timeout=20)
        live = len(p.instance.blocking._all)
        release.set()
        for t in threads:
            t.join(20)
        assert errors == []
        assert live == 4  # one connection per thread
    wait_until(lambda: stored_count(cluster.broker, topic) == 201, what="201 stored")


def test_blocking_sends_are_signed_too():
    with FakeCluster() as fake:
        with Producer("pg_acl_blk", fake.addr, access_key="AK", secret_key="SK") as p:
            for _ in range(3):
                p.send(Message("TopicAclBlk", b"signed"))
        sends = fake.requests_of(RequestCode.SEND_MESSAGE_V2)
        assert len(sends) == 3
        assert all(r.ext_fields["AccessKey"] == "AK" and verify(r.ext_fields, r.body, "SK") for r in sends)


class WireRecorder:
    """Records (thread, code, oneway flag) of each send request and the opaque of each answer."""

    def __init__(self) -> None:
        self.before: list[tuple[str, int, bool]] = []
        self.after: list[int] = []

    def before_request(self, addr, cmd):
        if cmd.code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
            cmd.ext_fields["hooked"] = "yes"  # a hook may change the header (ACL signing does)
            self.before.append((threading.current_thread().name, cmd.code, cmd.is_oneway))

    def after_response(self, addr, cmd, resp):
        if cmd.code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
            self.after.append(resp.opaque)


def test_one_hook_chain_serves_every_transport_even_when_installed_after_start(cluster):
    """The client instance has one chain of RPC hooks: a hook added to it on a running producer
    sees the blocking sends (caller's thread, single and batch, with and without an explicit
    queue), the callback one (send_async, written on the loop) and the oneway write, and every
    answered request's response. (The blocking connections kept a copy of the list made at
    start, so such a hook never saw — nor signed — a blocking send.)"""
    topic = unique("TopicChain")
    with Producer(unique("pg"), cluster.namesrv_addr) as p:
        p.send(Message(topic, b"route"))  # the route is cached: the fast paths are ready
        rec = WireRecorder()
        p.instance.remoting.rpc_hooks.append(rec)
        me, io_thread = threading.current_thread().name, p.instance.loop_thread.name
        mq = p.fetch_publish_queues(topic)[0]
        results = [p.send(Message(topic, b"blocking")), p.send(Message(topic, b"on-the-loop"), mq=mq),
                   p.send_async(Message(topic, b"callback")).result(10),
                   p.send_batch([Message(topic, b"b1"), Message(topic, b"b2")])]
        p.send_oneway(Message(topic, b"oneway"))
        wait_until(lambda: stored_count(cluster.broker, topic) == 7, what="7 stored")
        p.instance.remoting.rpc_hooks.remove(rec)
    assert all(r.send_status is SendStatus.SEND_OK for r in results)
    assert len(rec.before) == 5, rec.before
    assert [(code, oneway) for _, code, oneway in rec.before] == [
        (RequestCode.SEND_MESSAGE_V2, False), (RequestCode.SEND_MESSAGE_V2, False), (RequestCode.SEND_MESSAGE_V2, False),
        (RequestCode.SEND_BATCH_MESSAGE, False), (RequestCode.SEND_MESSAGE_V2, True)]
    assert rec.before[0][0] == me and rec.before[2][0] == io_thread  # blocking; send_async's write
    assert len(rec.after) == 4  # every answered send, none for the oneway one
