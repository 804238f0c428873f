"""Name server addresses: ``a;b`` lists with a dead entry, ``$NAMESRV_ADDR``, and the HTTP
address server (``namesrv_domain``)."""

from __future__ import annotations

import http.server
import threading

import pytest
from rocketmq_sdk import (
    ConsumeConcurrentlyStatus,
    LitePullConsumer,
    Message,
    Producer,
    PullConsumer,
    PushConsumer,
    SendStatus,
)
from rocketmq_sdk.client.mq_client_api import NameServerList
from rocketmq_sdk.client.namesrv_lookup import address_server_url, fetch_namesrv_addr
from rocketmq_sdk.exceptions import ClientStateError

from .conftest import unique, wait_until


@pytest.fixture
def address_server(cluster):
    paths: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server API
            paths.append(self.path)
            body = f" 127.0.0.1:1;{cluster.namesrv_addr}\n".encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    yield f"127.0.0.1:{server.server_address[1]}", paths
    server.shutdown()
    server.server_close()


def test_dead_name_server_in_the_list_is_skipped(cluster):
    with Producer(unique("pg"), f"127.0.0.1:1;{cluster.namesrv_addr}") as p:
        for _ in range(3):
            assert p.send(Message(unique("TopicNs"), b"x")).send_status is SendStatus.SEND_OK


def test_namesrv_addr_environment_variable(cluster, monkeypatch):
    monkeypatch.setenv("NAMESRV_ADDR", cluster.namesrv_addr)
    with Producer(unique("pg")) as p:
        assert p.send(Message(unique("TopicEnv"), b"x")).send_status is SendStatus.SEND_OK


def test_no_name_server_at_all_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    monkeypatch.delenv("ROCKETMQ_NAMESRV_DOMAIN", raising=False)
    with pytest.raises(ClientStateError, match="NAMESRV_ADDR"):
        Producer(unique("pg")).start()


def test_http_address_server(cluster, address_server, monkeypatch):
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    domain, paths = address_server
    with Producer(unique("pg"), namesrv_domain=domain) as p:
        assert p.send(Message(unique("TopicWs"), b"x")).send_status is SendStatus.SEND_OK
        assert sorted(p.instance.api.namesrv.addrs) == sorted(["127.0.0.1:1", cluster.namesrv_addr])
    assert paths == ["/rocketmq/nsaddr"]


def test_consumers_start_with_only_an_address_server(cluster, address_server, monkeypatch):
    """Push, lite-pull and pull consumers find their name servers through ``namesrv_domain`` as the
    producer does (they used to refuse to start: "namesrv_addr is not set")."""
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    domain, paths = address_server
    topic = unique("TopicWsC")
    got: list = []
    fast = {"suspend_timeout": 1000, "rebalance_interval": 500, "consume_from_where": "CONSUME_FROM_FIRST_OFFSET"}
    with Producer(unique("pg"), cluster.namesrv_addr) as p:
        p.send(Message(topic, b"via-domain"))
    consumer = PushConsumer(unique("cg"), namesrv_domain=domain, **fast)
    consumer.subscribe(topic, "*")
    consumer.register_message_listener(lambda msgs, ctx: got.extend(msgs) or ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
    with consumer:
        wait_until(lambda: got, timeout_s=20, what="the message through the address server's name servers")
        assert sorted(consumer.instance.api.namesrv.addrs) == sorted(["127.0.0.1:1", cluster.namesrv_addr])
    assert [m.body for m in got] == [b"via-domain"]
    with LitePullConsumer(unique("cgl"), namesrv_domain=domain) as lite, PullConsumer(unique("cgp"),
                                                                                       namesrv_domain=domain) as pull:
        assert lite.running and pull.running
    assert paths and set(paths) == {"/rocketmq/nsaddr"}


def test_a_consumer_without_any_name_server_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    monkeypatch.delenv("ROCKETMQ_NAMESRV_DOMAIN", raising=False)
    consumer = PushConsumer(unique("cg"))
    consumer.subscribe("TopicNone", "*")
    consumer.register_message_listener(lambda msgs, ctx: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
    with pytest.raises(ClientStateError, match="NAMESRV_ADDR"):
        consumer.start()
    assert consumer.state.name == "CREATE_JUST"


def test_address_server_url_and_fetch_failure():
    assert address_server_url("jmenv.tbsite.net") == "http://jmenv.tbsite.net:8080/rocketmq/nsaddr"
    assert address_server_url("h:80", "g") == "http://h:80/rocketmq/g"
    assert address_server_url("https://x/y") == "https://x/y"
    assert fetch_namesrv_addr("http://127.0.0.1:1/rocketmq/nsaddr", 0.5) == []


def test_name_server_list_random_start_then_round_robin_and_sticky_choice():
    starts = {next(NameServerList(["a", "b", "c"]).candidates()) for _ in range(60)}
    assert starts == {"a", "b", "c"}  # random start
    ns = NameServerList(["a", "b", "c"])
    first = list(ns.candidates())  # every one failed
    assert sorted(first) == ["a", "b", "c"]
    assert next(ns.candidates()) == first[0]  # round robin continues after the last tried
    ns.chosen = "c"
    assert next(ns.candidates()) == "c"  # sticky while it answers
    assert ns.update(["d"]) and ns.chosen is None and list(ns.candidates()) == ["d"]
