"""Listeners: ``@rocketmq_listener`` (rocketmq-spring's ``@RocketMQMessageListener``).

Put listeners in ``<app>/listeners.py``; the app config imports those modules in ``ready()``
(``ROCKETMQ["LISTENER_MODULE"]`` names the module). ``manage.py rocketmq_consume`` (or
:func:`start_listeners`) runs them, one SDK ``PushConsumer`` per listener.

::

    @rocketmq_listener(topic="orders", consumer_group="stock", selector_expression="created",
                       idempotent=True)
    def reserve_stock(event: dict) -> None:           # the type hint drives the conversion
        ...

    @rocketmq_listener(topic="prices", consumer_group="pricer")
    class Pricer(RocketMQReplyListener):
        def on_message(self, symbol: str) -> dict:     # the return value is the reply
            return {"symbol": symbol, "price": 42.0}

The handler gets the payload converted to its first parameter's type hint (``bytes``, ``str``,
``dict``, ``list``, a dataclass, a pydantic model, ``MessageExt``; no hint: the ``MessageExt``);
a second positional parameter gets the ``MessageExt``. Returning normally acknowledges; an
exception means RECONSUME_LATER (orderly: SUSPEND_CURRENT_QUEUE_A_MOMENT), so RocketMQ retries
the message with its back-off and moves it to ``%DLQ%<group>`` after ``max_reconsume_times``.
A payload that does not convert is logged with the message id and goes the same way. Database
connections are handled as for a request: ``close_old_connections()`` before and after each
batch. On SQLite the handlers of one process run one at a time (SQLite takes one writer at a
time; see :func:`.dbretry.write_lock`), so consume threads never fail each other with
"database is locked".
"""

from __future__ import annotations

import difflib
import inspect
import logging
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings as django_settings
from django.core import checks
from django.db import DEFAULT_DB_ALIAS, close_old_connections
from rocketmq_sdk import (
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyStatus,
    MessageExt,
    PushConsumer,
)
from rocketmq_sdk.config import ConsumerConfig
from rocketmq_sdk.producer.namespace import wrap_namespace
from rocketmq_sdk.protocol.validators import topic_problem

from .conf import _field_types, load, named_field, sdk_config_error
from .converter import ConversionError, MessageConverter, supports_payload_type
from .dbretry import write_lock
from .idempotency import IDEMPOTENCY_KEYS, BatchOutcome, KeyChoice, handle_batch_once, idempotency_key

__all__ = ["ListenerContainer", "ListenerSpec", "RocketMQListener", "RocketMQReplyListener", "listener_problems",
           "registry", "rocketmq_listener", "start_listeners"]

log = logging.getLogger("rocketmq_sdk.integrations.django")

SELECTOR_TYPES = ("TAG", "SQL92")
CONSUME_MODES = ("CONCURRENTLY", "ORDERLY")
MESSAGE_MODELS = ("CLUSTERING", "BROADCASTING")


class RocketMQListener:
    """Base of class-based listeners (``RocketMQListener<T>``): implement ``on_message``."""

    def on_message(self, payload: Any) -> None:  # pragma: no cover - the subclass's
        raise NotImplementedError


class RocketMQReplyListener(RocketMQListener):
    """Base of reply listeners (``RocketMQReplyListener<T, R>``): ``on_message`` returns the reply,
    converted like any payload and sent back to the requester (``template.send_and_receive``)."""

    def on_message(self, payload: Any) -> Any:  # pragma: no cover - the subclass's
        raise NotImplementedError


