"""Which broker of a queue's broker name to pull from (Java ``PullAPIWrapper``
``pullFromWhichNodeTable`` / ``recalculatePullFromWhichNode`` / ``pullKernelImpl``), shared by
the push, pull and lite-pull consumers.

Every PULL_MESSAGE answer carries ``suggestWhichBrokerId``: a master with ``slaveReadEnable``
suggests its slave (the group's ``whichBrokerWhenConsumeSlowly``, 1) when the consumer lags
further behind than ``accessMessageInMemoryMaxRatio`` % of memory, a slave suggests the master
(0) again. The next pull of that queue goes to the suggested broker; when the suggested broker
is not in the route, to the master (or, while the master is away, to any broker of the name).
A pull sent to a slave never carries the COMMIT_OFFSET bit (a slave does not store offsets).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..exceptions import MQBrokerError
from ..protocol.codes import MASTER_ID, PullSysFlag
from ..protocol.headers import PullMessageRequestHeader
from ..protocol.message import MessageQueue

if TYPE_CHECKING:
    from ..client.instance import MQClientInstance

__all__ = ["PullFromWhichNode", "pull_address"]


async def pull_address(inst: MQClientInstance, mq: MessageQueue, broker_id: int,
                       header: PullMessageRequestHeader) -> str:
    """The address to send ``header`` (a pull of ``mq``) to when the last answer of the queue
    suggested ``broker_id`` (``MASTER_ID`` before any answer). Clears the COMMIT_OFFSET bit of
    ``header.sys_flag`` when that address is a slave's. Refreshes the topic's route once when
    the broker name is unknown (Java ``pullKernelImpl``).

    Raises:
        MQBrokerError: the broker name is in no route, even after the refresh.
    """
    addr, from_slave = inst.find_broker_in_subscribe(mq.broker_name, broker_id)
    if addr is None:
        await inst.update_topic_route(mq.topic)
        addr, from_slave = inst.find_broker_in_subscribe(mq.broker_name, broker_id)
        if addr is None:
            raise MQBrokerError(-1, f"broker {mq.broker_name} not found")
    if from_slave:
        header.sys_flag = PullSysFlag.clear_commit_offset(header.sys_flag or 0)
    return addr


class PullFromWhichNode:
    """The broker id each queue's next pull goes to, as the last answer of that queue suggested
    (Java ``PullAPIWrapper.pullFromWhichNodeTable``; ``MASTER_ID`` for a queue never pulled).
    Safe to use from the client's I/O loop only (no lock)."""

    __slots__ = ("_table",)

    def __init__(self) -> None:
        self._table: dict[MessageQueue, int] = {}

    def broker_id(self, mq: MessageQueue) -> int:
        """The broker id ``mq`` is pulled from next (Java ``recalculatePullFromWhichNode``)."""
        return self._table.get(mq, MASTER_ID)

    def update(self, mq: MessageQueue, suggested: int) -> None:
        """Record an answer's ``suggestWhichBrokerId`` for ``mq`` (Java ``updatePullFromWhichNode``)."""
        self._table[mq] = suggested

    async def address(self, inst: MQClientInstance, mq: MessageQueue, header: PullMessageRequestHeader) -> str:
        """:func:`pull_address` for ``mq``'s recorded broker id."""
        return await pull_address(inst, mq, self.broker_id(mq), header)
