"""The broker's own settings over the wire: GET_BROKER_CONFIG (26) answers them as a properties
text with the config's data version; UPDATE_BROKER_CONFIG (25) changes them on the running broker
(:func:`update_broker_config`)."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from rocketmq_sdk.protocol import fastjson
from rocketmq_sdk.protocol.bodies import DataVersion
from rocketmq_sdk.protocol.codes import RequestCode, ResponseCode
from rocketmq_sdk.remoting import Channel, RemotingCommand

from .config import (
    RestartRequiredError,
    apply_properties,
    config_to_properties,
    read_properties_text,
    restart_only,
)
from .requests import ACL_ADMIN, ACL_NONE, SlaveRule, handles

if TYPE_CHECKING:
    from .context import BrokerContext

__all__ = ["BrokerConfigProcessor", "update_broker_config"]

log = logging.getLogger("rocketmq_broker")


def update_broker_config(ctx: BrokerContext, props: dict[str, str]) -> dict[str, object]:
    """Set the known keys of ``props`` on the running broker's config and bump its data
    version; returns what was set. Store keys land in the ``StoreConfig`` the running store
    reads, so the disk-space guard, file expiry, flush intervals and size limits change at once,
    as in Java. Like Java, broker settings read only at start (ports, names) take effect after a
    restart.

    Raises:
        RestartRequiredError: ``props`` holds store keys the store reads only at start
            (``RESTART_ONLY_KEYS``: paths, file sizes, flush mode...; nothing changes).
        ValueError: a value does not parse as its setting's type (nothing changes).
    """
    refused = restart_only(props)
    if refused:
        raise RestartRequiredError(
            f"{', '.join(refused)} can only be set at start: put them in broker.conf and restart the broker")
    changed = apply_properties(ctx.config, props)
    if "auto_create_subscription_group" in changed:
        ctx.groups.auto_create = ctx.config.auto_create_subscription_group
    ctx.config_version = DataVersion(int(time.time() * 1000), ctx.config_version.counter + 1)
    return changed


class BrokerConfigProcessor:
    """Serves GET_BROKER_CONFIG and UPDATE_BROKER_CONFIG for one broker."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    @handles(RequestCode.GET_BROKER_CONFIG, header=None, writes=False, acl=ACL_NONE)
    def get_config(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        version = fastjson.dumps(self.ctx.config_version.to_dict())
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"version": version},
                            body=config_to_properties(self.ctx.config).encode())

    # a 4.9.8 slave changes its own settings too (they are not replicated)
    @handles(RequestCode.UPDATE_BROKER_CONFIG, header=None, writes=True, acl=ACL_ADMIN,
             on_slave=SlaveRule.SERVE)
    def update_config(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        props = read_properties_text((cmd.body or b"").decode("utf-8", "replace"))
        try:
            changed = update_broker_config(self.ctx, props)
        except RestartRequiredError as exc:
            return cmd.response(ResponseCode.SYSTEM_ERROR, str(exc))
        except ValueError as exc:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"string2Properties error: {exc}")
        log.info("broker config updated: %s", changed)
        return cmd.response(ResponseCode.SUCCESS)
