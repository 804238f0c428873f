"""``rocketmq-admin``: mqadmin's commands over :class:`AdminClient`.

Subcommands and short flags follow Apache RocketMQ's ``mqadmin`` (``-n`` name servers, ``-t``
topic, ``-g`` group, ``-c`` cluster, ``-b`` broker...). Output is an aligned table by default,
JSON with ``--json``. Exit codes: 0 success, 1 the operation failed (message on stderr),
2 usage error. ``NAMESRV_ADDR`` is used when ``-n`` is not given.
"""

from __future__ import annotations

import datetime as _dt
import functools
import json
import sys
import time
from collections.abc import Callable
from typing import Any, TypeVar

try:
    import click
except ModuleNotFoundError as exc:  # the core install has no click: the command line is an extra
    raise ModuleNotFoundError("rocketmq-admin needs click: pip install 'rocketmq-python-sdk[cli]'",
                              name=exc.name) from exc
from rocketmq_sdk.exceptions import IllegalArgumentError, MQError, RemotingError
from rocketmq_sdk.protocol.codes import version_desc
from rocketmq_sdk.protocol.message import MessageExt

from .client import AdminClient, parse_namesrv_addr
from .core import JAVA_LONG_MAX
from .models import ClientConnection, ConsumerProgress, running_info_to_dict, to_jsonable
from .render import fmt_ms, key_values, message_block, table

