"""LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42): queue locks of orderly consumers (RebalanceLockManager)."""

from __future__ import annotations

from typing import Any

from rmq.broker.processor.base import Handler, Processor, success
from rmq.broker.services import LockServices
from rmq.net.codec import RemotingCommand
from rmq.protocol.codes import RequestCode
from rmq.protocol.headers import lock_batch
from rmq.protocol.message_queue import encode_lock_batch_result


class LockProcessor(Processor[LockServices]):
    def handlers(self) -> dict[int, Handler]:
        return {RequestCode.LOCK_BATCH_MQ: self.lock_batch, RequestCode.UNLOCK_BATCH_MQ: self.unlock_batch}

    def lock_batch(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        """Body ``{"consumerGroup","clientId","mqSet"}`` -> ``{"lockOKMQSet"}``: the queues the client
        now holds (new, renewed, or lapsed from another client)."""
        body = lock_batch(request)
        locked = self.controller.rebalance_lock_manager.try_lock_batch(body.consumer_group, body.mqs, body.client_id)
        return success(request, body=encode_lock_batch_result(locked))

    def unlock_batch(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        body = lock_batch(request)
        self.controller.rebalance_lock_manager.unlock_batch(body.consumer_group, body.mqs, body.client_id)
        return success(request)
