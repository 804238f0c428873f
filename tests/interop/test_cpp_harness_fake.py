"""The harness end to end against ``FakeCluster`` (a scripted name server + broker double): every
produce mode, the push consumer (assignment, delivery, RECONSUME_LATER) and the pull consumer,
plus what the C++ client puts on the wire for them."""

from __future__ import annotations

import pytest
from rocketmq_sdk.protocol.codes import LanguageCode, RequestCode

from .conftest import query_route, wait_for_route
from .cpp_client import CppConsumer, cpp_produce, cpp_pull
from .fake_cluster import FakeCluster

pytest.importorskip("rocketmq.client", reason="the official C++ client (rocketmq==0.4.4) is not installed")
pytestmark = [pytest.mark.interop, pytest.mark.timeout(60)]


@pytest.fixture
def fake():
    with FakeCluster() as cluster:
        yield cluster


def spec(i: int, tag: str = "TagA") -> dict:
    return {"body": f"body-{i} é", "tags": tag, "keys": [f"key-{i}", f"alt-{i}"], "properties": {"up": f"v{i}"}}


@pytest.mark.parametrize("mode", ["sync", "oneway", "async"])
def test_each_send_mode_stores_tags_keys_properties_and_body(fake, mode):
    outcomes = cpp_produce(fake.addr, "FakeTopic", [spec(0), spec(1)], mode=mode)
    assert [o.ok for o in outcomes] == [True, True]
    stored = {m.properties["KEYS"]: m for m in fake.stored("FakeTopic")}
    assert sorted(stored) == ["key-0 alt-0", "key-1 alt-1"]
    for i in range(2):
        msg = stored[f"key-{i} alt-{i}"]
        assert msg.body == f"body-{i} é".encode()
        assert msg.properties["TAGS"] == "TagA" and msg.properties["up"] == f"v{i}"
        assert msg.properties["WAIT"] == "true" and msg.properties["UNIQ_KEY"]
    if mode != "oneway":
        assert {o.msg_id for o in outcomes} == {m.properties["UNIQ_KEY"] for m in stored.values()}
    # the C++ client always uses SEND_MESSAGE (10), never the V2 form
    assert len(fake.requests_of(RequestCode.SEND_MESSAGE)) == 2


def test_orderly_send_picks_queue_arg_modulo_queue_count(fake):
    specs = [dict(spec(i), arg=arg) for i, arg in enumerate([1, 5, 2, 7])]
    outcomes = cpp_produce(fake.addr, "FakeTopic", specs, mode="orderly")
    assert all(o.ok for o in outcomes)
    by_key = {m.properties["KEYS"].split()[0]: m.queue_id for m in fake.stored("FakeTopic")}
    assert by_key == {"key-0": 1, "key-1": 1, "key-2": 2, "key-3": 3}


def test_batch_is_one_send(fake):
    outcomes = cpp_produce(fake.addr, "FakeTopic", [spec(0), spec(1), spec(2)], mode="batch")
    assert len(outcomes) == 1 and outcomes[0].ok
    [request] = fake.requests_of(RequestCode.SEND_MESSAGE)
    assert request.ext_fields["batch"] == "1"


def test_binary_body_survives_the_send_side(fake):
    body = b"\x00\x01binary\x00\xff"
    [outcome] = cpp_produce(fake.addr, "FakeTopic", [{"body": body, "tags": "TagA"}])
    assert outcome.ok
    assert [m.body for m in fake.stored("FakeTopic")] == [body]


def test_push_consumer_receives_everything_after_assignment(fake):
    with CppConsumer(fake.addr, "FakeTopic", group="fake_push", expression="TagA || TagB",
                     property_keys=["up"]) as consumer:
        assigned = consumer.wait_assigned(4, timeout_s=15)
        assert sorted(a["queue_id"] for a in assigned) == [0, 1, 2, 3]
        cpp_produce(fake.addr, "FakeTopic", [spec(0, "TagA"), spec(1, "TagB"), {"body": "a\x00b", "tags": "TagA",
                                                                                 "keys": "nul"}])
        got = {m.keys: m for m in consumer.wait_for(3, timeout_s=15)}
    assert consumer.returncode == 0
    assert got["key-0 alt-0"].body == "body-0 é".encode() and got["key-0 alt-0"].tags == "TagA"
    assert got["key-1 alt-1"].properties["up"] == "v1" and got["key-1 alt-1"].key_list == ["key-1", "alt-1"]
    assert got["nul"].body == b"a"  # GetMessageBody is a char*: cut at the first NUL
    assert all(m.reconsume_times == 0 and m.topic == "FakeTopic" for m in got.values())
    stored_ids = {m.properties["UNIQ_KEY"] for m in fake.stored("FakeTopic")}
    assert {m.msg_id for m in got.values()} == stored_ids


def test_fail_keys_answer_reconsume_later_and_send_the_message_back(fake):
    with CppConsumer(fake.addr, "FakeTopic", group="fake_retry", fail_keys={"key-0": 1}) as consumer:
        consumer.wait_assigned(4, timeout_s=15)
        cpp_produce(fake.addr, "FakeTopic", [spec(0), spec(1)])
        consumer.wait_for(1, timeout_s=15)
        [failed] = consumer.wait_for(1, timeout_s=15, successful_only=False,
                                     predicate=lambda m: m.status == "RECONSUME_LATER")
    assert failed.keys == "key-0 alt-0"
    assert [m.keys for m in consumer.messages] == ["key-1 alt-1"]
    [back] = fake.requests_of(RequestCode.CONSUMER_SEND_MSG_BACK)
    assert back.ext_fields["group"] == "fake_retry"


