"""Console commands ``rocketmq-namesrv -c namesrv.conf`` and ``rocketmq-broker -c broker.conf``."""

from __future__ import annotations

import click
from rocketmq_sdk.properties import apply_properties, read_properties

from .broker.config import BrokerConfig
from .broker.controller import BrokerController
from .namesrv.server import NameServer, NamesrvConfig
from .runner import announce, event_loop_option, run_until_signal, setup_logging


@click.command()
@click.option("-c", "--config", "config_path", type=click.Path(exists=True, dir_okay=False),
              help="namesrv.conf (key listenPort, default 9876).")
@click.option("-p", "--port", type=int, default=None, help="Override listenPort.")
@click.option("--log-level", default="INFO", show_default=True)
@event_loop_option
def namesrv_main(config_path: str | None, port: int | None, log_level: str, event_loop: str) -> None:
    """Run the reference name server."""
    setup_logging(log_level)
    cfg = NamesrvConfig()
    if config_path:
        try:
            apply_properties(cfg, read_properties(config_path),
                             on_unknown=lambda key: click.echo(f"warning: ignoring unknown key {key}", err=True))
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint=f"-c {config_path}") from None
    if port is not None:
        cfg.listen_port = port
    ns = NameServer(cfg)

    async def start() -> None:
        await ns.start()
        announce("NAMESRV", ns.addr)

    run_until_signal(start, ns.stop, event_loop)


@click.command()
@click.option("-c", "--config", "config_path", type=click.Path(exists=True, dir_okay=False), required=True,
              help="broker.conf with the standard keys (brokerClusterName, brokerName, brokerId, listenPort, "
                   "namesrvAddr, storePathRootDir, autoCreateTopicEnable, mappedFileSizeCommitLog, flushDiskType).")
@click.option("-n", "--namesrv-addr", default=None, help="Override namesrvAddr.")
@click.option("--log-level", default="INFO", show_default=True)
@event_loop_option
def broker_main(config_path: str, namesrv_addr: str | None, log_level: str, event_loop: str) -> None:
    """Run the reference broker."""
    setup_logging(log_level)
    try:
        cfg = BrokerConfig.from_properties(read_properties(config_path))
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=f"-c {config_path}") from None
    if namesrv_addr:
        cfg.namesrv_addr = namesrv_addr
    broker = BrokerController(cfg)

    async def start() -> None:
        await broker.start()
        announce("BROKER", cfg.broker_addr)
        announce("HA", broker.ha_server_addr)
        announce("ROLE", f"{cfg.broker_role} {cfg.broker_name} {cfg.broker_id}")

    run_until_signal(start, broker.stop, event_loop)
