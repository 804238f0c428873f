"""The ``ROCKETMQ`` settings dict: key names, types, and the SDK keyword arguments they become.

Keys are the upper snake case of rocketmq-spring's ``rocketmq.*`` properties and of the SDK's
settings (``rocketmq.producer.send-message-timeout`` -> ``PRODUCER["SEND_MESSAGE_TIMEOUT"]``,
SDK ``send_msg_timeout`` -> ``PRODUCER["SEND_MSG_TIMEOUT"]``); every
:class:`~rocketmq_sdk.config.ProducerConfig` / :class:`~rocketmq_sdk.config.ConsumerConfig`
field is reachable. :func:`load` never raises on bad settings: it returns the problems, which
the system checks (``rocketmq.E0xx``) report and :func:`get_settings` raises as
``ImproperlyConfigured`` at first use.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
from dataclasses import dataclass, field
from typing import Any

from rocketmq_sdk.config import ClientConfig, ConsumerConfig, ProducerConfig

__all__ = ["RocketMQSettings", "SettingProblem", "get_settings", "load", "reset"]

#: rocketmq-spring property names that differ from the SDK's (upper snake case both sides)
SPRING_ALIASES = {
    "NAME_SERVER": "namesrv_addr",
    "SEND_MESSAGE_TIMEOUT": "send_msg_timeout",
    "COMPRESS_MESSAGE_BODY_THRESHOLD": "compress_msg_body_over_howmuch",
    "RETRY_NEXT_SERVER": "retry_another_broker_when_not_store_ok",
    "TLS_ENABLE": "use_tls",
    "ENABLE_MSG_TRACE": None,  # accepted, no effect: tracing is OpenTelemetry (docs/django.md)
    "CUSTOMIZED_TRACE_TOPIC": None,
}

#: top-level keys of the integration itself (not SDK settings): name -> (type, default)
INTEGRATION_KEYS: dict[str, tuple[tuple[type, ...], Any]] = {
    "CAPTURE": ((bool,), False),
    "RAISE_PUBLISH_ERRORS": ((bool,), False),
    "MESSAGE_CONVERTER": ((str,), "rocketmq_sdk.integrations.django.converter.MessageConverter"),
    "MODEL_SERIALIZER": ((str,), "rocketmq_sdk.integrations.django.converter.model_to_json_dict"),
    "IDEMPOTENCY_RETENTION_HOURS": ((int, float), 72),
    "TRANSACTION_UNKNOWN_TIMEOUT": ((int,), 60_000),
    "CHECK_NAME_SERVER": ((bool,), True),
    "LISTENER_MODULE": ((str,), "listeners"),
}

_SECTIONS = ("PRODUCER", "CONSUMER", "TRANSACTION")
_OBJECT_FIELDS = {"rpc_hooks": (list, tuple), "ssl_context": (object,)}


@dataclass(frozen=True)
class SettingProblem:
    """One bad setting: ``kind`` is ``"unknown"``, ``"type"`` or ``"value"``; ``path`` like
    ``ROCKETMQ["PRODUCER"]["GROUP"]``."""

    kind: str
    path: str
    message: str


@dataclass
class RocketMQSettings:
    """The resolved settings.

    Attributes:
        client: SDK ``ClientConfig`` keyword arguments shared by producers and consumers.
        producer: ``ProducerConfig`` keyword arguments (without ``group``).
        producer_group: ``PRODUCER["GROUP"]`` (None when unset).
        consumer: ``ConsumerConfig`` keyword arguments, defaults of every listener.
        transaction_group: the producer group of DB-bound transactional messages
            (``TRANSACTION["GROUP"]``, default ``<producer group>_tx``).
        transaction: other ``TRANSACTION`` keyword arguments (``check_thread_pool_size``...).
        options: the integration's own keys (``capture``, ``raise_publish_errors``...), lower case.
        problems: what :func:`load` found wrong.
    """

    client: dict[str, Any] = field(default_factory=dict)
    producer: dict[str, Any] = field(default_factory=dict)
    producer_group: str | None = None
    consumer: dict[str, Any] = field(default_factory=dict)
    transaction_group: str | None = None
    transaction: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    problems: list[SettingProblem] = field(default_factory=list)

    @property
    def namespace(self) -> str | None:
        return self.client.get("namespace")

    def producer_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``Producer(group, **kwargs)``."""
        return {**self.client, **self.producer}

    def consumer_kwargs(self, **overrides: Any) -> dict[str, Any]:
        """Keyword arguments of ``PushConsumer(group, **kwargs)``; ``namespace`` is left out
        (consumers get namespaced names from the integration)."""
        kwargs = {k: v for k, v in self.client.items() if k != "namespace"}
        kwargs.update(self.consumer)
        kwargs.update(overrides)
        return kwargs


def _expected_types(cls: type) -> dict[str, tuple[type, ...]]:
    """Field name -> accepted Python types, from the defaults of an SDK config dataclass."""
    out: dict[str, tuple[type, ...]] = {}
    for f in dataclasses.fields(cls):
        if f.name in _OBJECT_FIELDS:
            out[f.name] = _OBJECT_FIELDS[f.name]
            continue
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else None)
        if isinstance(default, bool):
            out[f.name] = (bool,)
        elif isinstance(default, enum.Enum):
            out[f.name] = (str, type(default))
        elif isinstance(default, float):
            out[f.name] = (int, float)
        elif isinstance(default, int):
            out[f.name] = (int,)
        elif isinstance(default, tuple):
            out[f.name] = (list, tuple)
        else:  # str or None defaults: strings
            out[f.name] = (str,)
    return out


