"""Choosing the event loop implementation (asyncio or uvloop) of the SDK's I/O thread and of the
reference broker: ``event_loop`` settings, ``$ROCKETMQ_EVENT_LOOP``, a missing uvloop, and an
end-to-end send/consume with uvloop on both sides."""

from __future__ import annotations

import asyncio
import os
import sys
import threading

import pytest
from click.testing import CliRunner
from rocketmq_sdk import Message, Producer, PushConsumer
from rocketmq_sdk.config import ClientConfig, ProducerConfig
from rocketmq_sdk.exceptions import IllegalArgumentError
from rocketmq_sdk.remoting.loop import EventLoopThread, event_loop_kind, new_event_loop, resolve_event_loop

from tests.conftest import Received, wait_until

uvloop = pytest.importorskip("uvloop")
embedded = pytest.importorskip("rocketmq_broker.embedded")


@pytest.fixture(autouse=True)
def no_env_override(monkeypatch):
    """These tests set ``$ROCKETMQ_EVENT_LOOP`` themselves and start from the default event loop
    policy (the suite may run with the variable set and uvloop's policy installed)."""
    monkeypatch.delenv("ROCKETMQ_EVENT_LOOP", raising=False)
    policy = asyncio.get_event_loop_policy()
    asyncio.set_event_loop_policy(None)
    yield
    asyncio.set_event_loop_policy(policy)


@pytest.fixture
def no_uvloop(monkeypatch):
    """uvloop not installed: ``import uvloop`` raises ImportError."""
    monkeypatch.setitem(sys.modules, "uvloop", None)


# ---------------------------------------------------------------------- selection


def test_auto_picks_uvloop_when_installed_and_explicit_choices_are_honoured():
    assert resolve_event_loop("auto") == "uvloop"
    assert resolve_event_loop(None) == "uvloop"
    assert resolve_event_loop("asyncio") == "asyncio"
    assert resolve_event_loop(" UVLOOP ") == "uvloop"
    for choice, kind in (("auto", "uvloop"), ("asyncio", "asyncio"), ("uvloop", "uvloop")):
        loop = new_event_loop(choice)
        try:
            assert event_loop_kind(loop) == kind
            assert isinstance(loop, uvloop.Loop) == (kind == "uvloop")
            assert loop.run_until_complete(asyncio.sleep(0, result=7)) == 7
        finally:
            loop.close()


def test_auto_falls_back_to_asyncio_and_uvloop_is_a_clear_error_when_uvloop_is_missing(no_uvloop):
    assert resolve_event_loop("auto") == "asyncio"
    loop = new_event_loop("auto")
    try:
        assert type(loop).__module__.startswith("asyncio") and event_loop_kind(loop) == "asyncio"
    finally:
        loop.close()
    with pytest.raises(IllegalArgumentError, match="uvloop is not installed.*pip install uvloop"):
        new_event_loop("uvloop")
    with pytest.raises(IllegalArgumentError, match="not installed"):
        ProducerConfig.from_kwargs(event_loop="uvloop")
    with pytest.raises(IllegalArgumentError, match="not installed"):
        EventLoopThread("t-missing", event_loop="uvloop")


def test_unknown_choice_is_refused_in_code_and_in_the_environment(monkeypatch):
    with pytest.raises(IllegalArgumentError, match="event_loop='trio'.*auto, asyncio, uvloop"):
        resolve_event_loop("trio")
    with pytest.raises(IllegalArgumentError, match="event_loop"):
        ClientConfig.from_kwargs(event_loop="libuv")
    monkeypatch.setenv("ROCKETMQ_EVENT_LOOP", "bogus")
    with pytest.raises(IllegalArgumentError, match=r"\$ROCKETMQ_EVENT_LOOP='bogus'"):
        resolve_event_loop("asyncio")


