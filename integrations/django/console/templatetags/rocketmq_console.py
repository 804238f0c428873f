"""Template filters of the console: ``get_item``, ``ms_time`` (epoch ms -> time in the project's ``TIME_ZONE``),
``version`` (4.x version ordinal -> ``V4_9_8``)."""

from __future__ import annotations

from django import template
from rocketmq_sdk.protocol.codes import version_desc

from ..svg import local_time

register = template.Library()


@register.filter
def get_item(mapping: dict, key: str) -> object:
    return mapping.get(key, "") if isinstance(mapping, dict) else ""


@register.filter
def ms_time(value: int | None) -> str:
    if not value or value <= 0:
        return "-"
    return local_time(value) + f".{value % 1000:03d}"


@register.filter
def version(value: int | None) -> str:
    return "-" if value is None else version_desc(value)