__all__ = ["cli", "main"]

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class AdminCommand(click.Command):
    """A subcommand whose RocketMQ errors become ``ERROR: ...`` on stderr and exit code 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except MQError as exc:
            click.echo(f"ERROR: {exc}", err=True)
            ctx.exit(1)


@click.group(context_settings=CONTEXT_SETTINGS)
@click.version_option(package_name="rocketmq-python-sdk", message="rocketmq-admin %(version)s")
def cli() -> None:
    """RocketMQ 4.x administration (mqadmin's commands). NAMESRV_ADDR is honoured."""


def command(name: str, help_text: str) -> Callable[[Callable[..., None]], click.Command]:
    """Register a subcommand with the common options -n/--namesrvAddr, --json, --timeout and
    --access-key/--secret-key (mqadmin reads them from ``conf/tools.yml``); the callback receives
    an open ``admin`` client and ``as_json``."""

    def deco(fn: Callable[..., None]) -> click.Command:
        @cli.command(name, cls=AdminCommand, help=help_text, context_settings=CONTEXT_SETTINGS)
        @click.option("-n", "--namesrvAddr", "namesrv", metavar="ADDR",
                      help="name servers, 'host:port;host:port' (default $NAMESRV_ADDR)")
        @click.option("--json", "as_json", is_flag=True, help="print JSON instead of a table")
        @click.option("--timeout", "timeout_ms", type=click.IntRange(min=1), default=5000, show_default=True,
                      help="request timeout in ms")
        @click.option("--access-key", "access_key", envvar="ROCKETMQ_ACCESS_KEY", metavar="AK",
                      help="ACL access key: sign every request (default $ROCKETMQ_ACCESS_KEY)")
        @click.option("--secret-key", "secret_key", envvar="ROCKETMQ_SECRET_KEY", metavar="SK",
                      help="ACL secret key (default $ROCKETMQ_SECRET_KEY)")
        @functools.wraps(fn)
        def wrapper(namesrv: str | None, as_json: bool, timeout_ms: int, access_key: str | None,
                    secret_key: str | None, **kwargs: Any) -> None:
            try:
                addrs = parse_namesrv_addr(namesrv)
            except IllegalArgumentError as exc:
                raise click.UsageError(str(exc)) from None
            with AdminClient(addrs, timeout_ms=timeout_ms, access_key=access_key, secret_key=secret_key) as admin:
                fn(admin=admin, as_json=as_json, **kwargs)

        return wrapper

    return deco


def emit(as_json: bool, data: Any, text: Callable[[], str]) -> None:
    """Print ``data`` as JSON, or the text ``text()`` renders."""
    if as_json:
        click.echo(json.dumps(to_jsonable(data), indent=2, ensure_ascii=False, sort_keys=False))
    else:
        click.echo(text())


def require_one(**opts: Any) -> None:
    if not any(v for v in opts.values()):
        names = " or ".join(f"-{k}" for k in opts)
        raise click.UsageError(f"give {names}")


def parse_time_ms(value: str) -> int:
    """mqadmin's timestamp forms: epoch ms, ``now``, or ``yyyy-MM-dd#HH:mm:ss:SSS`` (local)."""
    v = value.strip()
    if v == "now":
        return int(time.time() * 1000)
    if v.lstrip("-").isdigit():
        return int(v)
    for fmt in ("%Y-%m-%d#%H:%M:%S:%f", "%Y-%m-%d#%H:%M:%S", "%Y-%m-%dT%H:%M:%S"):
        try:
            return int(_dt.datetime.strptime(v, fmt).timestamp() * 1000)
        except ValueError:
            continue
    raise click.BadParameter(f"{value!r} is not epoch ms, 'now' or yyyy-MM-dd#HH:mm:ss:SSS")


BOOL = click.BOOL
F = TypeVar("F", bound=Callable[..., Any])


def broker_or_cluster(fn: F) -> F:
    """mqadmin's ``-b/--brokerAddr`` and ``-c/--clusterName`` options (one broker, or every master
    of a cluster), passed as ``broker_addr`` and ``cluster``."""
    return click.option("-b", "--brokerAddr", "broker_addr")(click.option("-c", "--clusterName", "cluster")(fn))


def stdout_is_tty() -> bool:
    """Whether ``--watch`` redraws in place (a terminal) or prints one line per refresh."""
    return sys.stdout.isatty()

# ---------------------------------------------------------------------------------- topics


@command("updateTopic", "Create or update a topic on a broker (-b) or every master of a cluster (-c).")
@click.option("-t", "--topic", required=True)
@broker_or_cluster
@click.option("-r", "--readQueueNums", "read_queue_nums", type=click.IntRange(min=1), default=8, show_default=True)
@click.option("-w", "--writeQueueNums", "write_queue_nums", type=click.IntRange(min=1), default=8, show_default=True)
@click.option("-p", "--perm", type=click.Choice(["2", "4", "6"]), default="6", show_default=True,
              help="2 write, 4 read, 6 read+write")
@click.option("-o", "--order", type=BOOL, default=False, show_default=True, help="ordered topic")
def update_topic(admin: AdminClient, as_json: bool, topic: str, broker_addr: str | None, cluster: str | None,
                 read_queue_nums: int, write_queue_nums: int, perm: str, order: bool) -> None:
    require_one(b=broker_addr, c=cluster)
    addrs = admin.create_topic(topic, cluster=cluster, broker_addr=broker_addr, read_queue_nums=read_queue_nums,
                               write_queue_nums=write_queue_nums, perm=int(perm), order=order)
    data = {"topic": topic, "readQueueNums": read_queue_nums, "writeQueueNums": write_queue_nums,
            "perm": int(perm), "order": order, "brokers": addrs}
    emit(as_json, data, lambda: "\n".join(f"create topic to {a} success." for a in addrs)
         + f"\nTopicConfig [topicName={topic}, readQueueNums={read_queue_nums}, writeQueueNums={write_queue_nums}, "
           f"perm={perm}, order={str(order).lower()}]")


@command("updateTopicPerm", "Change a topic's permission on its brokers (2 write, 4 read, 6 both).")
@click.option("-t", "--topic", required=True)
@click.option("-p", "--perm", type=click.Choice(["2", "4", "6"]), required=True)
@broker_or_cluster
def update_topic_perm(admin: AdminClient, as_json: bool, topic: str, perm: str, broker_addr: str | None,
                      cluster: str | None) -> None:
    addrs = admin.update_topic_perm(topic, int(perm), cluster=cluster, broker_addr=broker_addr)
    emit(as_json, {"topic": topic, "perm": int(perm), "brokers": addrs},
         lambda: "\n".join(f"update topic perm to {perm} in {a} success." for a in addrs))


@command("deleteTopic", "Delete a topic from every master of a cluster and from the name servers.")
@click.option("-t", "--topic", required=True)
@click.option("-c", "--clusterName", "cluster", required=True)
def delete_topic(admin: AdminClient, as_json: bool, topic: str, cluster: str) -> None:
    addrs = admin.delete_topic(topic, cluster=cluster)
    emit(as_json, {"topic": topic, "cluster": cluster, "brokers": addrs},
         lambda: f"delete topic [{topic}] from cluster [{cluster}] success.")


@command("topicList", "List the topics the name server knows (-c: with cluster and consumer groups).")
@click.option("-c", "--clusterModel", "cluster_model", is_flag=True,
              help="one row per cluster, topic and consumer group (retry and DLQ topics left out)")
def topic_list(admin: AdminClient, as_json: bool, cluster_model: bool) -> None:
    if not cluster_model:
        topics = admin.topic_list()
        emit(as_json, topics, lambda: "\n".join(topics))
        return
    rows = admin.topic_list_by_cluster()
    emit(as_json, [{"cluster": c, "topic": t, "consumer_groups": g} for c, t, g in rows], lambda: table(
        ["#Cluster Name", "#Topic", "#Consumer Group"],
        [(c, t, group) for c, t, groups in rows for group in (groups or [""])]))


@command("topicClusterList", "The clusters serving a topic.")
@click.option("-t", "--topic", required=True)
def topic_cluster_list(admin: AdminClient, as_json: bool, topic: str) -> None:
    clusters = admin.topic_clusters(topic)
    emit(as_json, clusters, lambda: "\n".join(clusters))


@command("topicRoute", "Show a topic's route: brokers and queues.")
@click.option("-t", "--topic", required=True)
def topic_route(admin: AdminClient, as_json: bool, topic: str) -> None:
    route = admin.topic_route(topic)
    if as_json:
        click.echo(json.dumps(json.loads(route.to_json(standard=True)), indent=2))
        return
    brokers = table(["#Cluster", "#Broker Name", "#BID", "#Addr"],
                    [(bd.cluster, bd.broker_name, bid, addr)
                     for bd in sorted(route.broker_datas, key=lambda b: b.broker_name)
                     for bid, addr in sorted(bd.broker_addrs.items())])
    queues = table(["#Broker Name", "#Read Queues", "#Write Queues", "#Perm", "#Sys Flag"],
                   [(q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm, q.topic_sys_flag)
                    for q in sorted(route.queue_datas, key=lambda q: q.broker_name)])
    click.echo(brokers + "\n\n" + queues)


@command("topicStatus", "Per-queue min/max offsets and last update time of a topic.")
@click.option("-t", "--topic", required=True)
def topic_status(admin: AdminClient, as_json: bool, topic: str) -> None:
    rows = admin.topic_status(topic)
    emit(as_json, rows, lambda: table(
        ["#Broker Name", "#QID", "#Min Offset", "#Max Offset", "#Last Updated"],
        [(q.broker_name, q.queue_id, q.min_offset, q.max_offset, fmt_ms(q.last_update_timestamp)) for q in rows],
        numeric=(1, 2, 3)))


# ---------------------------------------------------------------------------------- cluster


@command("clusterList", "List clusters and their brokers (address, role, version, TPS, CommitLog end and, "
                         "for slaves, replication lag in bytes).")
@click.option("-c", "--clusterName", "cluster", help="only this cluster")
def cluster_list(admin: AdminClient, as_json: bool, cluster: str | None) -> None:
    rows = [b for b in admin.cluster_list() if not cluster or b.cluster == cluster]
    headers = ["#Cluster Name", "#Broker Name", "#BID", "#Addr", "#Role", "#Version", "#InTPS", "#OutTPS",
               "#CommitLog Max", "#HA Lag"]
    values = [[b.cluster, b.broker_name, b.broker_id, b.addr, b.role, b.version, b.in_tps, b.out_tps,
               b.commit_log_max_offset, "-" if b.broker_id == 0 else b.replication_lag] for b in rows]
    if any(b.dledger_role for b in rows):  # DLedger groups: member, role, term, log index, lag
        lags = {(b.broker_name, p): lag for b in rows if b.dledger_peers for p, (_, lag) in b.dledger_peers.items()}
        headers += ["#DLedger", "#Term", "#Log Index", "#Lag"]
        for b, row in zip(rows, values, strict=True):
            lag = lags.get((b.broker_name, b.dledger_id)) if b.dledger_id else None
            row += [f"{b.dledger_id} {b.dledger_role}" if b.dledger_role else "-", b.dledger_term, b.dledger_index,
                    "-" if lag is None else lag]
    emit(as_json, rows, lambda: table(headers, [tuple(r) for r in values], numeric=(2, 6, 7, 8, 9)))


@command("leadershipTransfer", "Hand the leadership (master role) of a DLedger group to another member, as "
                               "DLedger's own leadershipTransfer command; waits until the name server lists "
                               "the new master.")
@click.option("-b", "--brokerName", "broker_name", required=True, help="the DLedger group's broker name")
@click.option("-t", "--transfereeId", "transferee_id", required=True, help="member to lead (dLegerSelfId, e.g. n1)")
@click.option("--term", type=click.IntRange(min=0), default=None,
              help="the leader's current term (default: from the broker's runtime info; needed for Apache brokers)")
def leadership_transfer(admin: AdminClient, as_json: bool, broker_name: str, transferee_id: str,
                        term: int | None) -> None:
    r = admin.dledger_leadership_transfer(broker_name, transferee_id, term=term)
    emit(as_json, r, lambda: f"leadership of {r.broker_name} (group {r.group}) moved {r.old_leader} → {r.new_leader} "
                             f"in term {r.term}; master {r.master_addr} registered after {r.registered_ms:.0f} ms")


def _broker_targets(admin: AdminClient, broker_addr: str | None, cluster: str | None) -> list[str]:
    require_one(b=broker_addr, c=cluster)
    return [broker_addr] if broker_addr else admin.cluster_broker_addrs(cluster or "")


@command("brokerStatus", "Runtime statistics of a broker (-b) or of every master of a cluster (-c).")
@broker_or_cluster
def broker_status(admin: AdminClient, as_json: bool, broker_addr: str | None, cluster: str | None) -> None:
    data = {a: admin.broker_runtime_info(a) for a in _broker_targets(admin, broker_addr, cluster)}
    emit(as_json, data, lambda: "\n\n".join(
        (f"[{a}]\n" if len(data) > 1 else "") + key_values(sorted(t.items())) for a, t in data.items()))


@command("getBrokerConfig", "Configuration of a broker (-b) or of every master of a cluster (-c).")
@broker_or_cluster
def get_broker_config(admin: AdminClient, as_json: bool, broker_addr: str | None, cluster: str | None) -> None:
    data = {a: admin.broker_config(a) for a in _broker_targets(admin, broker_addr, cluster)}
    emit(as_json, data, lambda: "\n\n".join(
        f"============{a}============\n" + key_values(sorted(c.items())) for a, c in data.items()))


# ---------------------------------------------------------------------------------- groups


def _progress_table(p: ConsumerProgress) -> str:
    body = table(["#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Diff", "#LastTime"],
                 [(q.topic, q.broker_name, q.queue_id, q.broker_offset, q.consumer_offset, q.lag,
                   fmt_ms(q.last_timestamp)) for q in p.queues], numeric=(2, 3, 4, 5))
    return body + f"\n\nConsume TPS: {p.consume_tps:.2f}\nDiff Total: {p.total_lag}"


@command("consumerProgress", "A consumer group's offsets and lag per queue (every group without -g); "
                             "--watch refreshes it.")
@click.option("-g", "--groupName", "group")
@click.option("-t", "--topic", help="only this topic")
@click.option("--watch", is_flag=True, help="refresh until interrupted (or --count refreshes)")
@click.option("--interval", type=click.FloatRange(min=0.0), default=2.0, show_default=True,
              help="seconds between refreshes")
@click.option("--count", type=click.IntRange(min=1), help="stop after this many refreshes")
def consumer_progress(admin: AdminClient, as_json: bool, group: str | None, topic: str | None, watch: bool,
                      interval: float, count: int | None) -> None:
    if group is None:
        if watch:
            raise click.UsageError("--watch needs a group (-g)")
        groups = admin.consumer_groups()
        emit(as_json, groups, lambda: table(
            ["#Group", "#Count", "#Version", "#Type", "#Model", "#TPS", "#Diff Total"],
            [(g.group, g.count, "OFFLINE" if g.version is None else version_desc(g.version), g.consume_type,
              g.message_model, g.consume_tps, g.diff_total)
             for g in groups], numeric=(1, 5, 6)))
        return
    if not watch:
        p = admin.consumer_progress(group, topic)
        emit(as_json, p, lambda: _progress_table(p))
        return
    tty = stdout_is_tty() and not as_json
    n = 0
    try:
        while True:
            n += 1
            stamp = _dt.datetime.now().strftime("%Y-%m-%d %H:%M:%S")
            try:
                p = admin.consumer_progress(group, topic)
            except RemotingError as exc:  # a broker restarting: report it and keep watching
                click.echo(f"{stamp}  ERROR: {exc}", err=True)
            else:
                click.echo(_watch_frame(p, stamp, interval, as_json, tty), color=tty or None)
            if count is not None and n >= count:
                return
            time.sleep(interval)
    except KeyboardInterrupt:
        return


def _watch_frame(p: ConsumerProgress, stamp: str, interval: float, as_json: bool, tty: bool) -> str:
    """One refresh of ``--watch``: a JSON line, a full-screen redraw (terminal) or a plain line."""
    if as_json:
        return json.dumps({"time": stamp, **to_jsonable(p)}, ensure_ascii=False)
    if tty:
        return ("\x1b[H\x1b[2J" + f"{stamp}  group {p.group}  (every {interval:g}s, Ctrl-C to stop)\n\n"
                + _progress_table(p))
    return f"{stamp}  group={p.group}  queues={len(p.queues)}  tps={p.consume_tps:.2f}  lag={p.total_lag}"


@command("consumerConnection", "The clients online in a consumer group and their subscriptions.")
@click.option("-g", "--consumerGroup", "group", required=True)
def consumer_connection(admin: AdminClient, as_json: bool, group: str) -> None:
    c = admin.consumer_connection(group)

    def text() -> str:
        conns = _connections_table(c.connections)
        subs = table(["#Topic", "#SubExpression"], [(s.topic, s.expression) for s in c.subscriptions])
        return (conns + "\n\nBelow is subscription:\n" + subs + "\n\n"
                + key_values([("ConsumeType:", c.consume_type), ("MessageModel:", c.message_model),
                              ("ConsumeFromWhere:", c.consume_from_where)]))

    emit(as_json, c, text)


def _connections_table(conns: list[ClientConnection]) -> str:
    return table(["#", "#ClientId", "#ClientAddr", "#Language", "#Version"],
                 [(i, x.client_id, x.client_addr, x.language, version_desc(x.version))
                  for i, x in enumerate(conns, 1)],
                 numeric=(0,))


@command("producerConnection", "The producers online in a producer group.")
@click.option("-g", "--producerGroup", "group", required=True)
@click.option("-t", "--topic", required=True, help="a topic the group sends to (its brokers are asked)")
def producer_connection(admin: AdminClient, as_json: bool, group: str, topic: str) -> None:
    conns = admin.producer_connection(group, topic)
    emit(as_json, conns, lambda: _connections_table(conns))


@command("consumerStatus", "Running info of a group's consumers (asked through the broker).")
@click.option("-g", "--consumerGroup", "group", required=True)
@click.option("-i", "--clientId", "client_id")
@click.option("-s", "--jstackEnable", "jstack", type=BOOL, default=False)
def consumer_status(admin: AdminClient, as_json: bool, group: str, client_id: str | None, jstack: bool) -> None:
    infos = admin.consumer_running_info(group, client_id, jstack)
    data = {cid: running_info_to_dict(info) for cid, info in infos.items()}
    emit(as_json, data, lambda: "\n\n".join(
        f"[{cid}]\n" + key_values(sorted(d.get("properties", {}).items()))
        + "\nqueues: " + str(len(d.get("mqTable", {}))) for cid, d in data.items()))


@command("updateSubGroup", "Create or update a subscription group on a broker (-b) or cluster (-c).")
@click.option("-g", "--groupName", "group", required=True)
@broker_or_cluster
@click.option("-s", "--consumeEnable", "consume_enable", type=BOOL, default=True, show_default=True)
@click.option("-m", "--consumeFromMinEnable", "consume_from_min", type=BOOL, default=False, show_default=True)
@click.option("-d", "--consumeBroadcastEnable", "broadcast", type=BOOL, default=False, show_default=True)
@click.option("-q", "--retryQueueNums", "retry_queue_nums", type=click.IntRange(min=0), default=1, show_default=True)
@click.option("-r", "--retryMaxTimes", "retry_max_times", type=click.IntRange(min=-1), default=16,
              show_default=True)
@click.option("-i", "--brokerId", "broker_id", type=int, default=0, show_default=True)
@click.option("-w", "--whichBrokerWhenConsumeSlowly", "slow_broker", type=int, default=1, show_default=True)
@click.option("-a", "--notifyConsumerIdsChanged", "notify", type=BOOL, default=True, show_default=True)
def update_sub_group(admin: AdminClient, as_json: bool, group: str, broker_addr: str | None, cluster: str | None,
                     consume_enable: bool, consume_from_min: bool, broadcast: bool, retry_queue_nums: int,
                     retry_max_times: int, broker_id: int, slow_broker: int, notify: bool) -> None:
    require_one(b=broker_addr, c=cluster)
    addrs = admin.update_subscription_group(
        group, cluster=cluster, broker_addr=broker_addr, consume_enable=consume_enable,
        consume_from_min_enable=consume_from_min, consume_broadcast_enable=broadcast,
        retry_queue_nums=retry_queue_nums, retry_max_times=retry_max_times, broker_id=broker_id,
        which_broker_when_consume_slowly=slow_broker, notify_consumer_ids_changed_enable=notify)
    emit(as_json, {"group": group, "brokers": addrs},
         lambda: "\n".join(f"create subscription group to {a} success." for a in addrs))


@command("setConsumeMode", "Set a group's consume mode on a topic (POP or PULL; RocketMQ 5.x brokers).")
@click.option("-g", "--groupName", "group", required=True)
@click.option("-t", "--topicName", "topic", required=True)
@click.option("-m", "--mode", "mode", type=click.Choice(["POP", "PULL"]), required=True)
@click.option("-q", "--popShareQueueNum", "share", type=click.IntRange(min=0), default=0, show_default=True)
@broker_or_cluster
def set_consume_mode(admin: AdminClient, as_json: bool, group: str, topic: str, mode: str, share: int,
                     broker_addr: str | None, cluster: str | None) -> None:
    require_one(b=broker_addr, c=cluster)
    addrs = admin.set_consume_mode(group, topic, mode, share, cluster=cluster, broker_addr=broker_addr)
    emit(as_json, {"group": group, "topic": topic, "mode": mode, "popShareQueueNum": share, "brokers": addrs},
         lambda: "\n".join(f"set consume mode to {a} success." for a in addrs))


@command("resetOffsetByTime", "Reset a group's offsets on a topic to a point in time (online clients follow).")
@click.option("-g", "--group", required=True)
@click.option("-t", "--topic", required=True)
@click.option("-s", "--timestamp", "when", required=True,
              help="epoch ms, 'now', or yyyy-MM-dd#HH:mm:ss:SSS")
@click.option("-f", "--force", type=BOOL, default=True, show_default=True)
def reset_offset_by_time(admin: AdminClient, as_json: bool, group: str, topic: str, when: str, force: bool) -> None:
    ts = parse_time_ms(when)
    rows = admin.reset_offset_by_time(group, topic, ts, force=force)
    direct = " (group offline: offsets written on the brokers directly)" if any(e.direct for e in rows) else ""
    when_text = {0: "the earliest offset", -1: "the latest offset"}.get(ts) or fmt_ms(ts)
    emit(as_json, rows, lambda: f"reset consumer offset of group {group} on {topic} to {when_text}{direct}\n"
         + table(["#Broker Name", "#Queue", "#Offset"], [(e.broker_name, e.queue_id, e.offset) for e in rows],
                 numeric=(1, 2)))


# ---------------------------------------------------------------------------------- messages


def _show_messages(as_json: bool, msgs: list[MessageExt]) -> None:
    emit(as_json, msgs, lambda: "\n\n".join(message_block(m) for m in msgs))


@command("queryMsgById", "Show a message by id (offset id, or the unique id of SendResult.msg_id); "
                        "-g/-d resends it to a consumer.")
@click.option("-i", "--msgId", "msg_id", required=True)
@click.option("-t", "--topic", help="topic of a unique (client) id (default: every topic is searched)")
@click.option("-g", "--consumerGroup", "group", help="resend the message to this group's consumer")
@click.option("-d", "--clientId", "client_id", help="the consumer client id (default: every client)")
def query_msg_by_id(admin: AdminClient, as_json: bool, msg_id: str, topic: str | None, group: str | None,
                    client_id: str | None) -> None:
    if group:
        results = admin.consume_message_directly(group, msg_id, client_id, topic)
        data = {cid: json.loads(r.to_json(standard=True)) for cid, r in results.items()}
        emit(as_json, data, lambda: table(["#ClientId", "#Result", "#SpentMs", "#Remark"],
                                          [(cid, d.get("consumeResult"), d.get("spentTimeMills"), d.get("remark"))
                                           for cid, d in data.items()]))
        return
    _show_messages(as_json, [admin.query_message_by_id(msg_id, topic)])


@command("queryMsgByUniqueKey", "Show a message by its unique (client) id.")
@click.option("-i", "--msgId", "msg_id", required=True)
@click.option("-t", "--topic", required=True)
def query_msg_by_unique_key(admin: AdminClient, as_json: bool, msg_id: str, topic: str) -> None:
    _show_messages(as_json, [admin.query_message_by_unique_key(topic, msg_id)])


@command("queryMsgByKey", "Messages of a topic with a key (optionally within a time range).")
@click.option("-t", "--topic", required=True)
@click.option("-k", "--msgKey", "key", required=True)
@click.option("-b", "--beginTimestamp", "begin", default="0", help="epoch ms / 'now' / yyyy-MM-dd#HH:mm:ss:SSS")
@click.option("-e", "--endTimestamp", "end", help="same forms; default: no limit")
@click.option("-c", "--maxNum", "max_num", type=click.IntRange(min=1), default=64, show_default=True)
def query_msg_by_key(admin: AdminClient, as_json: bool, topic: str, key: str, begin: str, end: str | None,
                     max_num: int) -> None:
    msgs = admin.query_message_by_key(topic, key, max_num=max_num, begin_ms=parse_time_ms(begin),
                                      end_ms=JAVA_LONG_MAX if end is None else parse_time_ms(end))
    emit(as_json, msgs, lambda: table(["#Message ID", "#QID", "#Offset", "#Store Time", "#Tags"],
                                      [(m.msg_id, m.queue_id, m.queue_offset, fmt_ms(m.store_timestamp), m.tags)
                                       for m in msgs], numeric=(1, 2)))


@command("queryMsgByOffset", "Show the message at an offset of a queue.")
@click.option("-t", "--topic", required=True)
@click.option("-b", "--brokerName", "broker_name", required=True)
@click.option("-i", "--queueId", "queue_id", type=click.IntRange(min=0), required=True)
@click.option("-o", "--offset", type=click.IntRange(min=0), required=True)
def query_msg_by_offset(admin: AdminClient, as_json: bool, topic: str, broker_name: str, queue_id: int,
                        offset: int) -> None:
    _show_messages(as_json, [admin.query_message_by_offset(topic, broker_name, queue_id, offset)])


# ---------------------------------------------------------------------------------- name server


def _show_write_perm_counts(as_json: bool, verb: str, broker_name: str, counts: dict[str, int]) -> None:
    """mqadmin's lines: how many queue datas of the broker each name server changed."""
    emit(as_json, counts, lambda: "\n".join(
        f"{verb} write perm of broker[{broker_name}] in name server[{ns}] OK, {n}" for ns, n in counts.items()))


@command("wipeWritePerm", "Remove a broker's write permission on the name servers (drain before maintenance).")
@click.option("-b", "--brokerName", "broker_name", required=True)
def wipe_write_perm(admin: AdminClient, as_json: bool, broker_name: str) -> None:
    _show_write_perm_counts(as_json, "wipe", broker_name, admin.wipe_write_perm(broker_name))


@command("addWritePerm", "Give a broker its write permission back on the name servers.")
@click.option("-b", "--brokerName", "broker_name", required=True)
def add_write_perm(admin: AdminClient, as_json: bool, broker_name: str) -> None:
    _show_write_perm_counts(as_json, "add", broker_name, admin.add_write_perm(broker_name))


@command("getNamesrvConfig", "Configuration of every name server.")
def get_namesrv_config(admin: AdminClient, as_json: bool) -> None:
    data = admin.namesrv_config()
    emit(as_json, data, lambda: "\n\n".join(
        f"============{ns}============\n" + key_values(sorted(c.items())) for ns, c in data.items()))


@command("updateNamesrvConfig", "Change a setting on every name server (keys of configBlackList are refused).")
@click.option("-k", "--key", required=True)
@click.option("-v", "--value", required=True)
def update_namesrv_config(admin: AdminClient, as_json: bool, key: str, value: str) -> None:
    servers = admin.update_namesrv_config({key: value})
    emit(as_json, {"namesrv": servers, "key": key, "value": value},
         lambda: f"update name server config success![{', '.join(servers)}]\n{key} : {value}")


# ---------------------------------------------------------------------------------- ACL


def _perm_list(value: str | None) -> list[str] | None:
    return None if value is None else [p.strip() for p in value.split(",") if p.strip()]


@command("updateAclConfig", "Create or update an ACL account in the brokers' plain_acl.yml.")
@broker_or_cluster
@click.option("-a", "--accessKey", "ak", required=True)
@click.option("-s", "--secretKey", "sk", required=True)
@click.option("-w", "--whiteRemoteAddress", "white")
@click.option("-i", "--defaultTopicPerm", "default_topic_perm")
@click.option("-u", "--defaultGroupPerm", "default_group_perm")
@click.option("-t", "--topicPerms", "topic_perms", help="e.g. topicA=DENY,topicD=SUB")
@click.option("-g", "--groupPerms", "group_perms", help="e.g. groupA=DENY,groupD=SUB")
@click.option("-m", "--admin", "is_admin", type=BOOL, default=False)
def update_acl_config(admin: AdminClient, as_json: bool, broker_addr: str | None, cluster: str | None, ak: str,
                      sk: str, white: str | None, default_topic_perm: str | None, default_group_perm: str | None,
                      topic_perms: str | None, group_perms: str | None, is_admin: bool) -> None:
    require_one(b=broker_addr, c=cluster)
    addrs = admin.update_acl_config(ak, sk, cluster=cluster, broker_addr=broker_addr, white_remote_address=white,
                                    admin=is_admin, default_topic_perm=default_topic_perm,
                                    default_group_perm=default_group_perm, topic_perms=_perm_list(topic_perms),
                                    group_perms=_perm_list(group_perms))
    emit(as_json, {"brokers": addrs, "accessKey": ak}, lambda: "\n".join(
        f"create or update plain access config to {a} success." for a in addrs))


@command("deleteAccessConfig", "Delete an ACL account from the brokers' plain_acl.yml.")
@broker_or_cluster
@click.option("-a", "--accessKey", "ak", required=True)
def delete_access_config(admin: AdminClient, as_json: bool, broker_addr: str | None, cluster: str | None,
                         ak: str) -> None:
    require_one(b=broker_addr, c=cluster)
    addrs = admin.delete_acl_config(ak, cluster=cluster, broker_addr=broker_addr)
    emit(as_json, {"brokers": addrs, "accessKey": ak}, lambda: "\n".join(
        f"delete plain access config account from {a} success." for a in addrs) + f"\naccount's accesskey is:{ak}")


@command("updateGlobalWhiteAddr", "Replace the brokers' ACL globalWhiteRemoteAddresses.")
@broker_or_cluster
@click.option("-g", "--globalWhiteRemoteAddresses", "addresses", required=True, help="e.g. 10.10.103.*,192.168.0.*")
def update_global_white_addr(admin: AdminClient, as_json: bool, broker_addr: str | None, cluster: str | None,
                             addresses: str) -> None:
    require_one(b=broker_addr, c=cluster)
    addrs = admin.update_global_white_addrs(_perm_list(addresses) or [], cluster=cluster, broker_addr=broker_addr)
    emit(as_json, {"brokers": addrs, "globalWhiteRemoteAddresses": _perm_list(addresses)}, lambda: "\n".join(
        f"update global white remote addresses to {a} success." for a in addrs))


@command("clusterAclConfigVersion", "The ACL file version of a broker (-b) or of every master of a cluster (-c).")
@broker_or_cluster
def cluster_acl_config_version(admin: AdminClient, as_json: bool, broker_addr: str | None,
                               cluster: str | None) -> None:
    require_one(b=broker_addr, c=cluster)
    data = admin.acl_config_version(cluster=cluster, broker_addr=broker_addr)

    def text() -> str:
        out = []
        for addr, h in data.items():
            v = json.loads(h.get("version") or "{}")
            out.append((h.get("clusterName", ""), h.get("brokerName", ""), addr, v.get("counter", ""),
                        fmt_ms(v.get("timestamp"))))
        return table(["#Cluster Name", "#Broker Name", "#Broker Addr", "#AclConfigVersionNum", "#AclLastUpdateTime"],
                     out, numeric=(3,))

    emit(as_json, data, text)


@command("updateKvConfig", "Create or update a KV config entry on the name servers.")
@click.option("-s", "--namespace", required=True)
@click.option("-k", "--key", required=True)
@click.option("-v", "--value", required=True)
def update_kv_config(admin: AdminClient, as_json: bool, namespace: str, key: str, value: str) -> None:
    admin.put_kv_config(namespace, key, value)
    emit(as_json, {"namespace": namespace, "key": key, "value": value}, lambda: "update kv config in namespace success.")


@command("deleteKvConfig", "Delete a KV config entry from the name servers.")
@click.option("-s", "--namespace", required=True)
@click.option("-k", "--key", required=True)
def delete_kv_config(admin: AdminClient, as_json: bool, namespace: str, key: str) -> None:
    admin.delete_kv_config(namespace, key)
    emit(as_json, {"namespace": namespace, "key": key}, lambda: "delete kv config from namespace success.")


@command("getKvConfig", "Read a KV config entry (or, without -k, the whole namespace).")
@click.option("-s", "--namespace", required=True)
@click.option("-k", "--key")
def get_kv_config(admin: AdminClient, as_json: bool, namespace: str, key: str | None) -> None:
    if key is None:
        kv = admin.kv_list(namespace)
        emit(as_json, kv, lambda: table(["#Key", "#Value"], sorted(kv.items())))
        return
    value = admin.get_kv_config(namespace, key)
    if value is None:
        raise MQError(f"no key {key!r} in namespace {namespace!r}")
    emit(as_json, {"namespace": namespace, "key": key, "value": value}, lambda: value)


def main(argv: list[str] | None = None) -> None:
    """Console entry point (``rocketmq-admin``)."""
    cli.main(args=argv, prog_name="rocketmq-admin")