@pytest.mark.parametrize(("env", "choice", "kind"), [
    ("asyncio", "uvloop", "asyncio"),
    ("asyncio", "auto", "asyncio"),
    ("uvloop", "asyncio", "uvloop"),
    ("", "asyncio", "asyncio"),  # empty: no override
])
def test_the_environment_overrides_the_choice_made_in_code(monkeypatch, env, choice, kind):
    monkeypatch.setenv("ROCKETMQ_EVENT_LOOP", env)
    assert resolve_event_loop(choice) == kind
    t = EventLoopThread("t-env", event_loop=choice)
    try:
        assert t.kind == kind and event_loop_kind(t.loop) == kind
    finally:
        t.stop()


def test_env_override_to_uvloop_without_uvloop_is_an_error(monkeypatch, no_uvloop):
    monkeypatch.setenv("ROCKETMQ_EVENT_LOOP", "uvloop")
    with pytest.raises(IllegalArgumentError, match=r"\$ROCKETMQ_EVENT_LOOP='uvloop' but uvloop is not"):
        resolve_event_loop("auto")


def test_asyncio_means_the_standard_loop_even_under_another_policy_and_auto_keeps_the_policy(no_uvloop):
    class Marked(asyncio.SelectorEventLoop):
        pass

    class Policy(asyncio.DefaultEventLoopPolicy):
        def new_event_loop(self):
            return Marked()

    asyncio.set_event_loop_policy(Policy())
    for choice, marked in (("asyncio", False), ("auto", True)):
        loop = new_event_loop(choice)
        try:
            assert isinstance(loop, Marked) == marked
            assert (event_loop_kind(loop) == "asyncio") != marked  # another loop: its module's name
        finally:
            loop.close()


def test_the_client_config_default_is_auto():
    assert ClientConfig().event_loop == "auto"
    assert ProducerConfig.from_kwargs(event_loop="asyncio").event_loop == "asyncio"


# ---------------------------------------------------------------------- loop thread on uvloop


@pytest.mark.parametrize("choice", ["asyncio", "uvloop"])
def test_loop_thread_runs_threadsafe_calls_timers_and_timeouts_on_either_loop(choice):
    t = EventLoopThread(f"t-{choice}", event_loop=choice)
    try:
        assert t.kind == choice
        assert t.run(asyncio.sleep(0.001, result="ok"), 5.0) == "ok"
        assert t.submit(asyncio.sleep(0, result=3)).result(5.0) == 3
        fired = threading.Event()
        t.call_soon(lambda: t.loop.call_later(0.001, fired.set))
        assert fired.wait(5.0)
        from rocketmq_sdk.exceptions import RemotingTimeoutError

        with pytest.raises(RemotingTimeoutError):
            t.run(asyncio.sleep(30), 0.05)
    finally:
        t.stop()
    assert not t.is_running


# ---------------------------------------------------------------------- broker


def test_broker_cli_refuses_uvloop_when_it_is_missing(no_uvloop, tmp_path):
    from rocketmq_broker.__main__ import main

    result = CliRunner().invoke(main, ["dev", "--store-dir", str(tmp_path), "--event-loop", "uvloop"])
    assert result.exit_code == 2, result.output
    assert "uvloop is not installed" in result.output


def test_broker_cli_refuses_an_unknown_event_loop(tmp_path):
    from rocketmq_broker.__main__ import main

    result = CliRunner().invoke(main, ["dev", "--store-dir", str(tmp_path), "--event-loop", "trio"])
    assert result.exit_code == 2 and "--event-loop" in result.output


def test_embedded_cluster_argument_and_missing_uvloop(no_uvloop):
    with pytest.raises(IllegalArgumentError, match="not installed"):
        embedded.start_dev_cluster(in_process=True, event_loop="uvloop")
    with pytest.raises(IllegalArgumentError, match="not installed"):
        embedded.start_cluster(["b"], event_loop="uvloop")


