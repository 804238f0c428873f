"""ACL in the gRPC proxy: 5.x request signatures (the ``authorization`` header of the official
client and of this SDK) checked against the broker's ``plain_acl.yml``; a wrong or missing
signature gets UNAUTHORIZED, a topic without permission FORBIDDEN. The broker behind enforces ACL
too: the proxy signs its own remoting requests with its account."""

from __future__ import annotations

import asyncio

import pytest
from rocketmq_broker import embedded
from rocketmq_broker.broker.controller import BrokerController
from rocketmq_broker.proxy import GrpcProxy
from rocketmq_broker.proxy.auth import parse_authorization, peer_ip, resources_of
from rocketmq_broker.proxy.status import ProxyError
from rocketmq_sdk import Message, Producer
from rocketmq_sdk.consumer.simple_consumer import SimpleConsumer
from rocketmq_sdk.exceptions import MQBrokerError
from rocketmq_sdk.grpc import v2

from .conftest import finish, unique
from .test_sdk_simple_consumer import receive_all

ACL = """\
globalWhiteRemoteAddresses: []
accounts:
  - accessKey: proxyadmin
    secretKey: proxyadmin-secret
    admin: true
  - accessKey: appuser1
    secretKey: appuser1-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [acl_allowed=PUB|SUB, acl_readonly=SUB]
"""
ADMIN = ("proxyadmin", "proxyadmin-secret")
USER = {"access_key": "appuser1", "secret_key": "appuser1-secret"}


@pytest.fixture(scope="module")
def acl_cluster(tmp_path_factory):
    path = tmp_path_factory.mktemp("acl") / "plain_acl.yml"
    path.write_text(ACL)
    conf = {"acl_enable": True, "acl_config_file": str(path), "broker_version": "5.3.3"}
    with embedded.start_dev_cluster(in_process=True, broker_config=conf) as c:
        yield c, str(path)


@pytest.fixture(scope="module", params=["cluster", "local"])
def acl_proxy(request, acl_cluster):
    """A proxy checking the broker's ACL file, in cluster mode (own file reader, signed remoting
    requests) and in local mode (the broker's validator shared)."""
    cluster, path = acl_cluster
    if request.param == "cluster":
        proxy = GrpcProxy(cluster.namesrv_addr, acl=path, credentials=ADMIN)
        proxy.start()
        yield proxy
        proxy.stop()
        return
    broker = next(s for s in cluster._servers if isinstance(s, BrokerController))
    proxy = GrpcProxy(cluster.namesrv_addr, local_broker=(broker.server, broker.config.broker_addr), acl=broker.acl,
                      credentials=ADMIN)
    asyncio.run_coroutine_threadsafe(proxy.serve(), cluster._loop).result(20)
    yield proxy
    asyncio.run_coroutine_threadsafe(proxy.aclose(), cluster._loop).result(20)


def _send(proxy: GrpcProxy, topic: str, **creds: str) -> int:
    """Send one message; the 5.x code of the answer (0 = stored)."""
    with Producer(unique("pg"), endpoints=proxy.addr, protocol="grpc", retry_times_when_send_failed=0,
                  **creds) as p:
        try:
            assert p.send(Message(topic, b"x")).queue_offset >= 0
        except MQBrokerError as exc:
            return exc.code
    return 0


def test_sdk_signed_requests_pass_and_bad_ones_are_refused(acl_proxy):
    assert _send(acl_proxy, "acl_allowed", **USER) == 0  # and the broker took the proxy's signed send
    assert _send(acl_proxy, "acl_allowed", access_key="appuser1", secret_key="wrong-secret") == v2.UNAUTHORIZED
    assert _send(acl_proxy, "acl_allowed", access_key="nobody99", secret_key="whatever1") == v2.UNAUTHORIZED
    assert _send(acl_proxy, "acl_allowed") == v2.UNAUTHORIZED  # unsigned
    assert _send(acl_proxy, "acl_readonly", **USER) == v2.FORBIDDEN  # SUB only
    assert _send(acl_proxy, unique("acl_other"), **USER) == v2.FORBIDDEN  # defaultTopicPerm DENY