@dataclass
class ListenerSpec:
    """One registered listener (what the decorator recorded).

    ``name`` is ``module.qualname``; ``consumer_options`` are extra ``ConsumerConfig`` settings.
    """

    name: str
    target: Any
    topic: str
    consumer_group: str
    selector_type: str = "TAG"
    selector_expression: str = "*"
    consume_mode: str = "CONCURRENTLY"
    message_model: str = "CLUSTERING"
    max_reconsume_times: int = -1
    consume_thread_number: int | None = None
    consume_timeout: float | None = None
    idempotent: bool = False
    idempotency_key: KeyChoice = "event"
    using: str = DEFAULT_DB_ALIAS
    reply: bool = False
    enable_msg_trace: bool | None = None
    customized_trace_topic: str | None = None
    consumer_options: dict[str, Any] = field(default_factory=dict)
    _handler: Callable[..., Any] | None = None

    @property
    def handler(self) -> Callable[..., Any]:
        """The callable that gets the payload (a class listener is instantiated once)."""
        if self._handler is None:
            self._handler = self.target().on_message if inspect.isclass(self.target) else self.target
        return self._handler

    def signature(self) -> tuple[Any, bool]:
        """(payload type hint, whether the handler also takes the MessageExt)."""
        fn = self.handler
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if not params:
            raise TypeError(f"listener {self.name} must take the payload as its first parameter")
        hints = typing.get_type_hints(fn)
        return hints.get(params[0].name, MessageExt), len(params) > 1

    def consumer_kwargs(self) -> dict[str, Any]:
        """The listener's own ``PushConsumer`` settings."""
        kw: dict[str, Any] = {"message_model": self.message_model, "max_reconsume_times": self.max_reconsume_times}
        if self.consume_thread_number is not None:
            kw["consume_thread_min"] = kw["consume_thread_max"] = self.consume_thread_number
        if self.consume_timeout is not None:
            kw["consume_timeout"] = self.consume_timeout
        kw.update(self.consumer_options)
        return kw

    def message_key(self, msg: MessageExt) -> str:
        """The idempotency key of ``msg`` (see :func:`.idempotency.idempotency_key`)."""
        return idempotency_key(self.idempotency_key, msg)


#: every listener the decorator registered, by name
registry: dict[str, ListenerSpec] = {}


def _listener_keywords() -> tuple[str, ...]:
    return tuple(n for n, p in inspect.signature(rocketmq_listener).parameters.items() if p.kind is p.KEYWORD_ONLY)


def _choice(name: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)}, not {value!r}")
    return value


def rocketmq_listener(*, topic: str, consumer_group: str, selector_type: str = "TAG",
                      selector_expression: str = "*", consume_mode: str = "CONCURRENTLY",
                      message_model: str = "CLUSTERING", max_reconsume_times: int = -1,
                      consume_thread_number: int | None = None, consume_timeout: float | None = None,
                      idempotent: bool = False, idempotency_key: KeyChoice = "event",
                      using: str = DEFAULT_DB_ALIAS, reply: bool | None = None, name: str | None = None,
                      enable_msg_trace: bool | None = None, customized_trace_topic: str | None = None,
                      **consumer_options: Any) -> Callable[[Any], Any]:
    """Register a function or a :class:`RocketMQListener` class as a listener.

    Args:
        topic: the topic (the namespace, if set, is added).
        consumer_group: the group; one listener per group.
        selector_type / selector_expression: ``"TAG"`` with ``"*"`` / ``"a || b"``, or
            ``"SQL92"`` with an expression over user properties (broker needs
            ``enablePropertyFilter``).
        consume_mode: ``"CONCURRENTLY"`` or ``"ORDERLY"`` (one thread per queue, in order).
        message_model: ``"CLUSTERING"`` (the group shares the queues) or ``"BROADCASTING"``.
        max_reconsume_times: deliveries before the DLQ (-1: 16 concurrently, unlimited orderly).
        consume_thread_number: consume threads (default ``CONSUMER`` settings, 20).
        consume_timeout: minutes a message may take before it is redelivered (15).
        idempotent: run the handler in ``atomic(using=using)`` with an insert into the consumed
            message table keyed by (group, ``idempotency_key``); a duplicate is acknowledged
            without running the handler.
        idempotency_key: what identifies one event: ``"event"`` (default: the ``EVENT_ID``
            property publishers and the outbox stamp, else the unique message id ``UNIQ_KEY``),
            ``"msg_id"`` (``UNIQ_KEY``), ``"key"`` (the first message key: only when a key names
            one event, never a business key like ``order-7`` shared by its created / updated /
            deleted events) or ``callable(MessageExt) -> str``.
        reply: the return value is sent back as the reply (default: the class is a
            :class:`RocketMQReplyListener`).
        name: registry name (default ``module.qualname``).
        enable_msg_trace: write Apache RocketMQ message traces (``SubBefore``/``SubAfter``) for
            this listener (rocketmq-spring's ``enableMsgTrace``); None (default): the
            ``ENABLE_MSG_TRACE`` setting (False).
        customized_trace_topic: this listener's trace topic (``customizedTraceTopic``); None
            (default): ``CUSTOMIZED_TRACE_TOPIC``, else ``RMQ_SYS_TRACE_TOPIC``.
        **consumer_options: any other ``ConsumerConfig`` setting (``pull_batch_size``,
            ``consume_from_where``, ``consume_message_batch_max_size``...).

    Raises:
        ValueError: a bad choice value, an empty topic/group, an ``enable_msg_trace`` that is
            not a bool or a ``customized_trace_topic`` that is not a legal topic name.
        TypeError: a class that is not a RocketMQListener.
    """
    _choice("selector_type", selector_type, SELECTOR_TYPES)
    _choice("consume_mode", consume_mode, CONSUME_MODES)
    _choice("message_model", message_model, MESSAGE_MODELS)
    if not topic or not consumer_group:
        raise ValueError("rocketmq_listener needs a topic and a consumer_group")
    if enable_msg_trace is not None and not isinstance(enable_msg_trace, bool):
        raise ValueError(f"enable_msg_trace must be True, False or None, not {enable_msg_trace!r}")
    if customized_trace_topic and (problem := topic_problem(customized_trace_topic)):
        raise ValueError(f"customized_trace_topic {customized_trace_topic!r}: {problem}")
    if not (callable(idempotency_key) or idempotency_key in IDEMPOTENCY_KEYS):
        raise ValueError(f"idempotency_key must be one of {', '.join(map(repr, IDEMPOTENCY_KEYS))} or a callable, "
                         f"not {idempotency_key!r}")

    def register(target: Any) -> Any:
        if inspect.isclass(target) and not issubclass(target, RocketMQListener):
            raise TypeError(f"{target.__qualname__} must subclass RocketMQListener or RocketMQReplyListener")
        is_reply = reply if reply is not None else (
            inspect.isclass(target) and issubclass(target, RocketMQReplyListener))
        spec = ListenerSpec(
            name=name or f"{target.__module__}.{target.__qualname__}", target=target, topic=topic,
            consumer_group=consumer_group, selector_type=selector_type, selector_expression=selector_expression,
            consume_mode=consume_mode, message_model=message_model, max_reconsume_times=max_reconsume_times,
            consume_thread_number=consume_thread_number, consume_timeout=consume_timeout, idempotent=idempotent,
            idempotency_key=idempotency_key, using=using, reply=is_reply, enable_msg_trace=enable_msg_trace,
            customized_trace_topic=customized_trace_topic, consumer_options=consumer_options)
        registry[spec.name] = spec
        target.rocketmq_listener = spec
        return target

    return register


