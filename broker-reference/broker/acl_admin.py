"""ACL administration requests of the reference broker (4.9.8 ``AdminBrokerProcessor`` +
``PlainPermissionManager``): UPDATE_AND_CREATE_ACL_CONFIG (50), DELETE_ACL_CONFIG (51),
UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53) edit the broker's ``plain_acl.yml`` (a new
``dataVersion`` each time; the validator picks the change up at once), GET_BROKER_CLUSTER_ACL_INFO
(52) reports that version (with ACL off 4.9.8 does not answer it, nor does this broker).
GET_BROKER_CLUSTER_ACL_CONFIG (54) is not served: 4.9.8 removed it (apache/rocketmq#7653) and
answers REQUEST_CODE_NOT_SUPPORTED, after the ACL check as for every unknown code.

Mirrored: an update merges into an existing account (fields not sent are kept; ``topicPerms`` /
``groupPerms`` are comma-separated ``res=PERM`` lists), a new access key is appended; keys must be
longer than 6 characters and perms ``PUB``/``SUB``/``PUB|SUB``/``SUB|PUB``/``DENY``; failures
answer 209/210/211 with Java's messages. With ``aclEnable=false`` the 4.9.8 broker (on JDK 17)
fails with a NullPointerException whose message becomes the remark; the same remarks are sent.

Not mirrored: 4.9.8 lets any account with a valid signature send these codes; here they need an
``admin`` account (see ``ACL_ADMIN_CODES`` in :mod:`.acl`). ``aclFileFullPath`` of code 53 is
ignored: the broker has one ACL file.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Any, Protocol

import yaml
from rocketmq_sdk.protocol.bodies import DataVersion
from rocketmq_sdk.protocol.codes import RequestCode, ResponseCode
from rocketmq_sdk.protocol.headers import (
    PlainAccessConfigRequestHeader,
    UpdateGlobalWhiteAddrsConfigRequestHeader,
)
from rocketmq_sdk.remoting import Channel, RemotingCommand

from .acl_config import AclConfigError, PlainAccessAccount
from .requests import ACL_ADMIN, ACL_NONE, SlaveRule, handles

if TYPE_CHECKING:
    from .context import BrokerContext

__all__ = ["AclAdminProcessor"]

log = logging.getLogger("rocketmq_broker.acl")

_VALID_PERMS = {"PUB", "SUB", "PUB|SUB", "SUB|PUB", "DENY"}

# what 4.9.8 on JDK 17 answers when aclEnable=false (admin.jsonl seq 659, 672, 677)
_NO_VALIDATOR = 'Cannot invoke "org.apache.rocketmq.acl.AccessValidator.{}" because "accessValidator" is null'
_UPDATE_SIG = "updateAccessConfig(org.apache.rocketmq.common.PlainAccessConfig)"
_DELETE_SIG = "deleteAccessConfig(String)"
_WHITE_SIG = "updateGlobalWhiteAddrsConfig(java.util.List, String)"


def _split(text: str | None) -> list[str] | None:
    """Java ``UtilAll.split(str, ",")``: None for None, else the trimmed non-empty items."""
    if text is None:
        return None
    return [p.strip() for p in text.split(",") if p.strip()]


def _check_resource_perms(entries: list[str] | None) -> None:
    for entry in entries or ():
        items = [p for p in entry.split("=") if p]
        if len(items) != 2:
            raise AclConfigError(f"Parse Resource format error for {entry}.\n"
                                 "The expected resource format is 'Res=Perm'. For example: topicA=SUB")
        if items[1].strip() not in _VALID_PERMS:
            raise AclConfigError(f"Parse resource permission error for {entry}.\n"
                                 "The expected permissions are 'SUB' or 'PUB' or 'SUB|PUB' or 'PUB|SUB'.")


class AclFileWatcher(Protocol):
    """The broker's ACL validator, as far as this processor uses it."""

    def reload_if_changed(self) -> None: ...


