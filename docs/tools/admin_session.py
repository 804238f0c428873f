"""Regenerate the "Example session" of ``docs/admin.md`` against the reference cluster.

Usage: ``.venv/bin/python docs/tools/admin_session.py > session.md``

Starts ``rocketmq_broker.embedded.start_cluster(("broker-a", "broker-b"))`` in this process (temporary
store; ACL on, with ``127.0.0.1`` globally white-listed so unsigned requests pass and the ACL admin
commands have a validator), creates topic ``Orders`` (4 queues on each broker), sends 16 messages
with keys ``order-0`` .. ``order-15``, consumes them with the push consumer group ``order_cg`` and
then runs every ``rocketmq-admin`` subcommand (click's ``CliRunner`` on
``rocketmq_sdk.admin.cli:cli``; ``leadershipTransfer`` on a second, DLedger cluster), printing ``$ rocketmq-admin ...`` and the verbatim output as one
Markdown console block. A long output is cut after a few lines, with a note saying so, and trailing
blanks are dropped. Ports, ids and times vary from run to run; the temporary store path is shown as
``<store>`` and the home directory as ``~``.

:func:`main` returns 0, or raises :class:`SessionError` when a command exits non-zero or the setup
does not complete in time.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import TextIO

from click.testing import CliRunner
from rocketmq_broker import embedded
from rocketmq_sdk import Producer
from rocketmq_sdk.admin import AdminClient
from rocketmq_sdk.admin.cli import cli
from rocketmq_sdk.consumer import ConsumeConcurrentlyStatus, PushConsumer
from rocketmq_sdk.exceptions import MQBrokerError
from rocketmq_sdk.protocol.message import Message

TOPIC = "Orders"
GROUP = "order_cg"
PRODUCER_GROUP = "order_pg"
N = 16
TAGS = ("created", "paid", "shipped", "delivered")
# white-lists this host, so the session needs no keys; the ACL admin commands need aclEnable
ACL_YML = "globalWhiteRemoteAddresses:\n  - 127.0.0.1\naccounts: []\n"
HOME = os.path.join(os.path.expanduser("~"), "")  # shown as "~/" (name server's default paths)
FAST_CONSUMER = {"suspend_timeout": 1000, "pull_timeout": 4000, "rebalance_interval": 500,
                 "persist_consumer_offset_interval": 200, "consume_from_where": "CONSUME_FROM_FIRST_OFFSET",
                 "heartbeat_broker_interval": 500}


class SessionError(RuntimeError):
    """A command of the session failed, or the cluster did not reach the expected state in time."""


def wait_until(cond: Callable[[], bool], what: str, timeout_s: float = 20.0) -> None:
    """Poll ``cond`` every 50 ms until true; SessionError after ``timeout_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise SessionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.05)


class Session:
    """Runs rocketmq-admin commands and collects a Markdown console transcript."""

    def __init__(self, namesrv_addr: str, store_dir: str) -> None:
        self.env = {"NAMESRV_ADDR": namesrv_addr}
        self.store_dir = store_dir
        self.lines = ["```console", f"$ export NAMESRV_ADDR={namesrv_addr}", ""]
        self.commands: list[str] = []

    def run(self, *args: str, head: int | None = None, note: str = "", exit_code: int = 0) -> str:
        """Run ``rocketmq-admin args``, record it (the output cut to ``head`` lines with a note
        when longer; ``$ echo $?`` shown when ``exit_code`` is not 0) and return the full output.
        Raises SessionError when the command does not exit with ``exit_code``."""
        r = CliRunner().invoke(cli, list(args), env=self.env, prog_name="rocketmq-admin")
        out = r.output.replace(self.store_dir, "<store>").replace(HOME, "~/")
        if r.exit_code != exit_code:
            raise SessionError(f"rocketmq-admin {' '.join(args)} exited {r.exit_code}, not {exit_code}:\n{out}"
                               + (f"\n{r.exception!r}" if r.exception else ""))
        self.commands.append(args[0])
        shown = [ln.rstrip() for ln in out.rstrip("\n").splitlines()]
        if head is not None and len(shown) > head:
            cut = len(shown) - head
            shown = shown[:head] + [f"... ({cut} more lines{'; ' + note if note else ''})"]
        if exit_code:
            shown += ["$ echo $?", str(exit_code)]
        self.lines += ["$ rocketmq-admin " + " ".join(args), *shown, ""]
        return r.output

    def markdown(self) -> str:
        return "\n".join([*self.lines[:-1], "```"]) + "\n"


