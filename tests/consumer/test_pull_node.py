"""Which broker a queue's next pull goes to (``consumer/pull_node.py``, Java ``PullAPIWrapper``
+ ``findBrokerAddressInSubscribe``), on a client instance's broker table without a network:
the suggested broker, the master when the suggestion is not in the route, the slave while the
master is away, the COMMIT_OFFSET bit cleared for slaves, one route refresh for an unknown name."""

from __future__ import annotations

import pytest
from rocketmq_sdk.client.instance import MQClientInstance
from rocketmq_sdk.consumer.pull_node import PullFromWhichNode, pull_address
from rocketmq_sdk.exceptions import MQBrokerError
from rocketmq_sdk.protocol.codes import PullSysFlag
from rocketmq_sdk.protocol.headers import PullMessageRequestHeader
from rocketmq_sdk.protocol.message import MessageQueue

from tests.conftest import run_async

MQ = MessageQueue("T", "bk-a", 0)
MASTER, SLAVE = "10.0.0.1:10911", "10.0.0.2:10911"


class _Instance:
    """The two members ``pull_address`` uses, the look-up being the real one."""

    find_broker_in_subscribe = MQClientInstance.find_broker_in_subscribe

    def __init__(self, addrs: dict[int, str], after_refresh: dict[int, str] | None = None) -> None:
        self.broker_addrs = {"bk-a": addrs} if addrs else {}
        self.after_refresh = after_refresh
        self.refreshed: list[str] = []

    async def update_topic_route(self, topic: str) -> None:
        self.refreshed.append(topic)
        if self.after_refresh is not None:
            self.broker_addrs["bk-a"] = self.after_refresh


def _header() -> PullMessageRequestHeader:
    return PullMessageRequestHeader(consumer_group="g", topic="T", queue_id=0, queue_offset=0, max_msg_nums=32,
                                    sys_flag=PullSysFlag.build(True, True, True), commit_offset=5,
                                    suspend_timeout_millis=0, subscription="*", sub_version=0,
                                    expression_type="TAG")


@pytest.mark.parametrize(("addrs", "suggested", "expected", "commit_bit"), [
    ({0: MASTER, 1: SLAVE}, 0, MASTER, True),
    ({0: MASTER, 1: SLAVE}, 1, SLAVE, False),   # the slave the master suggested
    ({0: MASTER}, 1, MASTER, True),             # suggested slave not in the route: the master
    ({0: MASTER, 2: SLAVE}, 1, SLAVE, False),   # Java: id + 1 when the id is missing
    ({1: SLAVE}, 0, SLAVE, False),              # the master is away: its slave, without the commit
])
def test_the_suggested_broker_else_the_master_else_any(addrs, suggested, expected, commit_bit):
    header = _header()
    inst = _Instance(addrs)
    assert run_async(pull_address(inst, MQ, suggested, header)) == expected
    assert bool(header.sys_flag & PullSysFlag.COMMIT_OFFSET) is commit_bit
    assert header.sys_flag & PullSysFlag.SUSPEND and header.sys_flag & PullSysFlag.SUBSCRIPTION
    assert inst.refreshed == []


def test_an_unknown_broker_name_refreshes_the_route_once_then_fails():
    inst = _Instance({}, after_refresh={0: MASTER})
    assert run_async(pull_address(inst, MQ, 1, _header())) == MASTER
    assert inst.refreshed == ["T"]
    gone = _Instance({})
    with pytest.raises(MQBrokerError, match="bk-a not found"):
        run_async(pull_address(gone, MQ, 0, _header()))
    assert gone.refreshed == ["T"]


def test_the_table_keeps_each_queue_s_last_suggestion():
    nodes = PullFromWhichNode()
    other = MessageQueue("T", "bk-a", 1)
    assert nodes.broker_id(MQ) == 0
    nodes.update(MQ, 1)
    assert (nodes.broker_id(MQ), nodes.broker_id(other)) == (1, 0)
    header = _header()
    assert run_async(nodes.address(_Instance({0: MASTER, 1: SLAVE}), MQ, header)) == SLAVE
    assert not header.sys_flag & PullSysFlag.COMMIT_OFFSET
    nodes.update(MQ, 0)
    assert run_async(nodes.address(_Instance({0: MASTER, 1: SLAVE}), MQ, _header())) == MASTER