#: ``consume_message_batch_max_size`` of idempotent listeners unless set: their batch is one
#: database transaction, so a backlog is not limited to the database's commits per second
IDEMPOTENT_BATCH_SIZE = 32

#: the keywords of ``@rocketmq_listener`` itself (a misspelt one is reported with the closest)
LISTENER_KEYWORDS = _listener_keywords()


def listener_problems(spec: ListenerSpec, settings_: Any = None) -> list[checks.CheckMessage]:
    """What is wrong with one listener (the system checks' ``rocketmq`` listener ids, also
    raised by :class:`ListenerContainer`): no payload parameter (E007), an unknown keyword
    (E009, with the closest listener keyword or ``ConsumerConfig`` field), an option value the
    SDK refuses (E004) or a payload type the converter cannot produce (E010).

    Args:
        spec: the listener.
        settings_: resolved settings (default ``settings.ROCKETMQ``; with bad settings only the
            listener's own keywords and signature are checked).
    """
    where = f"listener {spec.name}"
    out: list[checks.CheckMessage] = []
    try:
        hint, _ = spec.signature()
    except (TypeError, NameError) as exc:
        out.append(checks.Error(f"{where}: {exc}", id="rocketmq.E007"))
    else:
        if not supports_payload_type(hint):
            out.append(checks.Error(
                f"{where}: the payload type {getattr(hint, '__qualname__', hint)} cannot be converted from a message",
                hint="use dict, list, str, bytes, a dataclass, a pydantic model or MessageExt (for a Django "
                     "model: take a dict and load the instance, e.g. Model.objects.get(pk=payload['pk']))",
                id="rocketmq.E010"))
    fields = _field_types()["consumer"].keys() | _field_types()["client"].keys()
    unknown = [k for k in spec.consumer_options if k not in fields]
    for key in unknown:
        close = difflib.get_close_matches(key, [*LISTENER_KEYWORDS, *sorted(fields)], n=1)
        out.append(checks.Error(f"{where}: unknown keyword {key!r} of @rocketmq_listener",
                                hint=f'did you mean "{close[0]}"?' if close else None, id="rocketmq.E009"))
    if not unknown:
        if settings_ is None:
            resolved = load(getattr(django_settings, "ROCKETMQ", None))
            settings_ = None if resolved.problems else resolved
        kwargs = settings_.consumer_kwargs(**spec.consumer_kwargs()) if settings_ is not None else \
            spec.consumer_kwargs()
        error = sdk_config_error(ConsumerConfig, kwargs)
        if error is not None:
            name = named_field(error, spec.consumer_kwargs())
            out.append(checks.Error(f"{where}: {name + ': ' if name else ''}{error}", id="rocketmq.E004"))
    return out


