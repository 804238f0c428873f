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
from rocketmq_sdk.protocol.validators import topic_problem

__all__ = ["RocketMQSettings", "SettingProblem", "get_settings", "load", "reset"]

#: rocketmq-spring property names that differ from the SDK's (upper snake case both sides)
SPRING_ALIASES = {
    "NAME_SERVER": "namesrv_addr",
    "SEND_MESSAGE_TIMEOUT": "send_msg_timeout",
    "COMPRESS_MESSAGE_BODY_THRESHOLD": "compress_msg_body_over_howmuch",
    "RETRY_NEXT_SERVER": "retry_another_broker_when_not_store_ok",
    "TLS_ENABLE": "use_tls",
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
    # Spring's enableMsgTrace / customizedTraceTopic: Apache RocketMQ message traces written by
    # the template's producers and every listener (docs/message-trace.md)
    "ENABLE_MSG_TRACE": ((bool,), False),
    "CUSTOMIZED_TRACE_TOPIC": ((str,), None),
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
    #: ``"<section>:<sdk field>"`` -> the setting's full path as written (``client``,
    #: ``producer``, ``consumer``), so SDK errors name the user's key
    paths: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def namespace(self) -> str | None:
        return self.client.get("namespace")

    def producer_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``Producer(group, **kwargs)``."""
        return {**self.client, **self.producer}

    def trace_kwargs(self, enable: bool | None = None, topic: str | None = None) -> dict[str, Any]:
        """``enable_msg_trace`` / ``customized_trace_topic`` of SDK producers and push consumers
        (``ENABLE_MSG_TRACE``, ``CUSTOMIZED_TRACE_TOPIC``); empty when tracing is off.

        Args:
            enable: a listener's own ``enable_msg_trace`` (None: the setting).
            topic: a listener's own ``customized_trace_topic`` (None: the setting).
        """
        if not (self.options.get("enable_msg_trace") if enable is None else enable):
            return {}
        return {"enable_msg_trace": True,
                "customized_trace_topic": topic or self.options.get("customized_trace_topic")}

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
def _non_negative() -> frozenset[str]:
    """Numeric SDK settings whose default is >= 0: a negative value is a mistake (the SDK
    would fail later, e.g. ``RETRY_TIMES_WHEN_SEND_FAILED=-5`` at the first send)."""
    names = set()
    for cls in (ClientConfig, ProducerConfig, ConsumerConfig):
        for f in dataclasses.fields(cls):
            if isinstance(f.default, int | float) and not isinstance(f.default, bool) and f.default >= 0:
                names.add(f.name)
    return frozenset(names)


def _check_value(path: str, name: str, value: Any, types: tuple[type, ...], problems: list[SettingProblem]) -> bool:
    """Values of the right type that the SDK would still refuse: an unknown enum name (the
    valid ones listed), a negative count or time."""
    enum_type = next((t for t in types if isinstance(t, type) and issubclass(t, enum.Enum)), None)
    if enum_type is not None and isinstance(value, str) and value not in enum_type.__members__:
        problems.append(SettingProblem("value", path, f"{path}: unknown value {value!r}; valid values: "
                                       f"{', '.join(enum_type.__members__)}"))
        return False
    if name in _non_negative() and isinstance(value, int | float) and not isinstance(value, bool) and value < 0:
        problems.append(SettingProblem("value", path, f"{path} must be >= 0, not {value}"))
        return False
    return True


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
             problems: list[SettingProblem], paths: dict[str, str] | None = None) -> dict[str, Any]:
    """Map one settings dict onto SDK keyword arguments (``extra``: keys kept as they are);
    ``paths`` gets each SDK field's full setting path."""
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
        if _check_type(kpath, value, allowed[name], problems) and _check_value(kpath, name, value, allowed[name],
                                                                               problems):
            out[name] = tuple(value) if isinstance(value, list) else value
            if paths is not None:
                paths[name] = kpath
    return out


def load(raw: Any) -> RocketMQSettings:
    """Resolve a ``ROCKETMQ`` settings value (a dict, or None for "not configured")."""
    s = RocketMQSettings()
    if raw is None:
        raw = {}
    types = _field_types()
    top_extra = {k: v[0] for k, v in INTEGRATION_KEYS.items()}
    top_extra.update(dict.fromkeys(_SECTIONS, (object,)))  # checked by their own _section call
    client_paths: dict[str, str] = {}
    top = _section(raw, "ROCKETMQ", types["client"], top_extra, s.problems, client_paths)
    for section in _SECTIONS:
        top.pop(section.lower(), None)
    s.options = {k.lower(): default for k, (_, default) in INTEGRATION_KEYS.items()}
    for key in INTEGRATION_KEYS:
        if key.lower() in top:
            s.options[key.lower()] = top.pop(key.lower())
    s.client = top
    raw = raw if isinstance(raw, dict) else {}
    producer_paths: dict[str, str] = {}
    consumer_paths: dict[str, str] = {}
    prod = _section(raw.get("PRODUCER", {}), 'ROCKETMQ["PRODUCER"]', types["producer"],
                    {"GROUP": (str,)}, s.problems, producer_paths)
    s.producer_group = prod.pop("group", None)
    s.producer = prod
    s.consumer = _section(raw.get("CONSUMER", {}), 'ROCKETMQ["CONSUMER"]', types["consumer"], {}, s.problems,
                          consumer_paths)
    for section, found in (("client", client_paths), ("producer", producer_paths), ("consumer", consumer_paths)):
        s.paths.update({f"{section}:{name}": kpath for name, kpath in found.items()})
    tx = _section(raw.get("TRANSACTION", {}), 'ROCKETMQ["TRANSACTION"]', {},
                  {"GROUP": (str,), "CHECK_THREAD_POOL_SIZE": (int,), "CHECK_REQUEST_HOLD_MAX": (int,)},
                  s.problems)
    s.transaction_group = tx.pop("group", None) or (f"{s.producer_group}_tx" if s.producer_group else None)
    s.transaction = tx
    _validate_values(s)
    return s


def _validate_values(s: RocketMQSettings) -> None:
    """Values the SDK would refuse at first use, reported now (``ClientConfig.from_kwargs``)
    under the path of the setting the SDK's message names (else the section's); a section
    whose keys already have problems is not checked again."""
    if s.problems:
        return
    trace_topic = s.options.get("customized_trace_topic")
    if trace_topic and (problem := topic_problem(trace_topic)):
        where = 'ROCKETMQ["CUSTOMIZED_TRACE_TOPIC"]'
        s.problems.append(SettingProblem("value", where, f"{where}: {trace_topic!r}: {problem}"))
    for section, path, cls, kwargs in (("producer", 'ROCKETMQ["PRODUCER"]', ProducerConfig, s.producer_kwargs()),
                                       ("consumer", 'ROCKETMQ["CONSUMER"]', ConsumerConfig, s.consumer_kwargs())):
        error = sdk_config_error(cls, kwargs)
        if error is not None:
            name = named_field(error, kwargs)
            where = s.paths.get(f"{section}:{name}") or s.paths.get(f"client:{name}") or path
            s.problems.append(SettingProblem("value", where, f"{where}: {error}"))


def sdk_config_error(cls: type, kwargs: dict[str, Any]) -> str | None:
    """The SDK's objection to ``cls.from_kwargs(**kwargs)`` (a config dataclass), else None."""
    from rocketmq_sdk.exceptions import IllegalArgumentError

    try:
        cls.from_kwargs(**kwargs)  # type: ignore[attr-defined]
    except (IllegalArgumentError, TypeError, ValueError) as exc:
        return str(exc)
    return None


def named_field(error: str, names: Any) -> str | None:
    """The first of ``names`` the error text mentions (by position in the text)."""
    hits = [(error.find(n), -len(n), n) for n in names if n in error]
    return min(hits)[2] if hits else None


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
