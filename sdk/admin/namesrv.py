"""Name servers: KV config, broker write permission, name server configuration."""

from __future__ import annotations

from ..exceptions import MQBrokerError
from ..properties import parse_properties
from ..protocol.admin_bodies import KVTable
from ..protocol.codes import RequestCode, ResponseCode
from ..protocol.headers import BrokerNameRequestHeader, KVConfigRequestHeader
from .core import AdminCore

__all__ = ["NamesrvAdmin"]


class NamesrvAdmin(AdminCore):
    """Name servers: KV config, broker write permission, name server configuration."""

    async def get_kv_config(self, namespace: str, key: str) -> str | None:
        """GET_KV_CONFIG (101); None when the key is absent (code 22)."""
        try:
            resp = await self._namesrv(RequestCode.GET_KV_CONFIG,
                                       KVConfigRequestHeader(namespace=namespace, key=key).to_ext_fields())
        except MQBrokerError as exc:
            if exc.code == ResponseCode.QUERY_NOT_FOUND:
                return None
            raise
        return resp.ext_fields.get("value")

    async def put_kv_config(self, namespace: str, key: str, value: str) -> None:
        """PUT_KV_CONFIG (100) on every name server, as ``updateKvConfig``."""
        ext = KVConfigRequestHeader(namespace=namespace, key=key, value=value).to_ext_fields()
        await self._all_namesrv(RequestCode.PUT_KV_CONFIG, ext)

    async def delete_kv_config(self, namespace: str, key: str) -> None:
        """DELETE_KV_CONFIG (102) on every name server, as ``deleteKvConfig``."""
        ext = KVConfigRequestHeader(namespace=namespace, key=key).to_ext_fields()
        await self._all_namesrv(RequestCode.DELETE_KV_CONFIG, ext)

    async def kv_list(self, namespace: str) -> dict[str, str]:
        """GET_KVLIST_BY_NAMESPACE (219); empty when the namespace is unknown (code 22)."""
        try:
            resp = await self._namesrv(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": namespace})
        except MQBrokerError as exc:
            if exc.code == ResponseCode.QUERY_NOT_FOUND:
                return {}
            raise
        return dict(KVTable.from_json(resp.body).table)

    async def wipe_write_perm(self, broker_name: str) -> dict[str, int]:
        """Remove the write permission of ``broker_name`` in every name server's routes
        (WIPE_WRITE_PERM_OF_BROKER 205): producers stop sending to it while consumers drain it.

        Returns:
            name server address → number of topics changed.
        """
        return await self._write_perm(RequestCode.WIPE_WRITE_PERM_OF_BROKER, broker_name, "wipeTopicCount")

    async def add_write_perm(self, broker_name: str) -> dict[str, int]:
        """Give ``broker_name`` its write permission back (ADD_WRITE_PERM_OF_BROKER 327).

        Returns:
            name server address → number of topics changed.
        """
        return await self._write_perm(RequestCode.ADD_WRITE_PERM_OF_BROKER, broker_name, "addTopicCount")

    async def _write_perm(self, code: int, broker_name: str, count_field: str) -> dict[str, int]:
        resps = await self._all_namesrv(code, BrokerNameRequestHeader(broker_name=broker_name).to_ext_fields())
        return {ns: int(r.ext_fields.get(count_field, 0)) for ns, r in resps.items()}

    async def namesrv_config(self) -> dict[str, dict[str, str]]:
        """Every name server's configuration (GET_NAMESRV_CONFIG 319), as ``getNamesrvConfig``.

        Returns:
            name server address → ``{camelCaseKey: value}``.
        """
        resps = await self._all_namesrv(RequestCode.GET_NAMESRV_CONFIG, {})
        return {ns: parse_properties(r.body.decode("utf-8", "replace")) for ns, r in resps.items()}

    async def update_namesrv_config(self, properties: dict[str, str]) -> list[str]:
        """UPDATE_NAMESRV_CONFIG (318) on every name server, as ``updateNamesrvConfig``; unknown keys
        are ignored by the server.

        Returns:
            the name servers updated.

        Raises:
            MQBrokerError: code 16 (NO_PERMISSION) for a key of the server's ``configBlackList``.
        """
        body = "".join(f"{k}={v}\n" for k, v in properties.items()).encode("utf-8")

        for ns in self.namesrv_addrs:
            await self._broker(ns, RequestCode.UPDATE_NAMESRV_CONFIG, {}, body)
        return list(self.namesrv_addrs)
