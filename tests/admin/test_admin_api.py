"""The Python API on its own: typed results and the errors it raises (replayed 4.9.8 answers)."""

from __future__ import annotations

import pytest
from rocketmq_sdk.admin import AdminClient, ConsumerProgress, QueueStatus
from rocketmq_sdk.exceptions import IllegalArgumentError, MQBrokerError, MQClientError, TopicNotExistError
from rocketmq_sdk.protocol.codes import RequestCode as RC
from rocketmq_sdk.protocol.message import MessageExt

from .test_admin_capture import GROUP, NS, OFFSET_ID, TOPIC, UNIQ


@pytest.fixture
def admin(replay):
    with AdminClient(NS, timeout_ms=2000) as a:
        yield a


def test_typed_results(admin):
    status = admin.topic_status(TOPIC)
    assert all(isinstance(q, QueueStatus) for q in status) and len(status) == 4
    p = admin.consumer_progress(GROUP)
    assert isinstance(p, ConsumerProgress) and p.total_lag == sum(q.lag for q in p.queues) == 0
    m = admin.view_message(OFFSET_ID)
    assert isinstance(m, MessageExt) and m.msg_id == UNIQ and m.body == b"admin message 1"
    assert admin.query_message_by_id(UNIQ, TOPIC).offset_msg_id == OFFSET_ID
    assert admin.get_kv_config("CAP_NAMESPACE", "missing") is None
    assert admin.kv_list("CAP_NAMESPACE") == {"k1": "v1"}


def test_errors(admin, replay):
    with pytest.raises(IllegalArgumentError):
        admin.view_message("zz")
    with pytest.raises(IllegalArgumentError):
        admin.create_topic("T")  # neither cluster nor broker
    with pytest.raises(MQClientError, match="cluster 'Nope' not found"):
        admin.create_topic("T", cluster="Nope")
    # a unique id without its topic: looked up in every topic, as mqadmin does (issue 17)
    assert admin.query_message_by_id(UNIQ).offset_msg_id == OFFSET_ID
    with pytest.raises(MQClientError, match="nor as a unique id in any topic"):
        admin.query_message_by_id("0" * 32)
    with pytest.raises(MQClientError, match="not online"):
        admin.consumer_running_info(GROUP, client_id="nobody")
    replay.overrides[RC.GET_ROUTEINFO_BY_TOPIC] = {"code": 17, "header": {"remark": "No topic route info"}}
    with pytest.raises(TopicNotExistError):
        admin.topic_route("Missing")
    with pytest.raises(MQClientError, match="consumer group 'g' not found"):
        admin.consumer_progress("g")
    replay.overrides[RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER] = {"code": 1, "header": {"remark": "x"}}
    with pytest.raises(MQBrokerError) as e:
        admin.topic_list()
    assert e.value.code == 1


def test_namesrv_failover_to_the_second_address(replay):
    with AdminClient(f"127.0.0.1:1;{NS}", timeout_ms=2000) as a:
        assert TOPIC in a.topic_list()


def test_admin_client_takes_the_client_config_of_producers(replay):
    """Credentials, security token and hooks come from the same ClientConfig producers take; the
    name server receives signed requests carrying the token (Java AclClientRPCHook)."""
    from rocketmq_sdk.config import ProducerConfig
    from rocketmq_sdk.protocol.acl import verify

    seen: list[str] = []

    class Hook:
        def before_request(self, addr, cmd):
            seen.append(addr)

        def after_response(self, addr, cmd, resp):
            pass

    cfg = ProducerConfig(access_key="ak", secret_key="sk", security_token="tok", rpc_hooks=(Hook(),))
    with AdminClient(NS, timeout_ms=2000, config=cfg) as a:
        assert TOPIC in a.topic_list()
    req = replay.requests(RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)[-1]
    assert req.ext_fields["AccessKey"] == "ak" and req.ext_fields["SecurityToken"] == "tok"
    assert verify(req.ext_fields, req.body or b"", "sk", lenient=False)
    assert seen  # the user's own hook ran too
    with AdminClient(NS, timeout_ms=2000, access_key="ak2", secret_key="sk2") as a:
        a.topic_list()
    assert replay.requests(RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)[-1].ext_fields["AccessKey"] == "ak2"
    with pytest.raises(IllegalArgumentError, match="unknown ClientConfig setting"):
        AdminClient(NS, acces_key="typo")
    with pytest.raises(IllegalArgumentError, match="either config"):
        AdminClient(NS, config=cfg, use_tls=True)


def test_async_admin_client_runs_on_the_callers_event_loop(replay):
    import asyncio

    from rocketmq_sdk.admin import AsyncAdminClient

    from tests.conftest import run_async

    async def main():
        async with AsyncAdminClient(NS, timeout_ms=2000) as a:
            topics, status, kv = await asyncio.gather(a.topic_list(), a.topic_status(TOPIC), a.kv_list("CAP_NAMESPACE"))
            with pytest.raises(TopicNotExistError):
                replay.overrides[RC.GET_ROUTEINFO_BY_TOPIC] = {"code": 17, "header": {"remark": "No topic route info"}}
                await a.topic_route("Missing")
            return topics, status, kv

    topics, status, kv = run_async(main())
    assert TOPIC in topics and len(status) == 4 and kv == {"k1": "v1"}


def test_blocking_and_async_clients_offer_the_same_methods():
    import inspect

    from rocketmq_sdk.admin import AsyncAdminClient

    public = {n for n, f in inspect.getmembers(AsyncAdminClient, inspect.iscoroutinefunction) if not n.startswith("_")}
    assert {"create_topic", "consumer_progress", "view_message", "kv_list", "update_acl_config"} <= public
    for name in public - {"close"}:
        blocking = getattr(AdminClient, name)
        assert not inspect.iscoroutinefunction(blocking), name
        assert inspect.signature(blocking) == inspect.signature(getattr(AsyncAdminClient, name)), name
        assert blocking.__doc__ == getattr(AsyncAdminClient, name).__doc__


def test_closed_clients_refuse_requests_with_a_state_error(replay):
    """Both clients share the SDK's lifecycle: RUNNING from creation, SHUTDOWN_ALREADY after
    close(); a request afterwards is a ClientStateError, sent nowhere (not a closed-loop RuntimeError)."""
    from rocketmq_sdk.admin import AsyncAdminClient
    from rocketmq_sdk.exceptions import ClientStateError
    from rocketmq_sdk.lifecycle import ServiceState

    from tests.conftest import run_async

    admin = AdminClient(NS, timeout_ms=2000)
    assert admin.state is ServiceState.RUNNING
    assert TOPIC in admin.topic_list()
    admin.close()
    admin.close()  # idempotent
    assert admin.state is ServiceState.SHUTDOWN_ALREADY
    sent = len(replay.received)
    with pytest.raises(ClientStateError, match="closed"):
        admin.topic_list()
    with pytest.raises(ClientStateError, match="closed"):
        admin.consumer_progress(GROUP)

    async def main():
        a = AsyncAdminClient(NS, timeout_ms=2000)
        assert TOPIC in await a.topic_list()
        await a.close()
        assert a.state is ServiceState.SHUTDOWN_ALREADY
        with pytest.raises(ClientStateError, match="closed"):
            await a.topic_status(TOPIC)
        await a.close()

    run_async(main())
    assert len(replay.received) == sent + 1  # only the async client's topic_list before its close
