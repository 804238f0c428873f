"""Template filters of the console: ``get_item``, ``ms_time`` (epoch ms -> local time),
``version`` (4.x version ordinal -> ``V4_9_8``)."""

from __future__ import annotations

import time

from django import template
from rocketmq_sdk.protocol.codes import version_desc

register = template.Library()


@register.filter
def get_item(mapping: dict, key: str) -> object:
    return mapping.get(key, "") if isinstance(mapping, dict) else ""


@register.filter
def ms_time(value: int | None) -> str:
    if not value or value <= 0:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(value / 1000)) + f".{value % 1000:03d}"


@register.filter
def version(value: int | None) -> str:
    return "-" if value is None else version_desc(value)
