"""What every process of a kombu virtual host must agree on, kept on the name servers.

kombu's virtual transports route a message at publish time from the exchange's binding table
(kombu's Redis transport keeps it in Redis sets ``_kombu.binding.<exchange>``). Here the tables
live in the name servers' KV config (PUT_KV_CONFIG on every name server, GET_KVLIST_BY_NAMESPACE
to read), so a worker replying to a ``celery inspect`` client's reply queue, or a client
publishing to a queue another process declared, routes the same way:

- namespace ``<kv_prefix>.binding.<exchange>``: one key per binding, the JSON array
  ``[routing_key, pattern, queue]``;
- namespace ``<kv_prefix>.queues``: one key per declared queue, a JSON object
  ``{"max_priority": int|null, "message_ttl": ms|null, "queue_nums": int, "expires": ms|null}``;
- namespace ``<kv_prefix>.used``: for queues declared with ``x-expires``, one key per queue, the
  epoch ms it was last used (declared, consumed, read with ``basic_get``, cancelled);
- namespace ``<kv_prefix>.fanout``: one key ``[queue, exchange]`` per queue bound to a fanout
  exchange (its consumer group also reads the exchange's topic).

Reads are cached for ``cache_ttl`` seconds; a lookup that finds nothing asks again at once.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from rocketmq_sdk.admin import AdminClient
from rocketmq_sdk.exceptions import MQError, RemotingError

T = TypeVar("T")
log = logging.getLogger("rocketmq_sdk.integrations.celery")

__all__ = ["QueueInfo", "Registry"]


@dataclass(frozen=True)
class QueueInfo:
    """A declared queue's settings (from ``queue_declare`` arguments)."""

    max_priority: int | None = None
    message_ttl: int | None = None   # ms
    queue_nums: int = 4
    expires: int | None = None       # ms unused before the queue is deleted (``x-expires``)

    def to_json(self) -> str:
        d: dict = {"max_priority": self.max_priority, "message_ttl": self.message_ttl, "queue_nums": self.queue_nums}
        if self.expires:
            d["expires"] = self.expires
        return json.dumps(d, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> QueueInfo:
        try:
            d = json.loads(text)
            return cls(d.get("max_priority"), d.get("message_ttl"), int(d.get("queue_nums") or 4),
                       d.get("expires"))
        except (ValueError, TypeError, AttributeError):
            return cls()


class Registry:
    """Bindings and queues of one virtual host in the name servers' KV config.

    Args:
        admins: one admin client per name server: writes go to every one that answers (at
            least one must), reads to the first that answers.
        kv_prefix: KV namespace prefix (default ``"kombu"``; set per virtual host).
        cache_ttl: seconds a read table is reused (default 1.0).
    """

    def __init__(self, admins: list[AdminClient], kv_prefix: str = "kombu", cache_ttl: float = 1.0) -> None:
        self.admins = admins
        self.prefix = kv_prefix
        self.cache_ttl = cache_ttl
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[float, dict[str, str]]] = {}
        # parsed views of cached tables, by (namespace, view): (the raw table parsed, result);
        # reused while _list returns the same table (read per publish: no JSON per message)
        self._views: dict[tuple[str, str], tuple[dict[str, str], Any]] = {}
        self._queues_ns = self._ns("queues")  # read per publish (queue())

    def _first(self, call: Callable[[AdminClient], T]) -> T:
        error: MQError | None = None
        for admin in self.admins:
            try:
                return call(admin)
            except MQError as exc:
                error = exc
        raise error  # type: ignore[misc]

    def _every(self, call: Callable[[AdminClient], object]) -> None:
        error: MQError | None = None
        done = 0
        for admin in self.admins:
            try:
                call(admin)
                done += 1
            except RemotingError as exc:
                log.warning("name server %s: %s", admin.namesrv_addrs, exc)
                error = exc
        if not done and error is not None:
            raise error

    def _ns(self, kind: str, name: str | None = None) -> str:
        return f"{self.prefix}.{kind}" + (f".{name}" if name is not None else "")

    def _list(self, namespace: str, refresh: bool = False) -> dict[str, str]:
        hit = self._cache.get(namespace)  # one dict read (atomic): no lock on this per-publish path
        if hit is not None and not refresh and time.monotonic() - hit[0] < self.cache_ttl:
            return hit[1]
        table = self._first(lambda admin: admin.kv_list(namespace))
        with self._lock:
            self._cache[namespace] = (time.monotonic(), table)
        return table

    def _view(self, namespace: str, view: str, refresh: bool, parse: Callable[[dict[str, str]], T]) -> T:
        """``parse(table)`` of the namespace's table, parsed again only when the table was read
        again."""
        table = self._list(namespace, refresh)
        hit = self._views.get((namespace, view))
        if hit is not None and hit[0] is table:
            return hit[1]
        value = parse(table)
        self._views[(namespace, view)] = (table, value)
        return value

    def _put(self, namespace: str, key: str, value: str) -> None:
        self._every(lambda admin: admin.put_kv_config(namespace, key, value))
        with self._lock:
            self._cache.pop(namespace, None)

    def _delete(self, namespace: str, key: str) -> None:
        self._every(lambda admin: admin.delete_kv_config(namespace, key))
        with self._lock:
            self._cache.pop(namespace, None)

    # ---------------------------------------------------------------- bindings

    def bind(self, exchange: str, routing_key: str, pattern: str, queue: str) -> None:
        self._put(self._ns("binding", exchange), json.dumps([routing_key, pattern, queue]), "")

    def unbind(self, exchange: str, routing_key: str, pattern: str, queue: str) -> None:
        self._delete(self._ns("binding", exchange), json.dumps([routing_key, pattern, queue]))

    def table(self, exchange: str, refresh: bool = False) -> list[tuple[str, str, str]]:
        """The bindings of ``exchange`` as kombu's ``(routing_key, pattern, queue)`` triples."""
        return list(self._view(self._ns("binding", exchange), "table", refresh, _bindings))

    def unbind_queue(self, queue: str, exchanges: list[str]) -> None:
        """Remove every binding of ``queue`` to ``exchanges``."""
        for exchange in exchanges:
            for rk, pattern, q in self.table(exchange, refresh=True):
                if q == queue:
                    self.unbind(exchange, rk, pattern, q)

    # ---------------------------------------------------------------- fanout

    def bind_fanout(self, queue: str, exchange: str) -> None:
        self._put(self._ns("fanout"), json.dumps([queue, exchange]), "")

    def unbind_fanout(self, queue: str, exchange: str) -> None:
        self._delete(self._ns("fanout"), json.dumps([queue, exchange]))

    def fanout_exchanges(self, queue: str, refresh: bool = False) -> list[str]:
        """The fanout exchanges ``queue`` is bound to."""
        out = []
        for key in self._list(self._ns("fanout"), refresh):
            try:
                q, exchange = json.loads(key)
            except (ValueError, TypeError):
                continue
            if q == queue:
                out.append(exchange)
        return sorted(out)

    # ---------------------------------------------------------------- queues

    def declare_queue(self, queue: str, info: QueueInfo) -> None:
        current = self._list(self._ns("queues")).get(queue)
        if current != info.to_json():
            self._put(self._ns("queues"), queue, info.to_json())

    def delete_queue(self, queue: str) -> None:
        self._delete(self._ns("queues"), queue)
        if queue in self._list(self._ns("used"), True):
            self._delete(self._ns("used"), queue)

    def queues(self, refresh: bool = False) -> dict[str, QueueInfo]:
        """Every declared queue's settings."""
        return {q: QueueInfo.from_json(text) for q, text in self._list(self._ns("queues"), refresh).items()}

    def touch(self, queue: str, at_ms: int) -> None:
        """Record that ``queue`` was used at ``at_ms`` (epoch ms), for ``x-expires``."""
        self._put(self._ns("used"), queue, str(int(at_ms)))

    def last_used(self, queue: str) -> int | None:
        """When ``queue`` was last used (epoch ms), None when never recorded."""
        text = self._list(self._ns("used"), True).get(queue)
        try:
            return None if text is None else int(text)
        except ValueError:
            return None

    def queue(self, queue: str, refresh: bool = False) -> QueueInfo | None:
        """The queue's settings, None when it is not declared."""
        ns = self._queues_ns
        info = self._view(ns, "info", refresh, _queue_infos).get(queue)
        if info is None and not refresh:
            info = self._view(ns, "info", True, _queue_infos).get(queue)
        return info


def _bindings(table: dict[str, str]) -> tuple[tuple[str, str, str], ...]:
    """A binding table's keys (``[routing_key, pattern, queue]`` JSON) as sorted triples."""
    out = []
    for key in table:
        try:
            rk, pattern, queue = json.loads(key)
        except (ValueError, TypeError):
            continue
        out.append((rk, pattern, queue))
    return tuple(sorted(out))


def _queue_infos(table: dict[str, str]) -> dict[str, QueueInfo]:
    return {queue: QueueInfo.from_json(text) for queue, text in table.items()}
