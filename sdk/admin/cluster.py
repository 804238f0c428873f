"""Clusters and brokers: the broker list with runtime figures, a broker's runtime info and configuration."""

from __future__ import annotations

import contextlib

from ..properties import parse_properties
from ..protocol.admin_bodies import KVTable
from ..protocol.codes import RequestCode
from .core import MASTER_ID, REQUEST_FAILED, AdminCore, log
from .models import BrokerInfo, MasterlessBroker

__all__ = ["ClusterAdmin", "dledger_fields"]


def _first_tps(value: str | None) -> float | None:
    """Runtime-info TPS values read ``"<10s> <1min> <10min>"``; return the first."""
    if not value:
        return None
    try:
        return float(value.split()[0])
    except (ValueError, IndexError):
        return None


def dledger_fields(b: BrokerInfo, table: dict[str, str]) -> None:
    """The DLedger keys of a reference broker's runtime info (``dLegerRole`` …) into ``b``
    (left None when the table has none: not a DLedger member, or an Apache broker)."""
    if "dLegerRole" not in table:
        return
    b.dledger_id = table.get("dLegerSelfId") or None
    b.dledger_role = table.get("dLegerRole")
    with contextlib.suppress(ValueError):
        b.dledger_term = int(table.get("dLegerTerm", ""))
        b.dledger_index = int(table.get("dLegerLedgerEndIndex", ""))
    peers: dict[str, tuple[int, int | None]] = {}
    for item in filter(None, table.get("dLegerPeerIndexes", "").split(",")):
        parts = item.split(":")
        with contextlib.suppress(ValueError, IndexError):
            peers[parts[0]] = (int(parts[1]), int(parts[2]) if parts[2] else None)
    b.dledger_peers = peers or None


class ClusterAdmin(AdminCore):
    """Clusters and brokers: the broker list with runtime figures, a broker's runtime info and configuration."""

    async def cluster_list(self, *, runtime: bool = True) -> list[BrokerInfo]:
        """Every broker of every cluster (GET_BROKER_CLUSTER_INFO 106), as ``mqadmin clusterList``.

        Args:
            runtime: also ask each broker GET_BROKER_RUNTIME_INFO for version and TPS (a broker
                that does not answer gets None there).
        """
        info = await self._cluster()
        out = []
        for cluster in sorted(info.cluster_addr_table):
            for name in sorted(info.cluster_addr_table[cluster]):
                bd = info.broker_addr_table.get(name)
                if bd is None:
                    continue
                for bid in sorted(bd.broker_addrs):
                    addr = bd.broker_addrs[bid]
                    b = BrokerInfo(cluster, name, bid, addr, "MASTER" if bid == MASTER_ID else "SLAVE")
                    if runtime:
                        try:
                            table = await self._runtime_info(addr)
                        except REQUEST_FAILED as exc:
                            log.debug("runtime info of %s: %s", addr, exc)
                        else:
                            b.version = table.get("brokerVersionDesc")
                            b.in_tps = _first_tps(table.get("putTps"))
                            b.out_tps = _first_tps(table.get("getTransferedTps"))
                            with contextlib.suppress(ValueError):  # missing ("") or not a number
                                b.commit_log_max_offset = int(table.get("commitLogMaxOffset", ""))
                            dledger_fields(b, table)
                    out.append(b)
        masters = {(b.cluster, b.broker_name): b.commit_log_max_offset for b in out if b.broker_id == MASTER_ID}
        for b in out:  # replication lag of each slave, as two brokerStatus calls would give it
            master = masters.get((b.cluster, b.broker_name))
            if b.broker_id != MASTER_ID and master is not None and b.commit_log_max_offset is not None:
                b.replication_lag = max(master - b.commit_log_max_offset, 0)
        return out

    async def _runtime_info(self, addr: str) -> dict[str, str]:
        resp = await self._broker(addr, RequestCode.GET_BROKER_RUNTIME_INFO)
        return dict(KVTable.from_json(resp.body).table)

    async def broker_runtime_info(self, broker_addr: str) -> dict[str, str]:
        """The broker's runtime statistics (GET_BROKER_RUNTIME_INFO 28), as ``brokerStatus``."""
        return await self._runtime_info(broker_addr)

    async def broker_config(self, broker_addr: str) -> dict[str, str]:
        """The broker's configuration (GET_BROKER_CONFIG 26), as ``getBrokerConfig``."""
        resp = await self._broker(broker_addr, RequestCode.GET_BROKER_CONFIG)
        return parse_properties(resp.body.decode("utf-8", "replace"))

    async def cluster_broker_addrs(self, cluster: str) -> list[str]:
        """Master addresses of ``cluster``.

        Raises:
            MQClientError: unknown cluster.
        """
        return await self._master_addrs(cluster)

    async def masterless_brokers(self) -> list[MasterlessBroker]:
        """The brokers whose master the name server no longer lists (it is down or was
        unregistered) while a slave is still registered (GET_BROKER_CLUSTER_INFO 106): their
        data is read from that slave (progress, offsets, stats, messages), writes to them fail.
        Empty when every broker has its master. A broker with no address left at all is not
        listed (the name server forgets it).
        """
        return self._masterless(await self._cluster())