class ListenerContainer:
    """Runs one listener on its own ``PushConsumer`` (``DefaultRocketMQListenerContainer``).

    Args:
        spec: the listener.
        settings: resolved settings (default ``settings.ROCKETMQ``).
    """

    def __init__(self, spec: ListenerSpec, settings: Any = None) -> None:
        from django.core.exceptions import ImproperlyConfigured

        from .conf import get_settings
        from .template import rocketmq_template

        self.spec = spec
        self.settings = settings or get_settings()
        errors = [m for m in listener_problems(spec, self.settings) if m.is_serious()]
        if errors:
            raise ImproperlyConfigured("; ".join(f"{m.msg} ({m.id}{': ' + m.hint if m.hint else ''})"
                                                 for m in errors))
        self.template = rocketmq_template()
        self.converter: MessageConverter = self.template.converter
        self.payload_type, self.wants_message = spec.signature()
        ns = self.settings.namespace
        self.group = wrap_namespace(ns, spec.consumer_group)
        self.topic = wrap_namespace(ns, spec.topic)
        kwargs = self.settings.consumer_kwargs(**spec.consumer_kwargs())
        if spec.idempotent and "consume_message_batch_max_size" not in spec.consumer_options \
                and "consume_message_batch_max_size" not in self.settings.consumer:
            kwargs["consume_message_batch_max_size"] = IDEMPOTENT_BATCH_SIZE
        trace = self.settings.trace_kwargs(spec.enable_msg_trace, spec.customized_trace_topic)
        self.consumer = PushConsumer(self.group, **trace, **kwargs)
        self.consumer.subscribe(self.topic, spec.selector_expression, spec.selector_type)
        self.consumer.register_message_listener(self._consume, orderly=spec.consume_mode == "ORDERLY")

    def describe(self) -> str:
        s = self.spec
        extra = " idempotent" if s.idempotent else ""
        extra += " reply" if s.reply else ""
        return (f"{s.name}: topic={self.topic} group={self.group} {s.selector_type}({s.selector_expression}) "
                f"{s.consume_mode} {s.message_model}{extra}")

    def start(self) -> None:
        self.consumer.start()
        log.info("listener started: %s", self.describe())

    def shutdown(self) -> None:
        """Stop pulling, wait for running handlers, persist the offsets."""
        self.consumer.shutdown()

    # ------------------------------------------------------------------ consuming

    def _consume(self, msgs: list[MessageExt], ctx: Any) -> Any:
        orderly = self.spec.consume_mode == "ORDERLY"
        close_old_connections()
        try:
            with write_lock(self.spec.using):  # SQLite: this process's handlers write one at a time
                outcome = self.handle_batch(msgs)
        except Exception as exc:  # the integration's own queries (e.g. the database is down): all come back
            outcome = BatchOutcome(0, error=exc)
        finally:
            close_old_connections()
        if self.spec.reply:
            for msg, result in outcome.results:  # after the commit
                self.template.producer.reply(msg, self.converter.to_body(result))
        if outcome.error is None:
            return ConsumeOrderlyStatus.SUCCESS if orderly else ConsumeConcurrentlyStatus.CONSUME_SUCCESS
        failed = msgs[outcome.done]
        log.warning("listener %s failed on message %s (reconsume %d): %s", self.spec.name, failed.msg_id,
                    failed.reconsume_times, outcome.error,
                    exc_info=None if isinstance(outcome.error, ConversionError) else outcome.error)
        if orderly:
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        if outcome.done == 0:
            return ConsumeConcurrentlyStatus.RECONSUME_LATER
        ctx.ack_index = outcome.done - 1  # the ones before the failure are done: only the rest come back
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def handle_batch(self, msgs: list[MessageExt]) -> BatchOutcome:
        """Convert and handle a batch in order, stopping at the first failure (idempotent
        listeners: once per key, one database transaction per batch, see
        :func:`.idempotency.handle_batch_once`); nothing is replied here."""
        if self.spec.idempotent:
            return handle_batch_once(listener=self.spec.name, group=self.group, using=self.spec.using, msgs=msgs,
                                     keys=[self.spec.message_key(m) for m in msgs], run=self._run)
        outcome = BatchOutcome(0)
        for i, msg in enumerate(msgs):
            outcome.done = i
            try:
                outcome.results.append((msg, self._run(msg)))
            except Exception as exc:
                outcome.error = exc
                return outcome
        outcome.done = len(msgs)
        return outcome

    def consume_one(self, msg: MessageExt) -> None:
        """Convert and handle one message (idempotently if so configured); reply if a reply
        listener. Raises what the handler or the conversion raised."""
        with write_lock(self.spec.using):
            outcome = self.handle_batch([msg])
        if outcome.error is not None:
            raise outcome.error
        if self.spec.reply and outcome.results:
            self.template.producer.reply(msg, self.converter.to_body(outcome.results[0][1]))

    def _run(self, msg: MessageExt) -> Any:
        try:
            payload = self.converter.from_message(msg, self.payload_type)
        except ConversionError as exc:
            log.error("listener %s: message %s (topic %s) cannot be converted: %s", self.spec.name,
                      msg.msg_id, msg.topic, exc)
            raise
        return self.spec.handler(*((payload, msg) if self.wants_message else (payload,)))