def test_consumer_needs_sub_on_topic_and_group(acl_proxy):
    with Producer(unique("pg"), endpoints=acl_proxy.addr, protocol="grpc", **USER) as p:
        sent = p.send(Message("acl_allowed", b"for the consumer")).msg_id
    consumer = SimpleConsumer(unique("gacl"), endpoints=acl_proxy.addr, protocol="grpc", await_duration=1, **USER)
    consumer.subscribe("acl_allowed")
    with consumer:
        got: list = []
        while not got:  # the topic holds the other tests' messages too (receive_all fails after 30 s)
            got = [m for m in receive_all(consumer, 1) if m.msg_id == sent]
        consumer.ack(got[0])
    stranger = SimpleConsumer(unique("gacl"), endpoints=acl_proxy.addr, protocol="grpc", await_duration=1,
                              access_key="appuser1", secret_key="wrong-secret")
    stranger.subscribe("acl_allowed")
    with stranger, pytest.raises(MQBrokerError) as e:
        stranger.receive(1, 10)
    assert e.value.code == v2.UNAUTHORIZED


def test_official_client_with_credentials(acl_cluster, official):
    cluster, path = acl_cluster
    proxy = GrpcProxy(cluster.namesrv_addr, acl=path, credentials=ADMIN)
    proxy.start()
    try:
        ok = finish(official("acl_send.py", proxy.addr, "acl_allowed", "appuser1", "appuser1-secret"))
        wrong = finish(official("acl_send.py", proxy.addr, "acl_allowed", "appuser1", "wrong-secret"))
        denied = finish(official("acl_send.py", proxy.addr, "acl_readonly", "appuser1", "appuser1-secret"))
    finally:
        proxy.stop()
    assert "id" in ok[0], ok  # the official client's signature verifies
    # a wrong signature is refused at its first request, the route query of its start: the client
    # reports that generically ("failed to fetch topic route"), the proxy counted UNAUTHORIZED
    assert wrong[0]["error"] == "Exception" and "route" in wrong[0]["text"], wrong
    assert proxy.acl is not None and proxy.acl.refused[v2.UNAUTHORIZED] >= 1
    # SUB only: the route query (ANY) passes, the send is FORBIDDEN
    assert denied[0]["error"] == "ForbiddenException" and denied[0]["code"] == v2.FORBIDDEN, denied
    assert proxy.acl.refused[v2.FORBIDDEN] >= 1  # its settings (publishing the topic) and its sends


def test_what_each_request_needs():
    send = v2.SendMessageRequest()
    send.messages.add().topic.name = "t1"
    assert resources_of("SendMessage", send) == {"t1": 4}  # PUB
    recv = v2.ReceiveMessageRequest(group=v2.Resource(name="g1", resource_namespace="ns"))
    recv.message_queue.topic.name = "t2"
    assert resources_of("ReceiveMessage", recv) == {"t2": 8, "%RETRY%ns%g1": 8}  # SUB, namespaced group
    assert resources_of("QueryRoute", v2.QueryRouteRequest(topic=v2.Resource(name="t3"))) == {"t3": 2}  # ANY
    assert resources_of("Heartbeat", v2.HeartbeatRequest(group=v2.Resource(name="g"))) == {}
    assert parse_authorization("MQv2-HMAC-SHA1 Credential=AK1, SignedHeaders=x-mq-date-time, Signature=AB12") \
        == ("AK1", "ab12")
    for bad in ("Basic abc", "MQv2-HMAC-SHA1 Credential=AK1, SignedHeaders=host, Signature=ab"):
        with pytest.raises(ProxyError) as e:
            parse_authorization(bad)
        assert e.value.code == v2.UNAUTHORIZED
    assert peer_ip("ipv4:10.1.2.3:5555") == "10.1.2.3" and peer_ip("ipv6:[::1]:80") == "::1"
