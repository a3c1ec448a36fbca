"""Who is connected, and the broker's figures, as RocketMQ's AdminBrokerProcessor answers mqadmin
(bodies in ``rmq.protocol.running_info``):

    GET_PRODUCER_CONNECTION_LIST (204) {producerGroup} -> ProducerConnection; SYSTEM_ERROR when
                                        the group has no producer online (4.x's answer)
    GET_CONSUMER_RUNNING_INFO (307)     forwarded to the client ``clientId`` of ``consumerGroup``
    CONSUME_MESSAGE_DIRECTLY (309)      the record ``msgId`` points at, forwarded to that client with
                                        this broker's name (brokerName) and the topic's sysFlag
    VIEW_BROKER_STATS_DATA (315)        {statsName, statsKey} -> BrokerStatsData (rmq.broker.broker_stats)
    GET_BROKER_CONSUME_STATS (317)      {isOrder} -> ConsumeStatsList: every group's ConsumeStats here

A forwarded request goes out on the client's own connection; the admin's is answered with the
client's answer when it comes (the loop thread never waits), or CONSUME_MSG_TIMEOUT after
CALL_CLIENT_TIMEOUT, or SYSTEM_ERROR when the client is not online or its connection fails.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from rmq.broker.broker_stats import STATS_NAMES
from rmq.broker.processor.admin_broker import queue_offsets
from rmq.broker.processor.base import Handler, Processor, success
from rmq.broker.services import ClientAdminServices
from rmq.errors import RemotingTimeoutError, RequestRefused
from rmq.net.codec import RemotingCommand, body_bytes
from rmq.protocol.admin_body import encode_with_mq_tables
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.fields import str_field
from rmq.protocol.record import decode_msg_id
from rmq.protocol.running_info import (
    BROKER_NAME,
    CLIENT_ID,
    CONSUMER_GROUP,
    GROUP_GET_NUMS,
    IS_ORDER,
    MSG_ID,
    PRODUCER_GROUP,
    STATS_KEY,
    STATS_NAME,
    TOPIC,
    group_stats_key,
)

log = logging.getLogger("rmq.broker")

# How long a forwarded request waits for the client (RocketMQ's Broker2Client.callClient: 10 s): a
# directly consumed message runs the client's listener first
CALL_CLIENT_TIMEOUT = 10.0


class ClientAdminProcessor(Processor[ClientAdminServices]):
    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.GET_PRODUCER_CONNECTION_LIST: self.get_producer_connection_list,
            RequestCode.GET_CONSUMER_RUNNING_INFO: self.get_consumer_running_info,
            RequestCode.CONSUME_MESSAGE_DIRECTLY: self.consume_message_directly,
            RequestCode.VIEW_BROKER_STATS_DATA: self.view_broker_stats_data,
            RequestCode.GET_BROKER_CONSUME_STATS: self.get_broker_consume_stats,
        }

    def get_producer_connection_list(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        group = str_field(request.ext_fields, PRODUCER_GROUP)
        producers = self.controller.client_manager.producers.connections(group)
        if not producers:
            raise RequestRefused(ResponseCode.SYSTEM_ERROR, f"the producer group[{group}] not exist")
        body = {
            "connectionSet": [
                {
                    "clientId": info.client_id,
                    "clientAddr": getattr(info.channel, "remote_address", ""),
                    "language": info.language,
                    "version": info.version,
                }
                for info in producers
            ]
        }
        return success(request, body=json.dumps(body, separators=(",", ":")).encode())

    def get_consumer_running_info(self, channel: Any, request: RemotingCommand) -> RemotingCommand | None:
        return self._call_consumer(channel, request, b"")

    def consume_message_directly(self, channel: Any, request: RemotingCommand) -> RemotingCommand | None:
        msg_id = str_field(request.ext_fields, MSG_ID)
        try:
            _, _, offset = decode_msg_id(msg_id)
        except (ValueError, TypeError):
            raise RequestRefused(
                ResponseCode.SYSTEM_ERROR,
                f"msgId {msg_id!r} is not a broker message id (32 hex digits: store ip, port, CommitLog offset)",
            ) from None
        record = self.controller.store.look_message_by_offset(offset) if offset >= 0 else None
        if record is None:
            raise RequestRefused(
                ResponseCode.SYSTEM_ERROR, f"no message with id {msg_id} on {self.controller.config.broker_name}"
            )
        request.ext_fields[BROKER_NAME] = self.controller.config.broker_name
        topic = request.ext_fields.get(TOPIC)
        config = self.controller.topic_config_manager.select_topic_config(topic) if topic else None
        if config is not None:
            request.ext_fields["topicSysFlag"] = str(config.topic_sys_flag)
        return self._call_consumer(channel, request, bytes(record))

    def _call_consumer(self, channel: Any, request: RemotingCommand, body: bytes) -> RemotingCommand | None:
        """Forward ``request`` to the client it names and answer ``channel`` with its answer later."""
        group = str_field(request.ext_fields, CONSUMER_GROUP)
        client_id = str_field(request.ext_fields, CLIENT_ID)
        info = self.controller.client_manager.consumers.find_channel(group, client_id)
        # a closed connection is refused here: its callback would answer before this handler returned
        if info is None or not getattr(info.channel, "is_active", True):
            raise RequestRefused(ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online")
        if not hasattr(info.channel, "invoke_async"):  # a 5.x client through the gRPC endpoint (rmq.proxy)
            raise RequestRefused(
                ResponseCode.SYSTEM_ERROR,
                f"The Consumer <{group}> <{client_id}> is a gRPC (5.x) client: it answers no remoting request",
            )
        forwarded = RemotingCommand.request(request.code, dict(request.ext_fields), body)

        def relay(answer: RemotingCommand | None, error: BaseException | None) -> None:
            if answer is not None:
                response = RemotingCommand.response_to(
                    request, answer.code, remark=answer.remark, body=body_bytes(answer.body)
                )
            elif isinstance(error, RemotingTimeoutError):
                response = RemotingCommand.response_to(
                    request, ResponseCode.CONSUME_MSG_TIMEOUT, f"consumer <{group}> <{client_id}> Timeout: {error}"
                )
            else:
                response = RemotingCommand.response_to(
                    request, ResponseCode.SYSTEM_ERROR, f"invoke consumer <{group}> <{client_id}> Exception: {error}"
                )
            channel.send_response(response)

        info.channel.invoke_async(forwarded, CALL_CLIENT_TIMEOUT, relay)
        return None

    def view_broker_stats_data(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        name = str_field(request.ext_fields, STATS_NAME)
        key = str_field(request.ext_fields, STATS_KEY)
        if name not in STATS_NAMES:
            raise RequestRefused(
                ResponseCode.SYSTEM_ERROR, f"The stats <{name}> <{key}> not exist: rmq keeps {', '.join(STATS_NAMES)}"
            )
        data = self.controller.broker_stats.view(name, key)
        if data is None:
            raise RequestRefused(ResponseCode.SYSTEM_ERROR, f"The stats <{name}> <{key}> not exist")
        return success(request, body=json.dumps(data, separators=(",", ":")).encode())

    def get_broker_consume_stats(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        """Every subscription group's ConsumeStats on the topics it has offsets on (4.x's
        fetchAllConsumeStatsInBroker): over each topic's write queues, only ordered topics with
        isOrder, and an online group's only where it subscribes."""
        c = self.controller
        only_ordered = request.ext_fields.get(IS_ORDER, "false").lower() == "true"
        groups, total_diff = [], 0
        for group in sorted(c.subscription_group_manager.subscription_group_table()):
            online = c.client_manager.consumers.get_consumer_group_info(group)
            stats = []
            for topic in sorted(c.consumer_offset_manager.which_topic_by_consumer(group)):
                config = c.topic_config_manager.select_topic_config(topic)
                if config is None or (only_ordered and not config.order):
                    continue
                if online is not None and online.subscriptions and topic not in online.subscriptions:
                    continue
                rows = queue_offsets(
                    c.store, c.consumer_offset_manager, c.config.broker_name, group, topic, config.write_queue_nums
                )
                total_diff += sum(r["brokerOffset"] - r["consumerOffset"] for r in rows.values())
                tps = c.broker_stats.view(GROUP_GET_NUMS, group_stats_key(topic, group))
                consume_tps = tps["statsMinute"]["tps"] if tps is not None else 0.0
                stats.append(encode_with_mq_tables({"consumeTps": consume_tps}, {"offsetTable": rows}).decode())
            groups.append(f"{{{json.dumps(group)}:[{','.join(stats)}]}}")
        # a list of maps holding queue-keyed tables: assembled from encode_with_mq_tables' objects
        fields = {"brokerAddr": c.broker_addr, "totalDiff": total_diff, "totalInflightDiff": 0}
        parts = [f"{json.dumps(k)}:{json.dumps(v)}" for k, v in fields.items()]
        body = "{" + ",".join([*parts, f'"consumeStatsList":[{",".join(groups)}]']) + "}"
        return success(request, body=body.encode())
