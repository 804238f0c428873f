"""ACL of the brokers (``plain_acl.yml``): accounts, global white list, config version."""

from __future__ import annotations

from ..protocol.codes import RequestCode
from ..protocol.headers import PlainAccessConfigRequestHeader, UpdateGlobalWhiteAddrsConfigRequestHeader
from .core import AdminCore

__all__ = ["AclAdmin"]


class AclAdmin(AdminCore):
    """ACL of the brokers (``plain_acl.yml``): accounts, global white list, config version."""

    async def update_acl_config(self, access_key: str, secret_key: str, *, cluster: str | None = None,
                          broker_addr: str | None = None, white_remote_address: str | None = None,
                          admin: bool = False, default_topic_perm: str | None = None,
                          default_group_perm: str | None = None, topic_perms: list[str] | None = None,
                          group_perms: list[str] | None = None) -> list[str]:
        """Create or update an ACL account (UPDATE_AND_CREATE_ACL_CONFIG 50) on a broker or every
        master of a cluster, as ``mqadmin updateAclConfig``; fields left None are kept.

        Args:
            access_key / secret_key: the account (both longer than 6 characters).
            topic_perms / group_perms: ``["topicA=DENY", "topicB=PUB|SUB"]``.

        Returns:
            the broker addresses updated.

        Raises:
            MQBrokerError: code 209 with the broker's reason (bad keys or perms, ACL off).
        """
        ext = PlainAccessConfigRequestHeader(
            access_key=access_key, secret_key=secret_key, white_remote_address=white_remote_address, admin=admin,
            default_topic_perm=default_topic_perm, default_group_perm=default_group_perm,
            topic_perms=None if topic_perms is None else ",".join(topic_perms),
            group_perms=None if group_perms is None else ",".join(group_perms)).to_ext_fields()
        return await self._to_masters(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, ext, cluster, broker_addr)

    async def delete_acl_config(self, access_key: str, *, cluster: str | None = None,
                          broker_addr: str | None = None) -> list[str]:
        """Delete an ACL account (DELETE_ACL_CONFIG 51), as ``mqadmin deleteAccessConfig``.

        Raises:
            MQBrokerError: code 210 (unknown access key, ACL off).
        """
        ext = PlainAccessConfigRequestHeader(access_key=access_key).to_ext_fields()
        return await self._to_masters(RequestCode.DELETE_ACL_CONFIG, ext, cluster, broker_addr)

    async def update_global_white_addrs(self, addresses: list[str], *, cluster: str | None = None,
                                  broker_addr: str | None = None) -> list[str]:
        """Replace ``globalWhiteRemoteAddresses`` (UPDATE_GLOBAL_WHITE_ADDRS_CONFIG 53), as
        ``mqadmin updateGlobalWhiteAddr``.

        Raises:
            MQBrokerError: code 211 (ACL off).
        """
        ext = UpdateGlobalWhiteAddrsConfigRequestHeader(global_white_addrs=",".join(addresses)).to_ext_fields()
        return await self._to_masters(RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, ext, cluster, broker_addr)

    async def acl_config_version(self, *, cluster: str | None = None,
                           broker_addr: str | None = None) -> dict[str, dict[str, str]]:
        """Each broker's ACL file version (GET_BROKER_CLUSTER_ACL_INFO 52), as ``mqadmin
        clusterAclConfigVersion``: broker address → the response header (``version``,
        ``allAclFileVersion``, ``brokerName``, ``clusterName``...).

        Raises:
            RemotingTimeoutError: a broker with ACL off (4.9.8 does not answer then).
        """
        out = {}
        for addr in await self._master_addrs(cluster, broker_addr):
            out[addr] = dict((await self._broker(addr, RequestCode.GET_BROKER_CLUSTER_ACL_INFO)).ext_fields)
        return out

    async def _to_masters(self, code: int, ext: dict[str, str], cluster: str | None,
                          broker_addr: str | None) -> list[str]:
        addrs = await self._master_addrs(cluster, broker_addr)
        for addr in addrs:
            await self._broker(addr, code, ext)
        return addrs