def select(names: Iterable[str] | None = None, groups: Iterable[str] | None = None) -> list[ListenerSpec]:
    """The registered listeners whose name (or its last dotted part) is in ``names`` and whose
    group is in ``groups`` (None: any).

    Raises:
        LookupError: a name or group that matches no listener.
    """
    specs = list(registry.values())
    if names:
        wanted = set(names)
        specs = [s for s in specs if s.name in wanted or s.name.rsplit(".", 1)[-1] in wanted]
        missing = wanted - {s.name for s in specs} - {s.name.rsplit(".", 1)[-1] for s in specs}
        if missing:
            raise LookupError(f"no listener named {', '.join(sorted(missing))}")
    if groups:
        wanted = set(groups)
        missing = wanted - {s.consumer_group for s in specs}
        if missing:
            raise LookupError(f"no listener of group {', '.join(sorted(missing))}")
        specs = [s for s in specs if s.consumer_group in wanted]
    return specs


def start_listeners(names: Iterable[str] | None = None, groups: Iterable[str] | None = None) -> list[ListenerContainer]:
    """Build and start a container per selected listener (all by default); on a failure the
    ones already started are shut down and the error raised."""
    containers: list[ListenerContainer] = []
    try:
        for spec in select(names, groups):
            container = ListenerContainer(spec)
            container.start()
            containers.append(container)
    except BaseException:
        stop_listeners(containers)
        raise
    return containers


def stop_listeners(containers: Iterable[ListenerContainer]) -> None:
    """Shut the containers down (offsets persisted); errors are logged, the rest still stop."""
    for c in containers:
        try:
            c.shutdown()
        except Exception:
            log.exception("stopping listener %s failed", c.spec.name)


def prune_consumed_messages(older_than_hours: float | None = None, using: str = DEFAULT_DB_ALIAS) -> int:
    """Delete consumed-message rows older than ``older_than_hours`` (default
    ``ROCKETMQ["IDEMPOTENCY_RETENTION_HOURS"]``, 72); returns how many. A message redelivered
    after its row was pruned runs again, so keep this longer than the redelivery horizon
    (16 retries take about 4.7 hours)."""
    import datetime as dt

    from django.utils import timezone

    from .conf import get_settings
    from .models import ConsumedMessage

    hours = get_settings().options["idempotency_retention_hours"] if older_than_hours is None else older_than_hours
    cutoff = timezone.now() - dt.timedelta(hours=hours)
    with write_lock(using):
        deleted, _ = ConsumedMessage.objects.using(using).filter(consumed_at__lt=cutoff).delete()
    return deleted
