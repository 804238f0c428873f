"""``python -m rocketmq_broker dev``: a name server and a broker in one process, for development.

Prints ``NAMESRV 127.0.0.1:<port>``, ``BROKER 127.0.0.1:<port>`` and ``READY`` on stdout;
logs go to stderr. Stops cleanly (store flushed, offsets persisted, abort file removed) on
SIGINT or SIGTERM.
"""

from __future__ import annotations

import os
import tempfile

import click

from .broker.config import BrokerConfig
from .broker.controller import BrokerController
from .namesrv.server import NameServer, NamesrvConfig
from .runner import announce, event_loop_option, run_until_signal, setup_logging


@click.group()
def main() -> None:
    """Reference RocketMQ name server and broker."""


@main.command()
@click.option("--store-dir", type=click.Path(file_okay=False), default=None,
              help="Store root directory (default: a new temporary directory).")
@click.option("--namesrv-port", type=int, default=0, show_default=True, help="0 picks a free port.")
@click.option("--broker-port", type=int, default=0, show_default=True, help="0 picks a free port.")
@click.option("--broker-name", default="broker-a", show_default=True)
@click.option("--cluster", default="DefaultCluster", show_default=True)
@click.option("--flush-disk-type", type=click.Choice(["ASYNC_FLUSH", "SYNC_FLUSH"]), default="ASYNC_FLUSH",
              show_default=True)
@click.option("--commit-log-file-size", type=int, default=64 * 1024 * 1024, show_default=True,
              help="CommitLog file size in bytes.")
@click.option("--busy-poll-us", type=click.IntRange(min=0), default=0, show_default=True,
              help="Keep the broker's event loop polling this many µs after each answer (0: off; "
                   "see busyPollUs in docs/broker.md).")
@click.option("--log-level", default="INFO", show_default=True)
@event_loop_option
def dev(store_dir: str | None, namesrv_port: int, broker_port: int, broker_name: str, cluster: str,
        flush_disk_type: str, commit_log_file_size: int, busy_poll_us: int, log_level: str,
        event_loop: str) -> None:
    """Run a name server and one broker on 127.0.0.1."""
    setup_logging(log_level)
    store_dir = store_dir or tempfile.mkdtemp(prefix="rocketmq-dev-")
    os.makedirs(store_dir, exist_ok=True)
    ns = NameServer(NamesrvConfig(listen_port=namesrv_port))
    holder: dict[str, BrokerController] = {}

    async def start() -> None:
        await ns.start()
        announce("NAMESRV", ns.addr)
        cfg = BrokerConfig(broker_name=broker_name, broker_cluster_name=cluster, listen_port=broker_port,
                           namesrv_addr=ns.addr, store_path_root_dir=store_dir, flush_disk_type=flush_disk_type,
                           mapped_file_size_commit_log=commit_log_file_size, busy_poll_us=busy_poll_us)
        broker = holder["b"] = BrokerController(cfg)
        await broker.start()
        announce("BROKER", cfg.broker_addr)
        announce("STORE", store_dir)

    async def stop() -> None:
        if "b" in holder:
            await holder["b"].stop()
        await ns.stop()

    run_until_signal(start, stop, event_loop)


if __name__ == "__main__":
    main()
