"""Answers the name server's requests (docs/nameserver.md), as RocketMQ's DefaultRequestProcessor does.

Each handler takes (channel, request) and returns the response; a header field or body that cannot
be used is refused with SYSTEM_ERROR naming it (``rmq.protocol.fields``). Bodies are JSON; every
response extFields value is a string (the codec enforces it).
"""

from __future__ import annotations

from typing import Any

import orjson

from rmq.namesrv.auth import ClusterAuth, Verdict
from rmq.namesrv.kv_config import KVConfigManager
from rmq.namesrv.routeinfo import RouteInfoManager
from rmq.net.channel import Handler
from rmq.net.codec import RemotingCommand, body_bytes
from rmq.protocol.acl import MASTER_CLAIM, ROUTED_MASTER_ADDR, ROUTED_MASTER_CLAIM, ROUTED_MASTER_EPOCH
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.crc import crc32
from rmq.protocol.fields import BadRequest, bool_field, int_field, json_body, str_field
from rmq.protocol.replica import REGISTER_CONTROLLER_MODE, REGISTER_EPOCH


class NamesrvProcessor:
    def __init__(
        self, route_info: RouteInfoManager, auth: ClusterAuth | None = None, kv_config: KVConfigManager | None = None
    ):
        """``auth``: the cluster account writes must be signed by (None: every write is taken,
        unsigned, as a 4.x name server takes it)."""
        self.route_info = route_info
        self.auth = auth
        self.kv_config = kv_config or KVConfigManager()
        self.handlers: dict[int, Handler] = {
            RequestCode.REGISTER_BROKER: self.register_broker,
            RequestCode.UNREGISTER_BROKER: self.unregister_broker,
            RequestCode.QUERY_DATA_VERSION: self.query_data_version,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self.get_route_info_by_topic,
            RequestCode.GET_BROKER_CLUSTER_INFO: self.get_broker_cluster_info,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.get_all_topic_list,
            RequestCode.GET_TOPICS_BY_CLUSTER: self.get_topics_by_cluster,
            RequestCode.DELETE_TOPIC_IN_NAMESRV: self.delete_topic,
            **self._operator_handlers(),
        }

    def _verdict(self, channel: Any, request: RemotingCommand) -> Verdict:
        return Verdict() if self.auth is None else self.auth.check(channel, request)

    def register_broker(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        verdict = self._verdict(channel, request)
        if verdict.refused is not None:
            return RemotingCommand.response_to(request, ResponseCode.NO_PERMISSION, remark=verdict.refused)
        body = body_bytes(request.body)
        expected_crc = int_field(request.ext_fields, "bodyCrc32", 0)
        if expected_crc and crc32(body) != expected_crc:
            return RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, remark="crc32 not match")
        if bool_field(request.ext_fields, "compressed"):
            raise BadRequest("compressed registration bodies are not supported: register with compressed=false")
        decoded = json_body(body) or {}
        if not isinstance(decoded, dict):
            raise BadRequest("body must be a JSON object")
        # 4.x brokers wrap the topic configs in a RegisterBrokerBody; very old ones send the wrapper bare.
        wrapper = decoded.get("topicConfigSerializeWrapper", decoded)
        filter_servers = decoded.get("filterServerList")
        if not isinstance(wrapper, dict) or not isinstance(wrapper.get("topicConfigTable", {}), dict):
            raise BadRequest("topicConfigSerializeWrapper.topicConfigTable must be a JSON object")
        for name, config in (wrapper.get("topicConfigTable") or {}).items():
            if not isinstance(config, dict):
                raise BadRequest(f"topic config of {name!r} must be a JSON object")
            config.setdefault("topicName", name)
        result = self.route_info.register_broker(
            cluster_name=str_field(request.ext_fields, "clusterName"),
            broker_addr=str_field(request.ext_fields, "brokerAddr"),
            broker_name=str_field(request.ext_fields, "brokerName"),
            broker_id=int_field(request.ext_fields, "brokerId"),
            ha_server_addr=str_field(request.ext_fields, "haServerAddr", ""),
            topic_config_wrapper=wrapper,
            filter_server_list=filter_servers if isinstance(filter_servers, list) else None,
            channel=channel,
            epoch=int_field(request.ext_fields, REGISTER_EPOCH, None),
            signed=verdict.signed,
            claim=str_field(request.ext_fields, MASTER_CLAIM, None),
            controller_mode=bool_field(request.ext_fields, REGISTER_CONTROLLER_MODE),
            # without the cluster account nothing is signed: controller mode's epochs are taken as given
            epochs_trusted=self.auth is None,
        )
        if result.refused is not None and not result.fenced:
            return RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, remark=result.refused)
        ext = {}
        if result.fenced:
            # the routed master as it registered: the refused one checks its claim before fencing
            ext[ROUTED_MASTER_ADDR] = str(result.routed_addr)
            ext[ROUTED_MASTER_EPOCH] = str(result.routed_epoch)
            if result.routed_claim is not None:
                ext[ROUTED_MASTER_CLAIM] = result.routed_claim
            return RemotingCommand.response_to(
                request, ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH, remark=result.refused, ext_fields=ext
            )
        if result.ha_server_addr is not None:
            ext["haServerAddr"] = result.ha_server_addr
        if result.master_addr is not None:
            ext["masterAddr"] = result.master_addr
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, ext_fields=ext)

    def unregister_broker(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        verdict = self._verdict(channel, request)
        if verdict.refused is not None:
            return RemotingCommand.response_to(request, ResponseCode.NO_PERMISSION, remark=verdict.refused)
        refused = self.route_info.unregister_broker(
            str_field(request.ext_fields, "clusterName"),
            str_field(request.ext_fields, "brokerAddr"),
            str_field(request.ext_fields, "brokerName"),
            int_field(request.ext_fields, "brokerId"),
            channel=channel,
            signed=verdict.signed,
        )
        if refused is not None:
            return RemotingCommand.response_to(request, ResponseCode.NO_PERMISSION, remark=refused)
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    def query_data_version(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        """Apache 4.x brokers ask this before re-registering: "has my topic config changed for you?"."""
        broker_addr = str_field(request.ext_fields, "brokerAddr")
        data_version = json_body(body_bytes(request.body))
        changed = self.route_info.is_broker_topic_config_changed(broker_addr, data_version)
        if not changed:
            self.route_info.touch_broker(broker_addr)
        known = self.route_info.query_broker_data_version(broker_addr)
        return RemotingCommand.response_to(
            request,
            ResponseCode.SUCCESS,
            ext_fields={"changed": "true" if changed else "false"},
            body=orjson.dumps(known) if known is not None else b"",
        )

    def get_route_info_by_topic(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        topic = str_field(request.ext_fields, "topic")
        route = self.route_info.topic_route_json(topic)
        if route is None:
            return RemotingCommand.response_to(
                request,
                ResponseCode.TOPIC_NOT_EXIST,
                remark=f"No topic route info in name server for the topic: {topic}",
            )
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=route)

    def get_broker_cluster_info(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        return RemotingCommand.response_to(
            request, ResponseCode.SUCCESS, body=orjson.dumps(self.route_info.get_all_cluster_info())
        )

    def get_all_topic_list(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        return RemotingCommand.response_to(
            request, ResponseCode.SUCCESS, body=orjson.dumps({"topicList": self.route_info.get_all_topic_list()})
        )

    def get_topics_by_cluster(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        topics = self.route_info.get_topics_by_cluster(str_field(request.ext_fields, "cluster"))
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=orjson.dumps({"topicList": topics}))

    def delete_topic(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        """Open without cluster credentials, as in 4.x: a topic its master still serves comes back
        at the master's next registration (``RouteInfoManager.register_broker``)."""
        verdict = self._verdict(channel, request)
        if verdict.refused is not None:
            return RemotingCommand.response_to(request, ResponseCode.NO_PERMISSION, remark=verdict.refused)
        ext = request.ext_fields
        self.route_info.delete_topic(str_field(ext, "topic"), str_field(ext, "clusterName", None))
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    # -- an operator's maintenance (rmq-admin broker wipe-write-perm / add-write-perm, rmq-admin kv) --

    def _operator_handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm_of_broker,
            RequestCode.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm_of_broker,
            RequestCode.PUT_KV_CONFIG: self.put_kv_config,
            RequestCode.GET_KV_CONFIG: self.get_kv_config,
            RequestCode.DELETE_KV_CONFIG: self.delete_kv_config,
        }

    def _refused(self, channel: Any, request: RemotingCommand) -> RemotingCommand | None:
        verdict = self._verdict(channel, request)
        if verdict.refused is None:
            return None
        return RemotingCommand.response_to(request, ResponseCode.NO_PERMISSION, remark=verdict.refused)

    def wipe_write_perm_of_broker(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        """{brokerName} -> {wipeTopicCount}: drain a broker before a restart, as 4.x's wipeWritePerm."""
        refused = self._refused(channel, request)
        if refused is not None:
            return refused
        count = self.route_info.set_write_perm_of_broker(str_field(request.ext_fields, "brokerName"), False)
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, ext_fields={"wipeTopicCount": str(count)})

    def add_write_perm_of_broker(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        """{brokerName} -> {addTopicCount}."""
        refused = self._refused(channel, request)
        if refused is not None:
            return refused
        count = self.route_info.set_write_perm_of_broker(str_field(request.ext_fields, "brokerName"), True)
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, ext_fields={"addTopicCount": str(count)})

    def put_kv_config(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        """{namespace, key, value}."""
        refused = self._refused(channel, request)
        if refused is not None:
            return refused
        ext = request.ext_fields
        try:
            self.kv_config.put(str_field(ext, "namespace"), str_field(ext, "key"), str_field(ext, "value"))
        except OSError as e:
            return self._kv_not_written(request, e)
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    def _kv_not_written(self, request: RemotingCommand, e: OSError) -> RemotingCommand:
        path = self.kv_config.path
        return RemotingCommand.response_to(
            request, ResponseCode.SYSTEM_ERROR, remark=f"KV config not changed: {path} could not be written ({e})"
        )

    def get_kv_config(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        """{namespace, key} -> {value}, or QUERY_NOT_FOUND with 4.x's remark."""
        namespace, key = str_field(request.ext_fields, "namespace"), str_field(request.ext_fields, "key")
        value = self.kv_config.get(namespace, key)
        if value is None:
            return RemotingCommand.response_to(
                request, ResponseCode.QUERY_NOT_FOUND, remark=f"No config item, Namespace: {namespace} Key: {key}"
            )
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, ext_fields={"value": value})

    def delete_kv_config(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        """{namespace, key}: SUCCESS whether it was there or not, as in 4.x."""
        refused = self._refused(channel, request)
        if refused is not None:
            return refused
        try:
            self.kv_config.delete(str_field(request.ext_fields, "namespace"), str_field(request.ext_fields, "key"))
        except OSError as e:
            return self._kv_not_written(request, e)
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)
