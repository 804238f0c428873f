"""The name server: route registration from brokers, route lookup for clients (docs/protocol.md §3.2, §5.10)."""

from __future__ import annotations

import asyncio
import logging
import os
import time
import zlib
from dataclasses import dataclass, field

from rocketmq_broker import request_guard
from rocketmq_broker.broker.config import (
    apply_properties,
    config_to_properties,
    read_properties_text,
    tls_server_context,
)
from rocketmq_sdk.protocol import fastjson
from rocketmq_sdk.protocol.admin_bodies import KVTable, TopicList
from rocketmq_sdk.protocol.bodies import RegisterBrokerBody
from rocketmq_sdk.protocol.codes import V4_9_4, RequestCode, ResponseCode
from rocketmq_sdk.protocol.headers import (
    BrokerIdentityHeader,
    BrokerNameRequestHeader,
    GetTopicsByClusterRequestHeader,
    KVConfigRequestHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    TopicRequestHeader,
)
from rocketmq_sdk.protocol.validators import topic_problem
from rocketmq_sdk.remoting import Channel, RemotingCommand, RemotingServer
from rocketmq_sdk.remoting.channel import bad_input_log

from .route_info import RouteInfoManager

log = logging.getLogger("rocketmq_broker.namesrv")


@dataclass
class NamesrvConfig:
    """Name server settings (``namesrv.conf`` keys in snake_case).

    GET_NAMESRV_CONFIG answers every field as ``camelCaseKey=value`` lines; UPDATE_NAMESRV_CONFIG
    sets the known keys it is sent (unknown ones are ignored, as Java's ``Configuration.update``)
    and refuses any key of ``config_black_list``. The fields after the first four are Java
    ``NamesrvConfig``'s, kept for those requests (the reference name server keeps KV config in
    memory and persists nothing).
    """

    listen_port: int = 9876
    bind_address: str = "127.0.0.1"
    #: expire a broker after this long without REGISTER_BROKER (Java: 120 s)
    broker_channel_expired_time: int = 120_000
    #: how often to scan for expired brokers (Java: 10 s)
    scan_not_active_broker_interval: int = 10_000
    rocketmq_home: str = field(default_factory=lambda: os.environ.get("ROCKETMQ_HOME", ""))
    kv_config_path: str = field(default_factory=lambda: os.path.join(os.path.expanduser("~"), "namesrv",
                                                                     "kvConfig.json"))
    config_store_path: str = field(default_factory=lambda: os.path.join(os.path.expanduser("~"), "namesrv",
                                                                        "namesrv.properties"))
    product_env_name: str = "center"
    cluster_test: bool = False
    order_message_enable: bool = False
    #: keys UPDATE_NAMESRV_CONFIG refuses (``;``-separated camelCase names)
    config_black_list: str = "configBlackList;configStorePath;kvConfigPath"
    #: serve TLS only (``tlsEnable``; Java ``tls.server.mode``), with these PEM files
    tls_enable: bool = False
    tls_server_cert_path: str | None = None
    tls_server_key_path: str | None = None


