"""Publishing from Django signals, after the database commit.

- :func:`publish_model_events` publishes created / updated / deleted events of a model.
- :func:`publish_on_signal` turns a function into a publisher for any signal: the function
  returns the payload (or None to skip).

The message is built when the signal fires (so a deleted row's data is still there) and sent
from ``transaction.on_commit`` by default: a rolled-back transaction publishes nothing; outside a
transaction (autocommit) it is sent at once. A failed send is logged with the message's keys
(logger ``rocketmq_sdk.integrations.django``) and does not break the request, unless
``raise_errors=True`` (or ``ROCKETMQ["RAISE_PUBLISH_ERRORS"]``).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from django.db import DEFAULT_DB_ALIAS, transaction
from django.db.models.signals import post_delete, post_save
from django.dispatch import Signal
from rocketmq_sdk import Message

from .idempotency import stamp_event_id
from .template import RocketMQTemplate, rocketmq_template

__all__ = ["MODEL_EVENTS", "publish", "publish_model_events", "publish_on_signal"]

log = logging.getLogger("rocketmq_sdk.integrations.django")

MODEL_EVENTS = ("created", "updated", "deleted")
_MODES = ("sync", "async", "oneway")

Template = str | Callable[..., Any] | None


class _Context(dict):
    """``str.format_map`` context: ``{event}``, ``{model}``, ``{pk}``, else the instance's
    attributes (``{customer_id}``)."""

    def __init__(self, instance: Any, **values: Any) -> None:
        super().__init__(values)
        self.instance = instance

    def __missing__(self, key: str) -> Any:
        return getattr(self.instance, key)


def _render(value: Template, instance: Any, event: str, *args: Any) -> Any:
    if value is None:
        return None
    if callable(value):
        return value(instance, event, *args)
    if isinstance(value, str) and instance is not None:
        meta = getattr(instance, "_meta", None)
        return value.format_map(_Context(instance, event=event, pk=getattr(instance, "pk", None),
                                         model=meta.label_lower if meta else ""))
    return value


def _mode(mode: str) -> str:
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {', '.join(_MODES)}, not {mode!r}")
    return mode


def _send(template: RocketMQTemplate, msg: Message, mode: str, raise_errors: bool | None) -> None:
    def failed(exc: BaseException) -> None:
        log.error("publishing to %s failed (keys=%s, tags=%s): %s", msg.topic, " ".join(msg.keys) or "-",
                  msg.tags or "-", exc, exc_info=exc)

    try:
        if mode == "sync":
            template.send(msg.topic, msg)
        elif mode == "oneway":
            template.send_oneway(msg.topic, msg)
        else:
            template.send_async(msg.topic, msg, callback=lambda _r, e: e is not None and failed(e))
    except Exception as exc:
        failed(exc)
        strict = template.settings.options["raise_publish_errors"] if raise_errors is None else raise_errors
        if strict:
            raise


def publish(msg: Message, *, on_commit: bool = True, using: str = DEFAULT_DB_ALIAS, mode: str = "sync",
            raise_errors: bool | None = None, template: RocketMQTemplate | None = None) -> None:
    """Send ``msg`` when the current transaction of ``using`` commits (at once in autocommit, or
    with ``on_commit=False``). ``mode``: ``"sync"`` (default), ``"async"`` or ``"oneway"``.
    A timer on ``msg`` (``delay_ms`` counts from the send at commit) is kept for 5.x brokers and
    becomes a delay level on 4.x, as the template's sends do.
    The message gets an ``EVENT_ID`` property (a new uuid4 hex unless it has one), the default
    idempotency key of idempotent listeners.

    Raises:
        ValueError: an unknown mode.
        the send's error: only with ``raise_errors`` (else it is logged).
    """
    stamp_event_id(msg)
    send = functools.partial(_send, template or rocketmq_template(), msg, _mode(mode), raise_errors)
    if on_commit:
        transaction.on_commit(send, using=using)
    else:
        send()


def publish_model_events(model: type, destination: Template, *, events: Iterable[str] = MODEL_EVENTS,
                         fields: Iterable[str] | None = None, keys: Template = "{model}-{pk}",
                         tag: Template = "{event}", payload: Callable[[Any, str], Any] | None = None,
                         headers: Mapping[str, Any] | None = None, on_commit: bool = True, mode: str = "sync",
                         raise_errors: bool | None = None, template: RocketMQTemplate | None = None,
                         delay_ms: int | None = None) -> str:
    """Publish ``model``'s saves and deletes.

    Args:
        model: the model class.
        destination: ``"topic"`` / ``"topic:tag"``, a ``str.format`` template over ``{event}``,
            ``{model}``, ``{pk}`` and the instance's attributes, or ``callable(instance, event)``.
        events: a subset of ``("created", "updated", "deleted")``.
        fields: the fields put in the default payload (default: all concrete fields). An update
            saved with ``update_fields`` none of which is in ``fields`` publishes nothing.
        keys: message keys (template or callable; default ``"{model}-{pk}"``, e.g. ``shop.order-7``).
        tag: the tag when the destination has none (template or callable; default the event).
        payload: ``callable(instance, event) -> payload``; default
            ``{"event", "model", "pk", "data": {field: value}}`` as JSON.
        headers: user properties added to every message.
        on_commit, mode, raise_errors, template: as :func:`publish`.
        delay_ms: deliver each event that many ms after the commit sent it: a timer message on
            RocketMQ 5.x brokers, the nearest delay level not shorter on 4.x (logged; see
            :mod:`.timers`).

    Returns:
        the dispatch uid prefix (the receivers are connected strongly, once per model+destination).

    Raises:
        ValueError: an unknown event or mode.
    """
    events = tuple(events)
    unknown = set(events) - set(MODEL_EVENTS)
    if unknown:
        raise ValueError(f"unknown model event(s) {sorted(unknown)}; use {MODEL_EVENTS}")
    _mode(mode)
    field_names = list(fields) if fields is not None else None

    def build(instance: Any, event: str) -> Message:
        tpl = template or rocketmq_template()
        if payload is not None:
            body = payload(instance, event)
        else:
            data = tpl.converter.model_serializer(instance)
            if field_names is not None:
                data = {k: v for k, v in data.items() if k in field_names}
            body = {"event": event, "model": instance._meta.label_lower, "pk": instance.pk, "data": data}
        dest = _render(destination, instance, event)
        if ":" not in dest and tag is not None:
            dest = f"{dest}:{_render(tag, instance, event)}"
        return tpl.message(dest, body, keys=_render(keys, instance, event), headers=headers, delay_ms=delay_ms)

    def emit(instance: Any, event: str, using: str) -> None:
        try:
            msg = build(instance, event)
        except Exception as exc:
            log.error("building the %s message of %r failed: %s", event, instance, exc, exc_info=True)
            if (template or rocketmq_template()).settings.options["raise_publish_errors"] \
                    if raise_errors is None else raise_errors:
                raise
            return
        publish(msg, on_commit=on_commit, using=using, mode=mode, raise_errors=raise_errors, template=template)

    def on_save(sender: type, instance: Any, created: bool, update_fields: Any = None, raw: bool = False,
                using: str = DEFAULT_DB_ALIAS, **_: Any) -> None:
        if raw:
            return  # loaddata
        event = "created" if created else "updated"
        if event not in events:
            return
        if event == "updated" and update_fields and field_names is not None \
                and not set(update_fields) & set(field_names):
            return
        emit(instance, event, using)

    def on_delete(sender: type, instance: Any, using: str = DEFAULT_DB_ALIAS, **_: Any) -> None:
        emit(instance, "deleted", using)

    uid = f"rocketmq:{model._meta.label}:{destination!r}"
    if {"created", "updated"} & set(events):
        post_save.connect(on_save, sender=model, weak=False, dispatch_uid=f"{uid}:save")
    if "deleted" in events:
        post_delete.connect(on_delete, sender=model, weak=False, dispatch_uid=f"{uid}:delete")
    return uid


def publish_on_signal(signal: Signal, destination: str, *, sender: Any = None, keys: Template = None,
                      headers: Mapping[str, Any] | None = None, on_commit: bool = True, mode: str = "sync",
                      raise_errors: bool | None = None, using: str = DEFAULT_DB_ALIAS,
                      template: RocketMQTemplate | None = None,
                      delay_ms: int | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: connect the function to ``signal``; its return value (for the signal's
    ``sender`` and keyword arguments) is published to ``destination``; None publishes nothing.
    ``keys`` is a callable ``(sender, **kwargs)`` or a constant; ``delay_ms`` as in
    :func:`publish_model_events`.

    ::

        @publish_on_signal(order_paid, "orders:paid", keys=lambda sender, order, **kw: f"order-{order.pk}")
        def order_paid_event(sender, order, **kwargs):
            return {"order": order.pk, "amount": order.total}
    """
    _mode(mode)

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        def receiver(sender: Any, **kwargs: Any) -> None:
            body = fn(sender, **kwargs)
            if body is None:
                return
            tpl = template or rocketmq_template()
            k = keys(sender, **kwargs) if callable(keys) else keys
            msg = tpl.message(destination, body, keys=k, headers=headers, delay_ms=delay_ms)
            publish(msg, on_commit=on_commit, using=using, mode=mode, raise_errors=raise_errors, template=tpl)

        signal.connect(receiver, sender=sender, weak=False,
                       dispatch_uid=f"rocketmq:{fn.__module__}.{fn.__qualname__}")
        fn.rocketmq_receiver = receiver  # type: ignore[attr-defined]
        return fn

    return decorate