def test_dev_cluster_process_runs_the_chosen_loop(tmp_path):
    with embedded.start_dev_cluster(str(tmp_path), event_loop="uvloop"):
        pass
    with open(os.path.join(tmp_path, "dev-cluster.log"), errors="replace") as fh:
        assert "event loop: uvloop" in fh.read()


def test_end_to_end_send_and_consume_with_uvloop_on_broker_and_client():
    with embedded.start_dev_cluster(in_process=True, event_loop="uvloop") as cluster:
        assert isinstance(cluster._loop, uvloop.Loop)
        topic, group = "TopicUvloop", "cg_uvloop"
        received = Received()
        with Producer("pg_uvloop", cluster.namesrv_addr, event_loop="uvloop") as producer:
            assert producer.instance.loop_thread.kind == "uvloop"  # the I/O thread
            sync_ids = [producer.send(Message(topic, f"s{i}")).msg_id for i in range(10)]
            futures = [producer.send_async(Message(topic, f"a{i}")) for i in range(10)]
            async_ids = [f.result(10).msg_id for f in futures]
            assert len(set(sync_ids + async_ids)) == 20
            consumer = PushConsumer(group, cluster.namesrv_addr, event_loop="uvloop",
                                    consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                                    suspend_timeout=2000, pull_timeout=5000, rebalance_interval=1000)
            consumer.subscribe(topic, "*")
            consumer.register_message_listener(received)
            consumer.start()
            try:
                assert consumer.instance.loop_thread.kind == "uvloop"
                wait_until(lambda: len(received.messages) >= 20, what="20 messages")
            finally:
                consumer.shutdown()
        expected = {f"s{i}".encode() for i in range(10)} | {f"a{i}".encode() for i in range(10)}
        assert set(received.bodies()) == expected


@pytest.mark.parametrize("choice", ["asyncio", "uvloop"])
def test_plaintext_connection_leaves_the_silent_peer_watch_after_the_first_byte(choice):
    """The client marks a new plaintext connection until the peer's first byte (a TLS-only server
    never sends one) by swapping ``data_received`` on the channel; uvloop binds the callback at
    connect time, so the swap must reach it too or the mark stays (and the Task-free async send
    path falls back to coroutines forever)."""
    from rocketmq_sdk.protocol.codes import ResponseCode
    from rocketmq_sdk.remoting import RemotingClient, RemotingCommand, RemotingServer
    from rocketmq_sdk.remoting.client import _SILENT_PEER

    async def echo(channel, cmd):
        return cmd.response(ResponseCode.SUCCESS, ext_fields=dict(cmd.ext_fields), body=cmd.body)

    async def main():
        server = RemotingServer()
        server.register_processor(1000, echo)
        addr = f"127.0.0.1:{await server.start('127.0.0.1', 0)}"
        client = RemotingClient()
        try:
            for i in range(3):
                resp = await client.invoke(addr, RemotingCommand.request(1000, {"i": str(i)}, b"x" * i), 2000)
                assert resp.ext_fields == {"i": str(i)} and resp.body == b"x" * i
                channel = client._channels[addr]
                assert _SILENT_PEER not in channel.attributes
                assert "data_received" not in vars(channel)
        finally:
            await client.close()
            await server.stop()

    loop = new_event_loop(choice)
    try:
        assert event_loop_kind(loop) == choice
        loop.run_until_complete(asyncio.wait_for(main(), 15))
    finally:
        loop.close()


@pytest.mark.parametrize("env", ["asyncio", "uvloop"])
def test_benchmark_results_record_the_event_loop(monkeypatch, env):
    import importlib.util

    from tests.conftest import REPO_ROOT

    spec = importlib.util.spec_from_file_location("bench_run_for_test", REPO_ROOT / "benchmarks" / "run.py")
    run = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run)
    monkeypatch.setenv("ROCKETMQ_EVENT_LOOP", env)
    info = run.runtime_info()
    assert info["event_loop"] == env
    assert f"Event loop: {env}." in run.runtime_line(info)
