"""Queue allocation strategies of clustering consumers (docs/protocol.md §6.1).

Every consumer of a group runs the same strategy on the same sorted inputs (all queues of the
topic, all client ids of the group) and keeps only its own share, so the results must equal
Java's exactly or mixed-language groups would double-consume some queues and skip others.

A strategy is given to ``PushConsumer(..., allocate_strategy=...)`` or
``LitePullConsumer(..., allocate_strategy=...)`` (default :class:`AllocateMessageQueueAveragely`)
and called by the consumer's rebalance (on the client's I/O loop thread, every
``rebalance_interval`` ms and when the group changes), once per subscribed topic. It must be
fast, must not block and must be deterministic; every consumer of the group must use the same
one. Write your own by subclassing :class:`AllocateMessageQueueStrategy` and implementing
:meth:`~AllocateMessageQueueStrategy.allocate`.

Example (10 queues ``q0..q9``, client ids ``[a, b, c]``, sorted)::

    AVG            a: q0 q1 q2 q3   b: q4 q5 q6   c: q7 q8 q9
    AVG_BY_CIRCLE  a: q0 q3 q6 q9   b: q1 q4 q7   c: q2 q5 q8
"""

from __future__ import annotations

import bisect
import hashlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from ..exceptions import IllegalArgumentError
from ..protocol.message import MessageQueue

__all__ = ["AllocateMachineRoomNearby", "AllocateMessageQueueAveragely", "AllocateMessageQueueAveragelyByCircle",
           "AllocateMessageQueueByConfig", "AllocateMessageQueueByMachineRoom", "AllocateMessageQueueConsistentHash",
           "AllocateMessageQueueStrategy", "MachineRoomResolver", "java_split", "md5_hash"]

T = TypeVar("T")


class AllocateMessageQueueStrategy(ABC):
    """Which queues of a topic one consumer of a group owns (Java
    ``AllocateMessageQueueStrategy``): implement :meth:`allocate`.

    Attributes:
        name: the strategy's name (Java ``getName()``), shown in the consumer's running info.
    """

    #: Java ``getName()``.
    name: str = ""

    @abstractmethod
    def allocate(self, group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        """The queues of ``mq_all`` that the consumer ``current_cid`` owns.

        Called by the rebalance on the client's I/O loop thread: return quickly, never block.

        Args:
            group: the consumer group.
            current_cid: this consumer's client id (``ip@instanceName``).
            mq_all: every read queue of the topic, sorted (topic, broker name, queue id).
            cid_all: the client ids of the group's live consumers (from the brokers), sorted.

        Returns:
            A new list, a subset of ``mq_all`` (empty when ``current_cid`` is not in
            ``cid_all`` or either list is empty). Over all client ids the shares must cover
            ``mq_all`` exactly once.

        Raises:
            IllegalArgumentError: empty ``current_cid``.
        """

    @staticmethod
    def _check(current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]) -> bool:
        """Java's ``check``: False when there is nothing to share with ``current_cid``."""
        if not current_cid:
            raise IllegalArgumentError("current client id is empty")
        return bool(mq_all) and bool(cid_all) and current_cid in cid_all


