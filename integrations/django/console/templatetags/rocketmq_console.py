"""Template filters and tags of the console: ``get_item``, ``ms_time`` (epoch ms -> time in the
project's ``TIME_ZONE``), ``version`` (4.x version ordinal -> ``V4_9_8``), ``masterless_brokers``
(the brokers whose master is down, for the banner of every page)."""

from __future__ import annotations

import logging

from django import template
from rocketmq_sdk.admin import MasterlessBroker
from rocketmq_sdk.exceptions import MQError
from rocketmq_sdk.protocol.codes import version_desc

from ..svg import local_time

register = template.Library()
log = logging.getLogger("rocketmq_sdk.integrations.django.console")


@register.filter
def get_item(mapping: dict, key: str) -> object:
    return mapping.get(key, "") if isinstance(mapping, dict) else ""


@register.filter
def ms_time(value: int | None) -> str:
    """``2026-11-28 12:00:00.123 CST``: epoch ms in the project's time zone, named."""
    if not value or value <= 0:
        return "-"
    return local_time(value) + f".{value % 1000:03d} " + local_time(value, "%Z")


@register.filter
def version(value: int | None) -> str:
    return "-" if value is None else version_desc(value)


@register.simple_tag
def masterless_brokers() -> list[MasterlessBroker]:
    """The brokers whose master the name server no longer lists (their numbers come from a
    slave); empty when the name server cannot be asked (the page itself says so)."""
    from .. import service

    try:
        return service.admin().masterless_brokers()
    except MQError as exc:
        log.debug("masterless brokers: %s", exc)
        return []


@register.simple_tag
def acl_on() -> bool:
    """Some broker has ACL on (the ACL page is offered)."""
    from .. import service

    return bool(service.acl_brokers())
