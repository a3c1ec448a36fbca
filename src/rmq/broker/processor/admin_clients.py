"""Who is connected, and the broker's figures, as RocketMQ's AdminBrokerProcessor answers mqadmin
(bodies in ``rmq.protocol.running_info``):

    GET_PRODUCER_CONNECTION_LIST (204) {producerGroup} -> ProducerConnection; SYSTEM_ERROR when
                                        the group has no producer online (4.x's answer)
    GET_CONSUMER_RUNNING_INFO (307)     forwarded to the client ``clientId`` of ``consumerGroup``
    CONSUME_MESSAGE_DIRECTLY (309)      the record ``msgId`` points at, forwarded to that client with
                                        this broker's name (brokerName) and the topic's sysFlag
    VIEW_BROKER_STATS_DATA (315)        {statsName, statsKey} -> BrokerStatsData (rmq.broker.broker_stats)

A forwarded request goes out on the client's own connection; the admin's is answered with the
client's answer when it comes (the loop thread never waits), or CONSUME_MSG_TIMEOUT after
CALL_CLIENT_TIMEOUT, or SYSTEM_ERROR when the client is not online or its connection fails.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from rmq.broker.broker_stats import STATS_NAMES
from rmq.broker.processor.base import Handler, Processor, success
from rmq.broker.services import ClientAdminServices
from rmq.errors import RemotingTimeoutError, RequestRefused
from rmq.net.codec import RemotingCommand, body_bytes
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.fields import str_field
from rmq.protocol.record import decode_msg_id
from rmq.protocol.running_info import (
    BROKER_NAME,
    CLIENT_ID,
    CONSUMER_GROUP,
    MSG_ID,
    PRODUCER_GROUP,
    STATS_KEY,
    STATS_NAME,
    TOPIC,
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
        if info is None:
            raise RequestRefused(ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online")
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