def _write_acl_files(store_dir: str, brokers: tuple[str, ...]) -> None:
    for name in brokers:  # the default aclConfigFile: <storePathRootDir>/conf/plain_acl.yml
        os.makedirs(os.path.join(store_dir, name, "conf"), exist_ok=True)
        with open(os.path.join(store_dir, name, "conf", "plain_acl.yml"), "w", encoding="utf-8") as fh:
            fh.write(ACL_YML)


def _session(cluster: embedded.EmbeddedCluster, store_dir: str) -> Session:
    ns, addr_a, addr_b = cluster.namesrv_addr, cluster.addr("broker-a"), cluster.addr("broker-b")
    with AdminClient(ns) as admin:
        wait_until(lambda: len(admin.cluster_list(runtime=False)) == 2, "two brokers registered")
        admin.create_topic(TOPIC, cluster="DefaultCluster", read_queue_nums=4, write_queue_nums=4)
        wait_until(lambda: len(admin.topic_route(TOPIC).queue_datas) == 2, "Orders routed on both brokers")
        consumed: set[str] = set()
        lock = threading.Lock()

        def listener(msgs, ctx):
            with lock:
                consumed.update(m.msg_id for m in msgs)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        with Producer(PRODUCER_GROUP, ns, heartbeat_broker_interval=500) as producer:
            sent = [producer.send(Message(TOPIC, f"order #{i}", tags=TAGS[i % 4], keys=[f"order-{i}"]))
                    for i in range(N)]
            consumer = PushConsumer(GROUP, ns, instance_name="orders", **FAST_CONSUMER)
            consumer.subscribe(TOPIC, "*")
            consumer.register_message_listener(listener)
            consumer.start()
            try:
                wait_until(lambda: len(consumed) == N, "all messages consumed")
                wait_until(lambda: (p := admin.consumer_progress(GROUP, TOPIC)).total_lag == 0
                           and len(p.queues) == 8, "offsets committed")

                def producer_online() -> bool:
                    try:
                        return bool(admin.producer_connection(PRODUCER_GROUP, TOPIC))
                    except MQBrokerError:
                        return False  # "the producer group not exist" until its heartbeat arrives

                wait_until(producer_online, "producer heartbeat")
                s = sent[2]
                q = s.message_queue
                client_id = consumer.instance.client_id
                out = Session(ns, store_dir)
                out.run("clusterList")
                out.run("topicList")
                out.run("topicList", "-c")
                out.run("topicClusterList", "-t", TOPIC)
                out.run("topicRoute", "-t", TOPIC)
                out.run("topicStatus", "-t", TOPIC)
                out.run("consumerProgress", "-g", GROUP, "-t", TOPIC)
                out.run("consumerProgress")
                out.run("consumerConnection", "-g", GROUP)
                out.run("consumerStatus", "-g", GROUP, head=25, note="more settings, then the number of queues held")
                out.run("producerConnection", "-g", PRODUCER_GROUP, "-t", TOPIC)
                out.run("queryMsgByKey", "-t", TOPIC, "-k", "order-2")
                out.run("queryMsgByUniqueKey", "-i", s.msg_id, "-t", TOPIC)
                out.run("queryMsgById", "-i", s.offset_msg_id)
                out.run("queryMsgByOffset", "-t", TOPIC, "-b", q.broker_name, "-i", str(q.queue_id),
                        "-o", str(s.queue_offset), "--json")
                out.run("queryMsgById", "-i", s.offset_msg_id, "-g", GROUP, "-d", client_id)
                out.run("resetOffsetByTime", "-g", GROUP, "-t", TOPIC, "-s", "0")
                out.run("updateSubGroup", "-c", "DefaultCluster", "-g", GROUP, "-r", "5")
                out.run("setConsumeMode", "-c", "DefaultCluster", "-g", GROUP, "-t", TOPIC, "-m", "PULL")
                out.run("brokerStatus", "-b", addr_a, head=12, note="trimmed here")
                out.run("getBrokerConfig", "-b", addr_b, head=8, note="trimmed here")
                out.run("wipeWritePerm", "-b", "broker-b")
                out.run("topicRoute", "-t", TOPIC)
                out.run("addWritePerm", "-b", "broker-b")
                out.run("updateTopic", "-c", "DefaultCluster", "-t", "Scratch", "-r", "2", "-w", "2")
                out.run("updateTopicPerm", "-c", "DefaultCluster", "-t", "Scratch", "-p", "4")
                out.run("deleteTopic", "-c", "DefaultCluster", "-t", "Scratch")
                out.run("updateKvConfig", "-s", "ORDER_NS", "-k", "region", "-v", "eu-west")
                out.run("getKvConfig", "-s", "ORDER_NS", "-k", "region")
                out.run("getKvConfig", "-s", "ORDER_NS")
                out.run("deleteKvConfig", "-s", "ORDER_NS", "-k", "region")
                out.run("getNamesrvConfig", head=10, note="trimmed here")
                out.run("updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true")
                admin.update_namesrv_config({"orderMessageEnable": "false"})
                out.run("updateAclConfig", "-c", "DefaultCluster", "-a", "OrderService", "-s", "order-secret",
                        "-i", "DENY", "-u", "SUB", "-t", f"{TOPIC}=PUB")
                out.run("updateGlobalWhiteAddr", "-c", "DefaultCluster", "-g", "127.0.0.1,10.10.103.*")
                out.run("clusterAclConfigVersion", "-c", "DefaultCluster")
                out.run("deleteAccessConfig", "-c", "DefaultCluster", "-a", "OrderService")
                out.run("topicStatus", "-t", "NoSuchTopic", exit_code=1)
                return out
            finally:
                consumer.shutdown()


