"""LOCK_BATCH_MQ / UNLOCK_BATCH_MQ over the wire: ownership, release, expiry."""

from __future__ import annotations

import json
import time

from rmq.net.codec import RemotingCommand
from rmq.protocol.codes import RequestCode, ResponseCode

MQS = [{"topic": "T", "brokerName": "broker-a", "queueId": i} for i in range(3)]


def lock(client, broker, client_id: str, mqs=MQS, code=RequestCode.LOCK_BATCH_MQ) -> RemotingCommand:
    body = json.dumps({"consumerGroup": "G", "clientId": client_id, "mqSet": mqs}).encode()
    return client.invoke_sync(broker.broker_addr, RemotingCommand.request(code, body=body), timeout=3.0)


def locked(answer: RemotingCommand) -> list[int]:
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    return sorted(mq["queueId"] for mq in json.loads(bytes(answer.body))["lockOKMQSet"])


def test_one_holder_until_it_unlocks(broker, client):
    assert locked(lock(client, broker, "c1", MQS[:2])) == [0, 1]
    assert locked(lock(client, broker, "c2")) == [2]
    assert locked(lock(client, broker, "c1")) == [0, 1]  # renewal keeps them
    assert lock(client, broker, "c1", MQS[:1], RequestCode.UNLOCK_BATCH_MQ).code == ResponseCode.SUCCESS
    assert locked(lock(client, broker, "c2")) == [0, 2]


def test_a_lock_lapses_when_not_renewed(broker, client):
    broker.rebalance_lock_manager.lock_max_live_ms = 100
    assert locked(lock(client, broker, "c1")) == [0, 1, 2]
    assert locked(lock(client, broker, "c2")) == []
    time.sleep(0.15)
    assert locked(lock(client, broker, "c2")) == [0, 1, 2]


def test_malformed_body_is_refused(broker, client):
    request = RemotingCommand.request(RequestCode.LOCK_BATCH_MQ, body=b"{not json")
    answer = client.invoke_sync(broker.broker_addr, request, timeout=3.0)
    assert answer.code == ResponseCode.SYSTEM_ERROR and "malformed lock request body" in answer.remark
