"""``python -m rocketmq_broker dev``: a name server and a broker in one process, for development,
or with ``--cluster 2m | 2m-2s-async | 2m-2s-sync`` a name server and one process per broker.

Takes Apache's default ports, 9876 (name server) and 10911 (broker), when they are free, as
``mqnamesrv``/``mqbroker`` do, so snippets that say ``127.0.0.1:9876`` work as pasted; when one is
taken it picks a free port and says so on stderr, with an ``export NAMESRV_ADDR=...`` line to
paste (the multi-process modes always take free ports). Prints ``NAMESRV 127.0.0.1:<port>``,
``BROKER 127.0.0.1:<port>`` (the first master), one
``BROKER.<brokerName>.<brokerId> <role> <addr> ha=<HA addr> pid=<pid>`` line per broker,
``STORE <dir>`` and ``READY`` on stdout; logs go to stderr (multi-process: ``<store>/*/broker.log``).
Stops cleanly (store flushed, offsets persisted, abort file removed) on SIGINT or SIGTERM; a
temporary store (no ``--store DIR``) is then deleted.
``python -m rocketmq_broker namesrv`` / ``broker -c broker.conf`` are ``rocketmq-namesrv`` /
``rocketmq-broker``; ``python -m rocketmq_broker proxy -n NAMESRV`` runs the gRPC proxy alone.
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import socket
import tempfile
import threading
from typing import Any

import click

from .broker.config import BrokerConfig
from .broker.controller import BrokerController
from .cli import broker_main, namesrv_main
from .cluster_modes import MODES
from .embedded import DevClusterError, start_dev_cluster
from .namesrv.server import NameServer, NamesrvConfig
from .runner import announce, event_loop_option, run_until_signal, setup_logging


@click.group()
def main() -> None:
    """Reference RocketMQ name server and broker."""


#: Apache RocketMQ's default ports (``mqnamesrv`` listenPort, ``mqbroker`` listenPort)
DEFAULT_NAMESRV_PORT = 9876
DEFAULT_BROKER_PORT = 10911


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """True when ``host:port`` can be bound now (as the server binds it: SO_REUSEADDR)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _choose_grpc_server(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value:  # read by GrpcProxy (also the proxy's own loop thread in cluster mode)
        os.environ["ROCKETMQ_GRPC_SERVER"] = value


def grpc_tls_options(fn):
    """``--grpc-tls-cert`` / ``--grpc-tls-key``: the gRPC proxy serves TLS only; ``--grpc-server``:
    which gRPC server the proxy runs on."""
    fn = click.option("--grpc-server", type=click.Choice(["own", "grpcio"]), default=None, expose_value=False,
                      envvar="ROCKETMQ_GRPC_SERVER", callback=_choose_grpc_server,
                      help="The gRPC proxy's server: own (default: this project's asyncio HTTP/2 server) or "
                           "grpcio (grpc.aio's). Also $ROCKETMQ_GRPC_SERVER.")(fn)
    fn = click.option("--grpc-tls-key", type=click.Path(exists=True, dir_okay=False), default=None,
                      help="PEM private key of --grpc-tls-cert.")(fn)
    return click.option("--grpc-tls-cert", type=click.Path(exists=True, dir_okay=False), default=None,
                        help="PEM certificate chain: the gRPC port serves TLS only (5.x clients with TLS "
                             "enabled; this SDK: use_tls=True / grpcs://). Needs --grpc-tls-key.")(fn)


def read_grpc_tls(cert: str | None, key: str | None) -> tuple[bytes, bytes] | None:
    """``(key PEM, certificate chain PEM)`` of the TLS options, None without them.

    Raises:
        click.UsageError: only one of the two given.
    """
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        raise click.UsageError("--grpc-tls-cert and --grpc-tls-key go together")
    with open(key, "rb") as k, open(cert, "rb") as c:
        return k.read(), c.read()


@main.command()
@click.option("--store", "--store-dir", "store_dir", type=click.Path(file_okay=False), default=None,
              help="Store root directory, kept on exit (default: a new temporary directory, deleted on exit).")
@click.option("--namesrv-port", type=int, default=None,
              help=f"Name server port (default {DEFAULT_NAMESRV_PORT} when free, else a free one; 0: a free one).")
@click.option("--broker-port", type=int, default=None,
              help=f"Broker port (default {DEFAULT_BROKER_PORT} when free, else a free one; 0: a free one).")
@click.option("--broker-name", default="broker-a", show_default=True)
@click.option("--cluster", default="1m", show_default=True,
              help="Deployment mode: 1m (one process), 2m, 2m-2s-async, 2m-2s-sync, dledger, 2x-dledger (a process per "
                   "broker; dledger: a DLedger group of three with automatic failover). "
                   "Any other value is taken as --cluster-name (deprecated).")
@click.option("--cluster-name", default="DefaultCluster", show_default=True, help="brokerClusterName.")
@click.option("--flush-disk-type", type=click.Choice(["ASYNC_FLUSH", "SYNC_FLUSH"]), default="ASYNC_FLUSH",
              show_default=True)
@click.option("--commit-log-file-size", type=int, default=64 * 1024 * 1024, show_default=True,
              help="CommitLog file size in bytes.")
@click.option("--busy-poll-us", type=click.IntRange(min=0), default=0, show_default=True,
              help="Keep the broker's event loop polling this many µs after each answer (0: off; "
                   "see busyPollUs in docs/broker.md).")
@click.option("--enable-property-filter", is_flag=True, default=False,
              help="Allow SQL92 subscriptions (enablePropertyFilter; off by default, as in Apache RocketMQ).")
@click.option("--broker-version", default="4.9.8", show_default=True,
              help="brokerVersion: 4.9.8, or a 5.x version (5.3.3) to serve POP and timer messages "
                   "(see docs/rocketmq5.md).")
@click.option("--recall-message-enable", is_flag=True, default=False,
              help="Let producers cancel timer messages with RECALL_MESSAGE (recallMessageEnable; off by default, "
                   "as in Apache RocketMQ 5.3; needs a 5.x --broker-version).")
@click.option("--grpc-port", type=click.IntRange(min=0), default=None,
              help="Also serve RocketMQ 5's gRPC API (the proxy, for 5.x clients) on this port (0: a free "
                   "one; needs the grpc extra); prints GRPC <addr>. A 4.x --broker-version becomes 5.3.3 "
                   "(5.x clients receive by POP). Mode 1m only.")
@click.option("--grpc-mode", type=click.Choice(["local", "cluster"]), default="local", show_default=True,
              help="How the gRPC proxy reaches the broker (Apache's proxyMode): local = on the broker's event "
                   "loop, sends handed to it without a connection; cluster = a thread of its own speaking "
                   "remoting, as `rocketmq_broker proxy`.")
@grpc_tls_options
@click.option("--log-level", default="INFO", show_default=True)
@event_loop_option
def dev(store_dir: str | None, namesrv_port: int | None, broker_port: int | None, broker_name: str,
        cluster: str, cluster_name: str, flush_disk_type: str, commit_log_file_size: int, busy_poll_us: int,
        enable_property_filter: bool, broker_version: str, recall_message_enable: bool, grpc_port: int | None,
        grpc_mode: str, grpc_tls_cert: str | None, grpc_tls_key: str | None, log_level: str,
        event_loop: str) -> None:
    """Run a name server and one broker (or the brokers of a --cluster mode) on 127.0.0.1."""
    setup_logging(log_level)
    grpc_tls = read_grpc_tls(grpc_tls_cert, grpc_tls_key)
    if cluster not in MODES:
        click.echo(f"warning: --cluster {cluster} is not a mode ({', '.join(MODES)}); "
                   "taken as --cluster-name", err=True)
        cluster, cluster_name = "1m", cluster
    if grpc_port is not None and cluster != "1m":
        raise click.UsageError("--grpc-port works with --cluster 1m only")
    temporary = store_dir is None
    store_dir = store_dir or tempfile.mkdtemp(prefix="rocketmq-dev-")
    try:
        if cluster != "1m":
            os.makedirs(store_dir, exist_ok=True)
            _dev_multi(cluster, store_dir, cluster_name, flush_disk_type, commit_log_file_size, busy_poll_us,
                       event_loop, enable_property_filter)
        else:
            _run_dev(store_dir, namesrv_port, broker_port, broker_name, cluster_name, flush_disk_type,
                     commit_log_file_size, busy_poll_us, event_loop, enable_property_filter, broker_version,
                     grpc_port, grpc_mode, grpc_tls, recall_message_enable)
    finally:
        if temporary:
            shutil.rmtree(store_dir, ignore_errors=True)


def _run_dev(store_dir: str, namesrv_port: int | None, broker_port: int | None, broker_name: str, cluster: str,
             flush_disk_type: str, commit_log_file_size: int, busy_poll_us: int, event_loop: str,
             enable_property_filter: bool = False, broker_version: str = "4.9.8",
             grpc_port: int | None = None, grpc_mode: str = "local",
             grpc_tls: tuple[bytes, bytes] | None = None, recall_message_enable: bool = False) -> None:
    os.makedirs(store_dir, exist_ok=True)
    ns = NameServer(NamesrvConfig(listen_port=DEFAULT_NAMESRV_PORT if namesrv_port is None else namesrv_port))
    holder: dict[str, Any] = {}

    async def start() -> None:
        try:
            await ns.start()
        except OSError as exc:
            if namesrv_port is not None or exc.errno != errno.EADDRINUSE:
                raise
            ns.config.listen_port = 0  # 9876 is taken: any free port (and say so below)
            await ns.start()
        announce("NAMESRV", ns.addr)
        if broker_port is None:
            broker_port_now = DEFAULT_BROKER_PORT if port_is_free(DEFAULT_BROKER_PORT) else 0
        else:
            broker_port_now = broker_port
        cfg = BrokerConfig(broker_name=broker_name, broker_cluster_name=cluster, listen_port=broker_port_now,
                           namesrv_addr=ns.addr, store_path_root_dir=store_dir, flush_disk_type=flush_disk_type,
                           mapped_file_size_commit_log=commit_log_file_size, busy_poll_us=busy_poll_us,
                           enable_property_filter=enable_property_filter, broker_version=broker_version,
                           recall_message_enable=recall_message_enable)
        if grpc_port is not None and str(broker_version).startswith("4."):
            cfg.broker_version = GRPC_BROKER_VERSION  # 5.x clients receive by POP, which a 5.x broker serves
        broker = holder["b"] = BrokerController(cfg)
        await broker.start()
        announce("BROKER", cfg.broker_addr)
        announce(f"BROKER.{cfg.broker_name}.{cfg.broker_id}",
                 f"{cfg.broker_role} {cfg.broker_addr} ha={broker.ha_server_addr} pid={os.getpid()}")
        announce("STORE", store_dir)
        if grpc_port is not None and grpc_mode == "cluster":
            holder["grpc_thread"] = start_grpc_proxy(ns.addr, grpc_port, tls=grpc_tls)
        elif grpc_port is not None:  # local mode: on this loop, sends to the broker skip the connection
            holder["grpc"] = await serve_grpc_proxy(ns.addr, grpc_port, local_broker=(broker.server, cfg.broker_addr),
                                                    tls=grpc_tls)
        if namesrv_port is None and ns.port != DEFAULT_NAMESRV_PORT:
            click.echo(f"port {DEFAULT_NAMESRV_PORT} is in use, so the name server took {ns.addr}: use it "
                       f"instead of 127.0.0.1:{DEFAULT_NAMESRV_PORT} in the examples, or paste\n"
                       f"    export NAMESRV_ADDR={ns.addr}\n"
                       "and create clients without namesrv_addr (they read $NAMESRV_ADDR)", err=True)
        if broker_port is None and cfg.listen_port != DEFAULT_BROKER_PORT:
            click.echo(f"port {DEFAULT_BROKER_PORT} is in use, so the broker took {cfg.broker_addr}", err=True)

    async def stop() -> None:
        if "grpc_thread" in holder:
            holder["grpc_thread"].stop()
        if "grpc" in holder:
            await holder["grpc"].aclose()
        if "b" in holder:
            await holder["b"].stop()
        await ns.stop()

    run_until_signal(start, stop, event_loop)


#: the brokerVersion of ``dev --grpc-port``: POP (5.x clients' receive) needs a 5.x broker
GRPC_BROKER_VERSION = "5.3.3"


def _grpc_proxy_class():
    try:
        from .proxy import GrpcProxy
    except ImportError as exc:
        raise click.ClickException(f"--grpc-port needs the grpc extra (pip install "
                                   f"'rocketmq-python-sdk[grpc]'): {exc}") from None
    return GrpcProxy


def start_grpc_proxy(namesrv_addr: str, port: int, host: str = "127.0.0.1", **options: Any):
    """Start the gRPC proxy (``rocketmq_broker.proxy``, cluster mode: a loop thread of its own)
    in front of ``namesrv_addr`` and print ``GRPC <addr>``; ``options`` are ``GrpcProxy``'s
    (``tls``, ``acl``, ``credentials``). Raises click.ClickException without the grpc extra."""
    grpc_proxy = _grpc_proxy_class()(namesrv_addr, host=host, port=port, **options)
    grpc_proxy.start()
    announce("GRPC", grpc_proxy.addr)
    return grpc_proxy


async def serve_grpc_proxy(namesrv_addr: str, port: int, *, local_broker, host: str = "127.0.0.1", **options: Any):
    """The gRPC proxy in local mode, on the running loop (the broker's, ``local_broker`` =
    ``(broker.server, broker address)``); prints ``GRPC <addr>``."""
    grpc_proxy = _grpc_proxy_class()(namesrv_addr, host=host, port=port, local_broker=local_broker, **options)
    await grpc_proxy.serve()
    announce("GRPC", grpc_proxy.addr)
    return grpc_proxy


def _dev_multi(mode: str, store_dir: str, cluster_name: str, flush_disk_type: str, commit_log_file_size: int,
               busy_poll_us: int, event_loop: str, enable_property_filter: bool = False) -> None:
    """``dev --cluster <mode>``: start the processes, print them, stop them all on a signal."""
    extra = {"brokerClusterName": cluster_name, "flushDiskType": flush_disk_type,
             "mappedFileSizeCommitLog": commit_log_file_size, "busyPollUs": busy_poll_us,
             "enablePropertyFilter": enable_property_filter}
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    try:
        cluster = start_dev_cluster(store_dir, cluster=mode, broker_config=extra, event_loop=event_loop)
    except DevClusterError as exc:
        raise click.ClickException(str(exc)) from None
    try:
        announce("NAMESRV", cluster.namesrv_addr)
        announce("BROKER", cluster.broker_addr)
        for b in cluster.brokers:
            announce(f"BROKER.{b.name}.{b.broker_id}", b.line())
        announce("STORE", store_dir)
        print("READY", flush=True)
        while not done.wait(1.0):
            pass
    finally:
        cluster.stop()


@main.command()
@click.option("-n", "--namesrv-addr", required=True, help="Name server(s) of the cluster, host:port[;host:port].")
@click.option("--grpc-port", type=click.IntRange(min=0), default=8081, show_default=True,
              help="Port of the gRPC endpoint (0: a free one).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@grpc_tls_options
@click.option("--acl-file", type=click.Path(dir_okay=False), default=None,
              help="Check 5.x request signatures and permissions against this plain_acl.yml (the brokers' "
                   "ACL file; re-read when it changes).")
@click.option("--access-key", default=None, envvar="ROCKETMQ_PROXY_ACCESS_KEY",
              help="Account the proxy signs its requests to brokers with (brokers with aclEnable).")
@click.option("--secret-key", default=None, envvar="ROCKETMQ_PROXY_SECRET_KEY", help="Secret key of --access-key.")
@click.option("--log-level", default="INFO", show_default=True)
def proxy(namesrv_addr: str, grpc_port: int, host: str, grpc_tls_cert: str | None, grpc_tls_key: str | None,
          acl_file: str | None, access_key: str | None, secret_key: str | None, log_level: str) -> None:
    """Run the gRPC proxy alone in front of a cluster's name servers (5.x clients; its brokers
    need brokerVersion 5.x for receiving). Prints GRPC <addr> and READY."""
    setup_logging(log_level)
    if (access_key is None) != (secret_key is None):
        raise click.UsageError("--access-key and --secret-key go together")
    options = {"tls": read_grpc_tls(grpc_tls_cert, grpc_tls_key), "acl": acl_file,
               "credentials": (access_key, secret_key) if access_key and secret_key else None}
    holder = {}

    async def start() -> None:
        holder["p"] = start_grpc_proxy(namesrv_addr, grpc_port, host, **options)

    async def stop() -> None:
        if "p" in holder:
            holder["p"].stop()

    run_until_signal(start, stop, "asyncio")


main.add_command(namesrv_main, "namesrv")
main.add_command(broker_main, "broker")


if __name__ == "__main__":
    main()
