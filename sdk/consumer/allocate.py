"""Queue allocation strategies of clustering consumers (protocol doc §6.1).

Every consumer of a group runs the same strategy on the same sorted inputs (all queues of the
topic, all client ids of the group) and keeps only its own share, so the results must equal
Java's exactly or mixed-language groups would double-consume some queues and skip others.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from ..exceptions import IllegalArgumentError
from ..protocol.message import MessageQueue

__all__ = ["AllocateMessageQueueAveragely", "AllocateMessageQueueAveragelyByCircle",
           "AllocateMessageQueueStrategy"]


class AllocateMessageQueueStrategy(ABC):
    """Java ``AllocateMessageQueueStrategy``."""

    #: Java ``getName()``.
    name: str = ""

    @abstractmethod
    def allocate(self, group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        """Queues of ``mq_all`` owned by ``current_cid``; both lists must be sorted.

        Raises:
            IllegalArgumentError: empty ``current_cid``.
        """

    @staticmethod
    def _check(current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]) -> bool:
        if not current_cid:
            raise IllegalArgumentError("current client id is empty")
        return bool(mq_all) and bool(cid_all) and current_cid in cid_all


class AllocateMessageQueueAveragely(AllocateMessageQueueStrategy):
    """Java's default: contiguous blocks, the first ``n % c`` consumers get one extra queue."""

    name = "AVG"

    def allocate(self, group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        if not self._check(current_cid, mq_all, cid_all):
            return []
        index = list(cid_all).index(current_cid)
        n, c = len(mq_all), len(cid_all)
        mod = n % c
        if n <= c:
            avg = 1
        else:
            avg = n // c + 1 if mod > 0 and index < mod else n // c
        start = index * avg if mod > 0 and index < mod else index * avg + mod
        rng = min(avg, n - start)
        return [mq_all[(start + i) % n] for i in range(rng)]


class AllocateMessageQueueAveragelyByCircle(AllocateMessageQueueStrategy):
    """Java ``AVG_BY_CIRCLE``: queue ``i`` goes to consumer ``i % c``."""

    name = "AVG_BY_CIRCLE"

    def allocate(self, group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        if not self._check(current_cid, mq_all, cid_all):
            return []
        index, c = list(cid_all).index(current_cid), len(cid_all)
        return [mq for i, mq in enumerate(mq_all) if i % c == index]
