"""System checks (``manage.py check``) of the ``ROCKETMQ`` settings and the listeners.

| id | level | what |
|---|---|---|
| rocketmq.E001 | error | ``ROCKETMQ`` is not a dict |
| rocketmq.E002 | error | an unknown key (with the closest known key as hint) |
| rocketmq.E003 | error | a value of the wrong type |
| rocketmq.E004 | error | a value the SDK refuses (a bad enum name, a range) |
| rocketmq.E005 | error | ``MESSAGE_CONVERTER`` / ``MODEL_SERIALIZER`` cannot be imported |
| rocketmq.E006 | error | two listeners share a consumer group |
| rocketmq.E007 | error | a listener's handler has no payload parameter |
| rocketmq.E008 | error | ``PRODUCER["GROUP"]`` is not set (sends, replies and the outbox need it) |
| rocketmq.E009 | error | a listener keyword that is neither a ``@rocketmq_listener`` argument nor a ``ConsumerConfig`` field |
| rocketmq.E010 | error | a listener's payload type hint the message converter cannot produce (e.g. a Django model) |
| rocketmq.W001 | warning | no name server configured (``NAME_SERVER`` or ``$NAMESRV_ADDR``) |
| rocketmq.W002 | warning | a name server is not ``host:port`` or does not accept connections (builds without a broker pass) |

A listener's out-of-range consumer option (``pull_batch_size=5000``) is ``rocketmq.E004`` too.
"""

from __future__ import annotations

import difflib
import socket
from collections import defaultdict
from typing import Any

from django.conf import settings
from django.core import checks
from django.utils.module_loading import import_string

from .conf import INTEGRATION_KEYS, SPRING_ALIASES, _field_types, load

__all__ = ["check_listeners", "check_name_server", "check_settings"]

CONNECT_TIMEOUT_S = 0.5


def _known_keys(path: str) -> list[str]:
    types = _field_types()
    if path.endswith('["PRODUCER"]'):
        names = [*types["producer"], "group"]
    elif path.endswith('["CONSUMER"]'):
        names = list(types["consumer"])
    elif path.endswith('["TRANSACTION"]'):
        names = ["group", "check_thread_pool_size", "check_request_hold_max"]
    else:
        names = [*types["client"], *(k.lower() for k in INTEGRATION_KEYS), "producer", "consumer", "transaction"]
    return [n.upper() for n in names] + list(SPRING_ALIASES)


def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    raw = getattr(settings, "ROCKETMQ", None)
    if raw is not None and not isinstance(raw, dict):
        return [checks.Error(f"ROCKETMQ must be a dict, not {type(raw).__name__}", id="rocketmq.E001")]
    s = load(raw)
    out: list[checks.CheckMessage] = []
    for p in s.problems:
        if p.kind == "unknown":
            section, _, key = p.path.rpartition("[")
            close = difflib.get_close_matches(key.strip('"]'), _known_keys(section), n=1)
            out.append(checks.Error(p.message, hint=f'did you mean "{close[0]}"?' if close else None,
                                    id="rocketmq.E002"))
        elif p.kind == "type":
            out.append(checks.Error(p.message, id="rocketmq.E003"))
        else:
            out.append(checks.Error(p.message, id="rocketmq.E004"))
    if s.producer_group is None and not any(p.path.startswith('ROCKETMQ["PRODUCER"]') and "GROUP" in p.path
                                            or p.path == 'ROCKETMQ["PRODUCER"]' for p in s.problems):
        out.append(checks.Error('ROCKETMQ["PRODUCER"]["GROUP"] is not set',
                                hint="every send, reply and the outbox relay need a producer group",
                                id="rocketmq.E008"))
    for key in ("message_converter", "model_serializer"):
        try:
            import_string(s.options[key])
        except ImportError as exc:
            out.append(checks.Error(f'ROCKETMQ["{key.upper()}"] cannot be imported: {exc}', id="rocketmq.E005"))
    return out


def check_listeners(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    from .listeners import listener_problems, registry

    out: list[checks.CheckMessage] = []
    groups: dict[str, list[str]] = defaultdict(list)
    for spec in registry.values():
        groups[spec.consumer_group].append(spec.name)
        out.extend(listener_problems(spec))
    for group, names in sorted(groups.items()):
        if len(names) > 1:
            out.append(checks.Error(f"consumer group {group!r} is used by several listeners: {', '.join(names)}",
                                    hint="one listener per consumer group (as rocketmq-spring)", id="rocketmq.E006"))
    return out


def _reachable(addr: str) -> str | None:
    host, sep, port = addr.rpartition(":")
    if not sep or not host or not port.isdigit():
        return f"{addr!r} is not host:port (e.g. 127.0.0.1:9876)"
    try:
        with socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S):
            return None
    except (OSError, ValueError) as exc:
        return str(exc) or type(exc).__name__


def check_name_server(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    s = load(getattr(settings, "ROCKETMQ", None))
    if s.options["capture"] or not s.options["check_name_server"] or any(
            p.path.startswith(('ROCKETMQ["NAME_SERVER"]', 'ROCKETMQ["NAMESRV_ADDR"]', 'ROCKETMQ["NAMESRV_DOMAIN"]'))
            for p in s.problems):
        return []
    from rocketmq_sdk.config import ClientConfig

    cfg = ClientConfig(namesrv_addr=s.client.get("namesrv_addr"), namesrv_domain=s.client.get("namesrv_domain"))
    addrs = cfg.namesrv_addr_list
    if not addrs:
        if cfg.address_server:
            return []
        return [checks.Warning('no RocketMQ name server: set ROCKETMQ["NAME_SERVER"] or $NAMESRV_ADDR',
                               id="rocketmq.W001")]
    out: list[checks.CheckMessage] = []
    for addr in addrs:
        error = _reachable(addr)
        if error is not None:
            out.append(checks.Warning(f"RocketMQ name server {addr} is not reachable: {error}",
                                      hint="sends will fail until it is up", id="rocketmq.W002"))
    return out