def test_wait_live_with_probes_hides_the_probes(fake):
    def probe(key: str) -> None:
        cpp_produce(fake.addr, "FakeTopic", [{"body": "probe", "tags": "TagA", "keys": key}])

    with CppConsumer(fake.addr, "FakeTopic", group="fake_probe") as consumer:
        consumer.wait_live(probe, timeout_s=20)
        cpp_produce(fake.addr, "FakeTopic", [spec(0)])
        assert [m.keys for m in consumer.wait_for(1, timeout_s=15)] == ["key-0 alt-0"]


def test_pull_consumer_reads_every_queue(fake):
    cpp_produce(fake.addr, "FakeTopic", [dict(spec(i), arg=i) for i in range(6)], mode="orderly")
    outcome = cpp_pull(fake.addr, "FakeTopic", group="fake_pull")
    assert sorted(q["queue_id"] for q in outcome.queues) == [0, 1, 2, 3]
    assert sorted(m.keys for m in outcome.messages) == sorted(f"key-{i} alt-{i}" for i in range(6))
    assert {(m.queue_id, m.queue_offset) for m in outcome.messages} == {(0, 0), (1, 0), (2, 0), (3, 0), (0, 1), (1, 1)}


def test_route_polling_helper_sees_topics_the_name_server_knows(fake):
    assert query_route(fake.addr, "AnyTopic") == 0
    wait_for_route(fake.addr, "AnyTopic", timeout_s=2)
    assert fake.requests_of(RequestCode.GET_ROUTEINFO_BY_TOPIC)[0].ext_fields == {"topic": "AnyTopic"}


def test_bodies_from_4096_bytes_are_compressed_and_inflated_by_the_consumer(fake):
    bodies = {"small": "x" * 4095, "threshold": "y" * 4096, "big": "0123456789abcdef" * 512}
    with CppConsumer(fake.addr, "FakeTopic", group="fake_zip") as consumer:
        consumer.wait_assigned(4, timeout_s=15)
        cpp_produce(fake.addr, "FakeTopic", [{"body": b, "keys": k} for k, b in bodies.items()])
        got = {m.keys: m.body for m in consumer.wait_for(3, timeout_s=15)}
    assert got == {k: b.encode() for k, b in bodies.items()}
    flags = {r.ext_fields["properties"].split("\x01")[1].split("\x02")[0]: r.ext_fields["sysFlag"]
             for r in fake.requests_of(RequestCode.SEND_MESSAGE)}
    assert flags == {"small": "0", "threshold": "1", "big": "1"}


def test_orderly_consumer_locks_queues_and_keeps_queue_order(fake):
    with CppConsumer(fake.addr, "FakeTopic", group="fake_orderly", orderly=True) as consumer:
        consumer.wait_assigned(4, timeout_s=15)
        cpp_produce(fake.addr, "FakeTopic", [dict(spec(i), arg=i % 2) for i in range(8)], mode="orderly")
        got = consumer.wait_for(8, timeout_s=15)
    assert fake.requests_of(RequestCode.LOCK_BATCH_MQ)
    for queue_id in (0, 1):
        offsets = [m.queue_offset for m in got if m.queue_id == queue_id]
        assert offsets == [0, 1, 2, 3]


def test_broadcasting_consumers_each_get_every_message(fake):
    with CppConsumer(fake.addr, "FakeTopic", group="fake_bcast", model="BROADCASTING") as first, \
            CppConsumer(fake.addr, "FakeTopic", group="fake_bcast", model="BROADCASTING") as second:
        first.wait_assigned(4, timeout_s=15)
        second.wait_assigned(4, timeout_s=15)
        cpp_produce(fake.addr, "FakeTopic", [spec(i) for i in range(3)])
        for consumer in (first, second):
            assert sorted(m.keys for m in consumer.wait_for(3, timeout_s=15)) == [f"key-{i} alt-{i}" for i in range(3)]
            assert list((consumer.home / ".rocketmq_offsets").iterdir())  # local offset store under HOME


def test_credentials_and_instance_name_reach_the_wire(fake):
    credentials = {"access_key": "interop-ak", "secret_key": "interop-sk", "channel": "LOCAL"}
    [outcome] = cpp_produce(fake.addr, "FakeTopic", [spec(0)], credentials=credentials, instance_name="inst-a")
    assert outcome.ok
    [send] = fake.requests_of(RequestCode.SEND_MESSAGE)
    assert send.ext_fields["AccessKey"] == "interop-ak" and send.ext_fields["OnsChannel"] == "LOCAL"
    assert send.ext_fields["Signature"]
    [unregister] = fake.requests_of(RequestCode.UNREGISTER_CLIENT)
    assert unregister.ext_fields["clientID"].endswith("@inst-a")
    assert unregister.ext_fields["producerGroup"] == "cpp_interop_producer"


def test_harness_sends_the_same_header_fields_as_the_captured_cpp_producer(fake):
    from tests.conftest import load_capture

    captured = next(f for f in load_capture("cpp-client-producer")
                    if f.get("name") == "SEND_MESSAGE" and f["from"] == "client")
    cpp_produce(fake.addr, "FakeTopic", [spec(0)])
    [send] = fake.requests_of(RequestCode.SEND_MESSAGE)
    assert set(send.ext_fields) == set(captured["header"]["extFields"])
    assert LanguageCode(send.language).name == captured["header"]["language"] == "CPP"