class AclAdminProcessor:
    """Answers codes 50-53 for a broker (``acl``: its validator, None when ACL is off)."""

    def __init__(self, broker: BrokerContext, acl: AclFileWatcher | None) -> None:
        self.broker = broker
        self.acl = acl
        self._lock = threading.Lock()

    @staticmethod
    def not_supported(_ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        """Any code no processor serves, e.g. GET_BROKER_CLUSTER_ACL_CONFIG (54, removed in 4.9.8
        with mqadmin's ``getAccessConfig``): REQUEST_CODE_NOT_SUPPORTED " request type 54 not
        supported". As 4.9.8's broker, whose ``AdminBrokerProcessor`` is the default processor,
        the request passes the ACL check first (unsigned: refused when ``aclEnable``)."""
        return cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {cmd.code} not supported")

    # -- the file ---------------------------------------------------------------------------------
    @property
    def path(self) -> str:
        return self.broker.config.acl_file_path

    def _read(self) -> dict[str, Any]:
        try:
            with open(self.path, encoding="utf-8") as fh:
                data = yaml.safe_load(fh.read())
        except FileNotFoundError:
            return {}
        return data if isinstance(data, dict) else {}

    def _write(self, data: dict[str, Any]) -> None:
        """Bump ``dataVersion`` (Java ``updateAclConfigFileVersion``), write atomically, reload."""
        old = (data.get("dataVersion") or [{}])[0] if isinstance(data.get("dataVersion"), list) else {}
        counter = int((old or {}).get("counter", 0)) + 1
        data["dataVersion"] = [{"counter": counter, "timestamp": int(time.time() * 1000)}]
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        tmp = f"{self.path}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            yaml.safe_dump(data, fh, sort_keys=False, allow_unicode=True)
        os.replace(tmp, self.path)
        if self.acl is not None:
            self.acl.reload_if_changed()

    # -- requests ---------------------------------------------------------------------------------
    @handles(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, header=PlainAccessConfigRequestHeader, writes=True,
             acl=ACL_ADMIN, on_slave=SlaveRule.SERVE)
    def update_access_config(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        h = PlainAccessConfigRequestHeader.from_ext_fields(cmd.ext_fields)
        if self.acl is None:
            return cmd.response(ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED, _NO_VALIDATOR.format(_UPDATE_SIG))
        topic_perms, group_perms = _split(h.topic_perms), _split(h.group_perms)
        try:
            ak, sk = h.access_key, h.secret_key
            if not ak or not sk or len(ak) <= 6 or len(sk) <= 6:
                raise AclConfigError(f"The accessKey={ak} and secretKey={sk} cannot be null and length should "
                                     "longer than 6")
            _check_resource_perms(topic_perms)
            _check_resource_perms(group_perms)
            with self._lock:
                data = self._read()
                accounts = data.get("accounts")
                if not isinstance(accounts, list):
                    accounts = data["accounts"] = []
                account = next((a for a in accounts if isinstance(a, dict) and str(a.get("accessKey")) == ak), None)
                if account is None:
                    account = {}
                    accounts.append(account)
                account["accessKey"] = ak
                account["secretKey"] = sk
                if h.white_remote_address is not None:
                    account["whiteRemoteAddress"] = h.white_remote_address
                account["admin"] = bool(h.admin)
                if h.default_topic_perm:
                    account["defaultTopicPerm"] = h.default_topic_perm
                if h.default_group_perm:
                    account["defaultGroupPerm"] = h.default_group_perm
                if topic_perms is not None:
                    account["topicPerms"] = topic_perms
                if group_perms is not None:
                    account["groupPerms"] = group_perms
                PlainAccessAccount.from_dict(account)  # the result must load
                self._write(data)
        except (AclConfigError, OSError, yaml.YAMLError) as exc:
            log.warning("updateAccessConfig %s failed: %s", h.access_key, exc)
            return cmd.response(ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED, str(exc))
        log.info("ACL account %s created or updated by %s", ak, ch.remote_addr)
        return cmd.response(ResponseCode.SUCCESS)

    @handles(RequestCode.DELETE_ACL_CONFIG, header=PlainAccessConfigRequestHeader, writes=True, acl=ACL_ADMIN,
             on_slave=SlaveRule.SERVE)
    def delete_access_config(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        ak = PlainAccessConfigRequestHeader.from_ext_fields(cmd.ext_fields).access_key
        if self.acl is None:
            return cmd.response(ResponseCode.DELETE_ACL_CONFIG_FAILED, _NO_VALIDATOR.format(_DELETE_SIG))
        failed = f"The accesskey[{ak}] corresponding to accessConfig has been deleted failed."
        try:
            with self._lock:
                data = self._read()
                accounts = data.get("accounts") if isinstance(data.get("accounts"), list) else []
                keep = [a for a in accounts if not (isinstance(a, dict) and str(a.get("accessKey")) == ak)]
                if not ak or len(keep) == len(accounts):
                    return cmd.response(ResponseCode.DELETE_ACL_CONFIG_FAILED, failed)
                data["accounts"] = keep
                self._write(data)
        except (OSError, yaml.YAMLError) as exc:
            return cmd.response(ResponseCode.DELETE_ACL_CONFIG_FAILED, str(exc))
        log.info("ACL account %s deleted by %s", ak, ch.remote_addr)
        return cmd.response(ResponseCode.SUCCESS)

    @handles(RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, header=UpdateGlobalWhiteAddrsConfigRequestHeader,
             writes=True, acl=ACL_ADMIN, on_slave=SlaveRule.SERVE)
    def update_global_white_addrs(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        text = UpdateGlobalWhiteAddrsConfigRequestHeader.from_ext_fields(cmd.ext_fields).global_white_addrs
        if self.acl is None:
            return cmd.response(ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED, _NO_VALIDATOR.format(_WHITE_SIG))
        addrs = _split(text)
        if addrs is None:
            return cmd.response(ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED,
                                f"The globalWhiteAddresses[{text}] has been updated failed.")
        try:
            with self._lock:
                data = self._read()
                data["globalWhiteRemoteAddresses"] = addrs
                self._write(data)
        except (OSError, yaml.YAMLError) as exc:
            return cmd.response(ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED, str(exc))
        log.info("ACL global white addresses set to %s by %s", addrs, ch.remote_addr)
        return cmd.response(ResponseCode.SUCCESS)

    @handles(RequestCode.GET_BROKER_CLUSTER_ACL_INFO, header=None, writes=False, acl=ACL_NONE)
    def acl_config_version(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand | None:
        if self.acl is None:
            return None  # 4.9.8 logs the NullPointerException and answers nothing
        versions = self._read().get("dataVersion")
        version = DataVersion.from_dict(versions[0] if isinstance(versions, list) and versions else None)
        c = self.broker.config
        text = json.dumps(version.to_dict(), separators=(",", ":"))
        return cmd.response(ResponseCode.SUCCESS, ext_fields={
            "version": text, "allAclFileVersion": json.dumps({self.path: version.to_dict()}, separators=(",", ":")),
            "brokerName": c.broker_name, "brokerAddr": c.broker_addr, "clusterName": c.broker_cluster_name})