class NameServer:
    """An asyncio name server; ``await start()`` returns the bound port."""

    def __init__(self, config: NamesrvConfig | None = None) -> None:
        self.config = config or NamesrvConfig()
        self.routes = RouteInfoManager()
        self.kv: dict[str, dict[str, str]] = {}
        self.server = RemotingServer(ssl_context=tls_server_context(self.config))
        self._scan_task: asyncio.Task | None = None
        self.port = 0
        # Java's name server gives no reply to unknown codes (the caller times out)
        self.server.default_processor = lambda ch, cmd: None
        # Java BrokerHousekeepingService: a broker whose channel closes leaves the routes at once
        self.server.on_channel_close(lambda ch: self.routes.on_channel_destroy(ch))
        for code, fn in {
            RequestCode.REGISTER_BROKER: self._register_broker,
            RequestCode.UNREGISTER_BROKER: self._unregister_broker,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self._get_route,
            RequestCode.GET_BROKER_CLUSTER_INFO: self._cluster_info,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self._all_topics,
            RequestCode.QUERY_DATA_VERSION: self._query_data_version,
            RequestCode.DELETE_TOPIC_IN_NAMESRV: self._delete_topic,
            RequestCode.PUT_KV_CONFIG: self._put_kv,
            RequestCode.GET_KV_CONFIG: self._get_kv,
            RequestCode.DELETE_KV_CONFIG: self._delete_kv,
            RequestCode.GET_KVLIST_BY_NAMESPACE: self._kv_list,
            RequestCode.WIPE_WRITE_PERM_OF_BROKER: self._wipe_write_perm,
            RequestCode.ADD_WRITE_PERM_OF_BROKER: self._add_write_perm,
            RequestCode.GET_TOPICS_BY_CLUSTER: self._topics_by_cluster,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS: self._system_topics,
            RequestCode.GET_UNIT_TOPIC_LIST: self._unit_topics,
            RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST: self._unit_topics,
            RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: self._unit_topics,
            RequestCode.GET_NAMESRV_CONFIG: self._get_config,
            RequestCode.UPDATE_NAMESRV_CONFIG: self._update_config,
        }.items():
            self.server.register_processor(code, fn)
        # every topic/group a request names is checked first (issue 14); unknown codes stay unanswered
        request_guard.install(self.server)

    @property
    def addr(self) -> str:
        return f"{self.config.bind_address}:{self.port}"

    async def start(self) -> int:
        self.port = await self.server.start(self.config.bind_address, self.config.listen_port)
        self.config.listen_port = self.port  # GET_NAMESRV_CONFIG shows the bound port
        self._scan_task = asyncio.get_running_loop().create_task(self._scan_loop())
        log.info("name server listening on %s", self.addr)
        return self.port

    async def stop(self) -> None:
        if self._scan_task is not None:
            self._scan_task.cancel()
        await self.server.stop()

    async def _scan_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.scan_not_active_broker_interval / 1000)
            self.routes.scan_not_active_broker(self.config.broker_channel_expired_time)

    # -- processors --------------------------------------------------------------------------
    def _register_broker(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        h = RegisterBrokerRequestHeader.from_ext_fields(cmd.ext_fields)
        if h.body_crc32 and cmd.body and (zlib.crc32(cmd.body) & 0x7FFFFFFF) != h.body_crc32:
            return cmd.response(ResponseCode.SYSTEM_ERROR, "crc32 not match")
        topics = data_version = None
        if cmd.body:
            body = RegisterBrokerBody.decode(cmd.body, compressed=bool(h.compressed))
            wrapper = body.topic_config_wrapper
            topics = wrapper.topic_config_table
            problem = next((p for p in map(topic_problem, topics or ()) if p is not None), None)
            if problem is not None:  # a route named by a hostile topic never enters the table
                bad_input_log.warning("refused broker registration from %s: %s", ch.remote_addr, problem)
                return cmd.response(ResponseCode.SYSTEM_ERROR, problem)
            data_version = wrapper.data_version.to_dict()
        master = self.routes.register_broker(h.cluster_name or "", h.broker_addr or "", h.broker_name or "",
                                             int(h.broker_id or 0), h.ha_server_addr or "", topics, data_version, ch,
                                             h.enable_acting_master)
        # a slave learns its master's address and HA address (Java RouteInfoManager.registerBroker)
        resp = RegisterBrokerResponseHeader(ha_server_addr=master[1] if master else None,
                                            master_addr=master[0] if master else None)
        return cmd.response(ResponseCode.SUCCESS, ext_fields=resp.to_ext_fields())

    def _unregister_broker(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        h = BrokerIdentityHeader.from_ext_fields(cmd.ext_fields)
        self.routes.unregister_broker(h.cluster_name or "", h.broker_addr or "", h.broker_name or "",
                                      int(h.broker_id or 0))
        return cmd.response(ResponseCode.SUCCESS)

    def _get_route(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        h = TopicRequestHeader.from_ext_fields(cmd.ext_fields)
        route = self.routes.pick_route(h.topic or "")
        if route is None:
            return cmd.response(ResponseCode.TOPIC_NOT_EXIST,
                                f"No topic route info in name server for the topic: {h.topic}")
        standard = cmd.version >= V4_9_4 or bool(h.accept_standard_json_only)
        return cmd.response(ResponseCode.SUCCESS, body=route.to_json(standard=standard))

    def _cluster_info(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, body=fastjson.dumps(self.routes.cluster_info(),
                                                                      standard=False).encode())

    def _all_topics(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS,
                            body=fastjson.dumps({"topicList": self.routes.all_topics()}).encode())

    def _query_data_version(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        h = BrokerIdentityHeader.from_ext_fields(cmd.ext_fields)
        live = self.routes.broker_live_table.get(h.broker_addr or "")
        changed = True
        if live is not None and cmd.body:
            try:
                changed = fastjson.loads(cmd.body) != live.data_version
            except ValueError:
                changed = True
            live.last_update_ms = time.monotonic() * 1000  # the clock of the route table
        # Java also returns the data version it holds for the broker (broker-namesrv capture)
        body = fastjson.dumps(live.data_version).encode() if live is not None and live.data_version else b""
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"changed": "true" if changed else "false"},
                            body=body)

    def _delete_topic(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        self.routes.delete_topic(TopicRequestHeader.from_ext_fields(cmd.ext_fields).topic or "")
        return cmd.response(ResponseCode.SUCCESS)

    def _put_kv(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        h = KVConfigRequestHeader.from_ext_fields(cmd.ext_fields)
        self.kv.setdefault(h.namespace or "", {})[h.key or ""] = h.value or ""
        return cmd.response(ResponseCode.SUCCESS)

    def _get_kv(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        h = KVConfigRequestHeader.from_ext_fields(cmd.ext_fields)
        v = self.kv.get(h.namespace or "", {}).get(h.key or "")
        if v is None:
            return cmd.response(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {h.namespace} Key: {h.key}")
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"value": v})

    def _delete_kv(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        h = KVConfigRequestHeader.from_ext_fields(cmd.ext_fields)
        self.kv.get(h.namespace or "", {}).pop(h.key or "", None)
        return cmd.response(ResponseCode.SUCCESS)

    def _kv_list(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        namespace = (cmd.ext_fields or {}).get("namespace")
        table = self.kv.get(namespace or "")
        if table is None:
            return cmd.response(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {namespace}")
        return cmd.response(ResponseCode.SUCCESS, body=KVTable(dict(table)).to_json())

    # -- admin: write permission, topic lists, configuration -----------------------------------
    def _wipe_write_perm(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        name = BrokerNameRequestHeader.from_ext_fields(cmd.ext_fields).broker_name or ""
        count = self.routes.operate_write_perm(name, wipe=True)
        log.info("wipe write perm of broker[%s], client: %s, %d", name, ch.remote_addr, count)
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"wipeTopicCount": str(count)})

    def _add_write_perm(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        name = BrokerNameRequestHeader.from_ext_fields(cmd.ext_fields).broker_name or ""
        count = self.routes.operate_write_perm(name, wipe=False)
        log.info("add write perm of broker[%s], client: %s, %d", name, ch.remote_addr, count)
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"addTopicCount": str(count)})

    def _topics_by_cluster(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        cluster = GetTopicsByClusterRequestHeader.from_ext_fields(cmd.ext_fields).cluster or ""
        return cmd.response(ResponseCode.SUCCESS, body=TopicList(self.routes.topics_by_cluster(cluster)).to_json())

    def _system_topics(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        topics, addr = self.routes.system_topics()
        return cmd.response(ResponseCode.SUCCESS, body=TopicList(topics, addr).to_json())

    def _unit_topics(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        unit, unit_sub = 0x1, 0x2  # TopicSysFlag FLAG_UNIT / FLAG_UNIT_SUB
        want = {RequestCode.GET_UNIT_TOPIC_LIST: lambda f: bool(f & unit),
                RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST: lambda f: bool(f & unit_sub),
                RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: lambda f: not f & unit and bool(f & unit_sub)}
        topics = self.routes.topics_with_sys_flag(want[cmd.code])
        return cmd.response(ResponseCode.SUCCESS, body=TopicList(topics).to_json())

    def _get_config(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, body=config_to_properties(self.config).encode("utf-8"))

    def _update_config(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        log.info("updateConfig called by %s", ch.remote_addr)
        if not cmd.body:
            return cmd.response(ResponseCode.SUCCESS)
        props = read_properties_text(cmd.body.decode("utf-8", errors="replace"))
        black = {k.strip() for k in self.config.config_black_list.split(";") if k.strip()}
        if black.intersection(props):
            return cmd.response(ResponseCode.NO_PERMISSION, "Can not update config in black list.")
        try:
            changed = apply_properties(self.config, props)
        except ValueError as exc:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"string2Properties error: {exc}")
        log.info("name server config updated: %s", changed)
        return cmd.response(ResponseCode.SUCCESS)