@functools.cache
def _field_types() -> dict[str, dict[str, tuple[type, ...]]]:
    client = _expected_types(ClientConfig)
    client["namespace"] = (str,)  # a producer setting in the SDK; the integration applies it to all
    producer = {k: v for k, v in _expected_types(ProducerConfig).items() if k not in client}
    consumer = {k: v for k, v in _expected_types(ConsumerConfig).items() if k not in client}
    return {"client": client, "producer": producer, "consumer": consumer}


def _sdk_name(key: str) -> str | None:
    return SPRING_ALIASES[key] if key in SPRING_ALIASES else key.lower()


def _check_type(path: str, value: Any, types: tuple[type, ...], problems: list[SettingProblem]) -> bool:
    if value is None:
        return True
    bad = not isinstance(value, types) or (bool not in types and isinstance(value, bool))
    if bad:
        names = " or ".join(t.__name__ for t in types)
        problems.append(SettingProblem("type", path, f"{path} must be {names}, not {type(value).__name__}"))
    return not bad


def _section(raw: Any, path: str, allowed: dict[str, tuple[type, ...]], extra: dict[str, tuple[type, ...]],
             problems: list[SettingProblem]) -> dict[str, Any]:
    """Map one settings dict onto SDK keyword arguments (``extra``: keys kept as they are)."""
    out: dict[str, Any] = {}
    if not isinstance(raw, dict):
        problems.append(SettingProblem("type", path, f"{path} must be a dict, not {type(raw).__name__}"))
        return out
    for key, value in raw.items():
        kpath = f'{path}["{key}"]'
        if not isinstance(key, str):
            problems.append(SettingProblem("unknown", kpath, f"{kpath}: keys must be strings"))
            continue
        if key in extra:
            if _check_type(kpath, value, extra[key], problems):
                out[key.lower()] = value
            continue
        name = _sdk_name(key)
        if key in SPRING_ALIASES and name is None:
            continue
        if name not in allowed or key != key.upper():
            problems.append(SettingProblem("unknown", kpath, f"unknown setting {kpath}"))
            continue
        if _check_type(kpath, value, allowed[name], problems):
            out[name] = tuple(value) if isinstance(value, list) else value
    return out


def load(raw: Any) -> RocketMQSettings:
    """Resolve a ``ROCKETMQ`` settings value (a dict, or None for "not configured")."""
    s = RocketMQSettings()
    if raw is None:
        raw = {}
    types = _field_types()
    top_extra = {k: v[0] for k, v in INTEGRATION_KEYS.items()}
    top_extra.update(dict.fromkeys(_SECTIONS, (object,)))  # checked by their own _section call
    top = _section(raw, "ROCKETMQ", types["client"], top_extra, s.problems)
    for section in _SECTIONS:
        top.pop(section.lower(), None)
    s.options = {k.lower(): default for k, (_, default) in INTEGRATION_KEYS.items()}
    for key in INTEGRATION_KEYS:
        if key.lower() in top:
            s.options[key.lower()] = top.pop(key.lower())
    s.client = top
    raw = raw if isinstance(raw, dict) else {}
    prod = _section(raw.get("PRODUCER", {}), 'ROCKETMQ["PRODUCER"]', types["producer"],
                    {"GROUP": (str,)}, s.problems)
    s.producer_group = prod.pop("group", None)
    s.producer = prod
    s.consumer = _section(raw.get("CONSUMER", {}), 'ROCKETMQ["CONSUMER"]', types["consumer"], {}, s.problems)
    tx = _section(raw.get("TRANSACTION", {}), 'ROCKETMQ["TRANSACTION"]', {},
                  {"GROUP": (str,), "CHECK_THREAD_POOL_SIZE": (int,), "CHECK_REQUEST_HOLD_MAX": (int,)},
                  s.problems)
    s.transaction_group = tx.pop("group", None) or (f"{s.producer_group}_tx" if s.producer_group else None)
    s.transaction = tx
    _validate_values(s)
    return s


def _validate_values(s: RocketMQSettings) -> None:
    """Values the SDK would refuse at first use, reported now (``ClientConfig.from_kwargs``)."""
    from rocketmq_sdk.exceptions import IllegalArgumentError

    for path, cls, kwargs in (('ROCKETMQ["PRODUCER"]', ProducerConfig, s.producer_kwargs()),
                              ('ROCKETMQ["CONSUMER"]', ConsumerConfig, s.consumer_kwargs())):
        try:
            cls.from_kwargs(**kwargs)
        except (IllegalArgumentError, TypeError, ValueError) as exc:
            s.problems.append(SettingProblem("value", path, f"{path}: {exc}"))


_current: list[RocketMQSettings] = []  # the resolved settings (one entry) until reset()


def get_settings() -> RocketMQSettings:
    """The resolved ``settings.ROCKETMQ`` (cached until :func:`reset`, which Django's
    ``setting_changed`` triggers, e.g. ``override_settings(ROCKETMQ=...)``).

    Raises:
        django.core.exceptions.ImproperlyConfigured: a bad setting (the first problem's text).
    """
    if _current:
        return _current[0]
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured

    resolved = load(getattr(settings, "ROCKETMQ", None))
    if resolved.problems:
        raise ImproperlyConfigured(resolved.problems[0].message)
    _current[:] = [resolved]
    return resolved


def reset(**_: Any) -> None:
    """Forget the cached settings (connected to Django's ``setting_changed``)."""
    _current.clear()