def _dledger_part(out: Session, store_dir: str) -> None:
    """A second cluster, a DLedger group of three (``broker-a`` n0, n1, n2, in this process):
    ``clusterList`` with its DLedger columns, ``leadershipTransfer`` to another member, and
    ``clusterList`` again."""
    with embedded.start_dev_cluster(store_dir, in_process=True, cluster="dledger") as group:
        ns = group.namesrv_addr
        leader = group.broker.dledger.node
        target = next(f"n{i}" for i in range(3) if f"n{i}" != leader.config.self_id)
        out.lines += ["$ # a second name server: a DLedger group of three (python -m rocketmq_broker dev "
                      "--cluster dledger)", ""]
        out.run("clusterList", "-n", ns)
        out.run("leadershipTransfer", "-n", ns, "-b", "broker-a", "-t", target)
        wait_until(lambda: all(b.dledger.node.leader_id == target for b in group._servers[1:]),
                   "every member following the new leader")
        out.run("clusterList", "-n", ns)


def main(out: TextIO | None = None) -> int:
    """Run the session, write the Markdown console block to ``out`` (stdout) and return 0.

    Raises:
        SessionError: a command exited non-zero or the setup timed out.
    """
    brokers = ("broker-a", "broker-b")
    with tempfile.TemporaryDirectory(prefix="rocketmq-admin-session-") as store_dir:
        _write_acl_files(store_dir, brokers)
        with embedded.start_cluster(brokers, store_dir=store_dir, broker_config={"acl_enable": True,
                                                                                   "broker_version": "5.3.3"}) as cluster:
            session = _session(cluster, store_dir)
        _dledger_part(session, os.path.join(store_dir, "dledger"))
    (out or sys.stdout).write(session.markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main())
