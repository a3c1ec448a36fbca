"""Answers the name server's requests (SPEC.md section 3), as RocketMQ's DefaultRequestProcessor does.

Each handler takes (channel, request) and returns the response. Bodies are JSON; every response
extFields value is a string (the codec enforces it).
"""

from __future__ import annotations

import json
import logging
import zlib
from typing import Any, Callable

import orjson

from rmq.namesrv.routeinfo import RouteInfoManager
from rmq.net.codec import RemotingCommand
from rmq.net.codes import RequestCode, ResponseCode

log = logging.getLogger("rmq.namesrv")


class BadRequest(Exception):
    """A request whose header or body is unusable; answered with SYSTEM_ERROR and the reason."""


def encode_json(value: Any) -> bytes:
    return orjson.dumps(value)


def _field(request: RemotingCommand, name: str, *, optional: bool = False) -> str | None:
    value = request.ext_fields.get(name)
    if value is None and not optional:
        raise BadRequest(f"header field {name!r} is missing")
    return value


def _int_field(request: RemotingCommand, name: str, default: int | None = None) -> int:
    value = _field(request, name, optional=default is not None)
    if value is None:
        return default  # type: ignore[return-value]
    try:
        return int(value)
    except ValueError:
        raise BadRequest(f"header field {name!r} must be an integer, got {value!r}") from None


def _json_body(request: RemotingCommand) -> Any:
    try:
        return json.loads(bytes(request.body)) if request.body else None
    except (ValueError, UnicodeDecodeError) as e:
        raise BadRequest(f"body is not valid JSON: {e}") from None


def body_crc32(body: bytes) -> int:
    """RocketMQ's UtilAll.crc32: CRC32 masked to a non-negative int."""
    return zlib.crc32(body) & 0x7FFFFFFF


class NamesrvProcessor:
    def __init__(self, route_info: RouteInfoManager):
        self.route_info = route_info
        self.handlers: dict[int, Callable[[Any, RemotingCommand], RemotingCommand]] = {
            RequestCode.REGISTER_BROKER: self.register_broker,
            RequestCode.UNREGISTER_BROKER: self.unregister_broker,
            RequestCode.QUERY_DATA_VERSION: self.query_data_version,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self.get_route_info_by_topic,
            RequestCode.GET_BROKER_CLUSTER_INFO: self.get_broker_cluster_info,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.get_all_topic_list,
            RequestCode.GET_TOPICS_BY_CLUSTER: self.get_topics_by_cluster,
            RequestCode.DELETE_TOPIC_IN_NAMESRV: self.delete_topic,
        }

    def process(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        try:
            return self.handlers[request.code](channel, request)
        except BadRequest as e:
            log.warning("bad %s request from %s: %s", RequestCode(request.code).name,
                        getattr(channel, "remote_address", "?"), e)
            return RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, remark=str(e))

    def register_broker(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        body = bytes(request.body or b"")
        expected_crc = _int_field(request, "bodyCrc32", default=0)
        if expected_crc and body_crc32(body) != expected_crc:
            return RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, remark="crc32 not match")
        if (_field(request, "compressed", optional=True) or "false").lower() == "true":
            raise BadRequest("compressed registration bodies are not supported: register with compressed=false")
        decoded = _json_body(request) or {}
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
            cluster_name=_field(request, "clusterName"),
            broker_addr=_field(request, "brokerAddr"),
            broker_name=_field(request, "brokerName"),
            broker_id=_int_field(request, "brokerId"),
            ha_server_addr=_field(request, "haServerAddr", optional=True) or "",
            topic_config_wrapper=wrapper,
            filter_server_list=filter_servers if isinstance(filter_servers, list) else None,
            channel=channel,
        )
        ext = {}
        if result.ha_server_addr is not None:
            ext["haServerAddr"] = result.ha_server_addr
        if result.master_addr is not None:
            ext["masterAddr"] = result.master_addr
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, ext_fields=ext)

    def unregister_broker(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        self.route_info.unregister_broker(
            _field(request, "clusterName"), _field(request, "brokerAddr"),
            _field(request, "brokerName"), _int_field(request, "brokerId"),
        )
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    def query_data_version(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        """Apache 4.x brokers ask this before re-registering: "has my topic config changed for you?"."""
        broker_addr = _field(request, "brokerAddr")
        data_version = _json_body(request)
        changed = self.route_info.is_broker_topic_config_changed(broker_addr, data_version)
        if not changed:
            self.route_info.touch_broker(broker_addr)
        known = self.route_info.query_broker_data_version(broker_addr)
        return RemotingCommand.response_to(
            request, ResponseCode.SUCCESS, ext_fields={"changed": "true" if changed else "false"},
            body=encode_json(known) if known is not None else b"",
        )

    def get_route_info_by_topic(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        topic = _field(request, "topic")
        route = self.route_info.topic_route_json(topic)
        if route is None:
            return RemotingCommand.response_to(
                request, ResponseCode.TOPIC_NOT_EXIST,
                remark=f"No topic route info in name server for the topic: {topic}",
            )
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=route)

    def get_broker_cluster_info(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        return RemotingCommand.response_to(
            request, ResponseCode.SUCCESS, body=encode_json(self.route_info.get_all_cluster_info())
        )

    def get_all_topic_list(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        return RemotingCommand.response_to(
            request, ResponseCode.SUCCESS, body=encode_json({"topicList": self.route_info.get_all_topic_list()})
        )

    def get_topics_by_cluster(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        topics = self.route_info.get_topics_by_cluster(_field(request, "cluster"))
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=encode_json({"topicList": topics}))

    def delete_topic(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        self.route_info.delete_topic(_field(request, "topic"), _field(request, "clusterName", optional=True))
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)