class _ShareByIndex(AllocateMessageQueueStrategy):
    """Strategies whose share depends only on the consumer's index among the sorted client ids."""

    def allocate(self, group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        if not self._check(current_cid, mq_all, cid_all):
            return []
        return self._share(list(cid_all).index(current_cid), len(cid_all), mq_all)

    @abstractmethod
    def _share(self, index: int, c: int, mq_all: Sequence[MessageQueue]) -> list[MessageQueue]:
        """The share of consumer ``index`` of ``c``."""


class AllocateMessageQueueAveragely(_ShareByIndex):
    """Java's default ``AVG``: contiguous blocks of ``n // c`` queues, the first ``n % c``
    consumers one more (``n`` queues, ``c`` consumers; with ``n <= c`` the first ``n`` consumers
    get one queue each and the others none)."""

    name = "AVG"

    def _share(self, index: int, c: int, mq_all: Sequence[MessageQueue]) -> list[MessageQueue]:
        n = len(mq_all)
        mod = n % c
        if n <= c:
            avg = 1
        else:
            avg = n // c + 1 if mod > 0 and index < mod else n // c
        start = index * avg if mod > 0 and index < mod else index * avg + mod
        rng = min(avg, n - start)
        return [mq_all[(start + i) % n] for i in range(rng)]


class AllocateMessageQueueAveragelyByCircle(_ShareByIndex):
    """Java ``AVG_BY_CIRCLE``: queue ``i`` goes to consumer ``i % c`` (round robin, so each
    consumer's queues are spread over the brokers)."""

    name = "AVG_BY_CIRCLE"

    def _share(self, index: int, c: int, mq_all: Sequence[MessageQueue]) -> list[MessageQueue]:
        return [mq for i, mq in enumerate(mq_all) if i % c == index]


def md5_hash(key: str) -> int:
    """Java ``MD5Hash.hash``: the first 4 MD5 bytes of ``key`` (UTF-8) as an unsigned big-endian
    int (0..2**32-1)."""
    return int.from_bytes(hashlib.md5(key.encode("utf-8")).digest()[:4], "big")


class AllocateMessageQueueConsistentHash(AllocateMessageQueueStrategy):
    """Java ``CONSISTENT_HASH``: a ring of ``virtual_node_cnt`` nodes per client id (key
    ``cid + "-" + i``, hashed with :func:`md5_hash` unless ``hash_function`` is given); a queue
    (key ``str(mq)``, Java ``MessageQueue.toString()``) belongs to the first node whose hash is ≥
    its own, wrapping to the lowest. On a hash collision the node inserted last wins (Java
    ``TreeMap.put``).

    Args:
        virtual_node_cnt: virtual nodes per client id (10).
        hash_function: ``str -> int`` (default MD5 as Java).

    Raises:
        IllegalArgumentError: ``virtual_node_cnt`` < 0.
    """

    name = "CONSISTENT_HASH"

    def __init__(self, virtual_node_cnt: int = 10, hash_function: Callable[[str], int] | None = None) -> None:
        if virtual_node_cnt < 0:
            raise IllegalArgumentError(f"illegal virtual_node_cnt: {virtual_node_cnt}")
        self.virtual_node_cnt = virtual_node_cnt
        self.hash_function = hash_function or md5_hash

    def allocate(self, group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        if not self._check(current_cid, mq_all, cid_all):
            return []
        ring: dict[int, str] = {}
        for cid in cid_all:
            for i in range(self.virtual_node_cnt):
                ring[self.hash_function(f"{cid}-{i}")] = cid
        if not ring:
            return []
        keys = sorted(ring)
        out = []
        for mq in mq_all:
            pos = bisect.bisect_left(keys, self.hash_function(str(mq)))
            if ring[keys[pos if pos < len(keys) else 0]] == current_cid:
                out.append(mq)
        return out


class AllocateMessageQueueByConfig(AllocateMessageQueueStrategy):
    """Java ``CONFIG``: always the configured queues, whatever the inputs (no checks: every
    consumer using it must be given a disjoint list, or queues are consumed twice).

    Args:
        message_queue_list: the queues this consumer owns.
    """

    name = "CONFIG"

    def __init__(self, message_queue_list: Iterable[MessageQueue] = ()) -> None:
        self.message_queue_list = list(message_queue_list)

    def allocate(self, group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        return list(self.message_queue_list)


def java_split(s: str, sep: str) -> list[str]:
    """Java ``String.split`` with a literal one-character separator: trailing empty strings
    are removed (``"a@".split("@")`` has one part)."""
    parts = s.split(sep)
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return parts


class AllocateMessageQueueByMachineRoom(_ShareByIndex):
    """Java ``MACHINE_ROOM``: only queues of brokers named ``<room>@<name>`` whose room is in
    ``consume_idcs``; ``p`` such queues give each consumer ``p // c`` contiguous ones, and the
    first ``p % c`` consumers one more from the tail (``kept[index + (p // c) * c]``).

    Args:
        consume_idcs: the machine rooms (IDCs) this consumer group reads from.
    """

    name = "MACHINE_ROOM"

    def __init__(self, consume_idcs: Iterable[str] = ()) -> None:
        self.consume_idcs = set(consume_idcs)

    def _share(self, index: int, c: int, mq_all: Sequence[MessageQueue]) -> list[MessageQueue]:
        kept = [mq for mq in mq_all
                if len(parts := java_split(mq.broker_name, "@")) == 2 and parts[0] in self.consume_idcs]
        mod, rem = divmod(len(kept), c)
        out = kept[index * mod:index * mod + mod]
        if rem > index:
            out.append(kept[index + mod * c])
        return out


class MachineRoomResolver(ABC):
    """Java ``AllocateMachineRoomNearby.MachineRoomResolver``: where brokers and consumers live."""

    @abstractmethod
    def broker_deploy_in(self, mq: MessageQueue) -> str:
        """The machine room of ``mq``'s broker."""

    @abstractmethod
    def consumer_deploy_in(self, client_id: str) -> str:
        """The machine room of the consumer ``client_id``."""


def _by_room(items: Iterable[T], room_of: Callable[[T], str], what: str) -> dict[str, list[T]]:
    """``items`` by machine room (in order); an empty room is an error (Java's check)."""
    rooms: dict[str, list[T]] = {}
    for item in items:
        room = room_of(item)
        if not room:
            raise IllegalArgumentError(f"Machine room is null for {what} {item}")
        rooms.setdefault(room, []).append(item)
    return rooms


class AllocateMachineRoomNearby(AllocateMessageQueueStrategy):
    """Java ``MACHINE_ROOM_NEARBY-<inner>``: queues of the current consumer's machine room are
    shared by ``inner`` among that room's consumers; queues of rooms without any consumer are
    shared by ``inner`` among all consumers (rooms visited in sorted order).

    Args:
        inner: the strategy applied within each partition.
        resolver: maps queues and client ids to machine rooms.

    Raises:
        IllegalArgumentError: ``inner`` or ``resolver`` missing (constructor); a queue or
            consumer with an empty machine room (``allocate``).
    """

    def __init__(self, inner: AllocateMessageQueueStrategy, resolver: MachineRoomResolver) -> None:
        if inner is None or resolver is None:
            raise IllegalArgumentError("AllocateMachineRoomNearby needs an inner strategy and a resolver")
        self.inner = inner
        self.resolver = resolver
        self.name = f"MACHINE_ROOM_NEARBY-{inner.name}"

    def allocate(self, group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        if not self._check(current_cid, mq_all, cid_all):
            return []
        room_mqs = _by_room(mq_all, self.resolver.broker_deploy_in, "mq")
        room_cids = _by_room(cid_all, self.resolver.consumer_deploy_in, "consumer id")
        current_room = self.resolver.consumer_deploy_in(current_cid)
        out: list[MessageQueue] = []
        mine = room_mqs.pop(current_room, None)
        if mine:
            out.extend(self.inner.allocate(group, current_cid, mine, room_cids.get(current_room, [])))
        for room in sorted(room_mqs):
            if room not in room_cids:
                out.extend(self.inner.allocate(group, current_cid, room_mqs[room], cid_all))
        return out
