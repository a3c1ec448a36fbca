"""Requests a client sends to brokers and name servers, and how their answers are read
(RocketMQ's MQClientAPIImpl). Field names are those of docs/nameserver.md and docs/protocol.md.

Every method takes the address to ask; choosing it (master, name server rotation) is the
instance's business. Answers other than the expected codes raise ``ResponseError`` carrying the
code, the remark and the address; transport failures raise the ``RemotingError`` of rmq.net.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from typing import Any

from rmq.client.message import decode_messages
from rmq.client.results import PullResult, PullStatus
from rmq.errors import ResponseError
from rmq.net import RemotingClient, RemotingCommand
from rmq.net.codec import body_bytes
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.message import MAX_MESSAGE_SIZE
from rmq.protocol.message_queue import MessageQueue

log = logging.getLogger("rmq.client")

_PULL_STATUS: dict[int, PullStatus] = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


def check_response(response: RemotingCommand, addr: str, *ok_codes: int) -> RemotingCommand:
    """``response`` when its code is SUCCESS (or one of ``ok_codes``); ResponseError otherwise."""
    if response.code != ResponseCode.SUCCESS and response.code not in ok_codes:
        raise ResponseError(response.code, response.remark, addr)
    return response


def _ext_int(response: RemotingCommand, addr: str, key: str) -> int:
    value = response.ext_fields.get(key)
    if value is not None:
        try:
            return int(value)
        except ValueError:
            pass
    raise ResponseError(response.code, f"answer has no integer {key!r} (got {value!r})", addr)


def pull_result_from(
    response: RemotingCommand, addr: str, mq: MessageQueue, max_body_size: int = MAX_MESSAGE_SIZE
) -> PullResult:
    """The PullResult of a PULL_MESSAGE answer; messages decoded (not yet filtered by tag), bodies
    inflated up to ``max_body_size`` bytes."""
    status = _PULL_STATUS.get(response.code)
    if status is None:
        raise ResponseError(response.code, response.remark, addr)
    body = body_bytes(response.body)
    messages = decode_messages(body, mq.broker_name, max_body_size) if status is PullStatus.FOUND and body else []
    return PullResult(
        status,
        _ext_int(response, addr, "nextBeginOffset"),
        _ext_int(response, addr, "minOffset"),
        _ext_int(response, addr, "maxOffset"),
        messages,
        int(response.ext_fields.get("suggestWhichBrokerId", 0) or 0),
    )


class ClientAPI:
    """Typed requests over one RemotingClient."""

    def __init__(self, remoting: RemotingClient):
        self.remoting = remoting

    def _call(
        self, addr: str, code: int, ext: dict[str, Any], timeout: float, body: bytes = b"", ok_codes: Iterable[int] = ()
    ) -> RemotingCommand:
        response = self.remoting.invoke_sync(addr, RemotingCommand.request(code, ext, body), timeout)
        return check_response(response, addr, *ok_codes)

    # -- name server ----------------------------------------------------------------------------

    def get_route(self, namesrv_addr: str, topic: str, timeout: float) -> bytes | None:
        """The route body of ``topic``; None when the name server does not know the topic."""
        response = self._call(
            namesrv_addr,
            RequestCode.GET_ROUTEINFO_BY_TOPIC,
            {"topic": topic},
            timeout,
            ok_codes=(ResponseCode.TOPIC_NOT_EXIST,),
        )
        if response.code == ResponseCode.TOPIC_NOT_EXIST:
            return None
        return body_bytes(response.body)

    # -- clients --------------------------------------------------------------------------------

    def heartbeat(self, addr: str, body: bytes, timeout: float) -> None:
        self._call(addr, RequestCode.HEART_BEAT, {}, timeout, body)

    def unregister_client(
        self, addr: str, client_id: str, producer_group: str | None, consumer_group: str | None, timeout: float
    ) -> None:
        ext = {"clientID": client_id, "producerGroup": producer_group, "consumerGroup": consumer_group}
        self._call(addr, RequestCode.UNREGISTER_CLIENT, ext, timeout)

    def check_client_config(
        self, addr: str, client_id: str, group: str, subscription: dict[str, Any], timeout: float
    ) -> None:
        """CHECK_CLIENT_CONFIG: ResponseError when the broker cannot filter by ``subscription``."""
        body = json.dumps({"clientId": client_id, "group": group, "subscriptionData": subscription}).encode()
        self._call(addr, RequestCode.CHECK_CLIENT_CONFIG, {}, timeout, body)

    def get_consumer_id_list(self, addr: str, group: str, timeout: float) -> list[str]:
        response = self._call(addr, RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group}, timeout)
        return list(json.loads(body_bytes(response.body) or b"{}").get("consumerIdList") or [])

    # -- offsets --------------------------------------------------------------------------------

    def query_consumer_offset(self, addr: str, group: str, mq: MessageQueue, timeout: float) -> int:
        """The group's committed offset of ``mq``; -1 when it has none (QUERY_NOT_FOUND)."""
        ext = {"consumerGroup": group, "topic": mq.topic, "queueId": mq.queue_id}
        response = self._call(
            addr, RequestCode.QUERY_CONSUMER_OFFSET, ext, timeout, ok_codes=(ResponseCode.QUERY_NOT_FOUND,)
        )
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return -1
        return _ext_int(response, addr, "offset")

    def update_consumer_offset(self, addr: str, group: str, mq: MessageQueue, offset: int, timeout: float) -> None:
        ext = {"consumerGroup": group, "topic": mq.topic, "queueId": mq.queue_id, "commitOffset": offset}
        self._call(addr, RequestCode.UPDATE_CONSUMER_OFFSET, ext, timeout)

    def get_max_offset(self, addr: str, mq: MessageQueue, timeout: float) -> int:
        response = self._call(addr, RequestCode.GET_MAX_OFFSET, {"topic": mq.topic, "queueId": mq.queue_id}, timeout)
        return _ext_int(response, addr, "offset")

    def get_min_offset(self, addr: str, mq: MessageQueue, timeout: float) -> int:
        response = self._call(addr, RequestCode.GET_MIN_OFFSET, {"topic": mq.topic, "queueId": mq.queue_id}, timeout)
        return _ext_int(response, addr, "offset")

    def search_offset(self, addr: str, mq: MessageQueue, timestamp_ms: int, timeout: float) -> int:
        ext = {"topic": mq.topic, "queueId": mq.queue_id, "timestamp": timestamp_ms}
        response = self._call(addr, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, ext, timeout)
        return _ext_int(response, addr, "offset")

    # -- consuming ------------------------------------------------------------------------------

    def pull_async(
        self,
        addr: str,
        ext: dict[str, Any],
        timeout: float,
        mq: MessageQueue,
        callback: Callable[[PullResult | None, BaseException | None], None],
        max_body_size: int = MAX_MESSAGE_SIZE,
    ) -> None:
        """PULL_MESSAGE; ``callback(result, None)`` or ``callback(None, error)`` on the loop thread.
        Compressed bodies are inflated up to ``max_body_size`` bytes (the client's maxMessageSize)."""

        def done(response: RemotingCommand | None, error: BaseException | None) -> None:
            if response is not None:
                try:
                    result = pull_result_from(response, addr, mq, max_body_size)
                except Exception as exc:
                    callback(None, exc)
                    return
                callback(result, None)
            else:
                callback(None, error)

        self.remoting.invoke_callback(addr, RemotingCommand.request(RequestCode.PULL_MESSAGE, ext), timeout, done)

    def send_back(
        self,
        addr: str,
        group: str,
        commit_log_offset: int,
        origin_msg_id: str,
        origin_topic: str,
        delay_level: int,
        max_reconsume_times: int,
        timeout: float,
    ) -> None:
        ext = {
            "offset": commit_log_offset,
            "group": group,
            "delayLevel": delay_level,
            "originMsgId": origin_msg_id,
            "originTopic": origin_topic,
            "unitMode": False,
            "maxReconsumeTimes": max_reconsume_times,
        }
        self._call(addr, RequestCode.CONSUMER_SEND_MSG_BACK, ext, timeout)

    def lock_batch(
        self, addr: str, group: str, client_id: str, mqs: Iterable[MessageQueue], timeout: float
    ) -> set[MessageQueue]:
        body = json.dumps(
            {"consumerGroup": group, "clientId": client_id, "mqSet": [mq.to_json() for mq in mqs]}
        ).encode()
        response = self._call(addr, RequestCode.LOCK_BATCH_MQ, {}, timeout, body)
        locked = json.loads(body_bytes(response.body) or b"{}").get("lockOKMQSet") or []
        return {MessageQueue.from_json(o) for o in locked}

    def unlock_batch(self, addr: str, group: str, client_id: str, mqs: Iterable[MessageQueue], timeout: float) -> None:
        body = json.dumps(
            {"consumerGroup": group, "clientId": client_id, "mqSet": [mq.to_json() for mq in mqs]}
        ).encode()
        self._call(addr, RequestCode.UNLOCK_BATCH_MQ, {}, timeout, body)
