"""Consumer group configs changed by an operator (``rmq-admin group``, mqadmin's updateSubGroup and
deleteSubGroup), as RocketMQ's AdminBrokerProcessor takes them:

    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200)  body: SubscriptionGroupConfig JSON (groupName,
        consumeEnable, consumeFromMinEnable, consumeBroadcastEnable, retryQueueNums, retryMaxTimes,
        brokerId, whichBrokerWhenConsumeSlowly, notifyConsumerIdsChangedEnable, 5.x's
        consumeMessageOrderly); the whole config: a field left out takes its default, as in 4.x
    DELETE_SUBSCRIPTIONGROUP (207)  {groupName, removeOffset (4.x) / cleanOffset (5.x)}

An illegal group name or field is refused with INVALID_PARAMETER and the reason (4.x answers an
illegal name so); nothing is changed then. Both are refused on a slave, whose groups are copied
from its master every 10 s (``rmq.broker.slave_sync``) and would be overwritten. The reads (201,
352) are ``admin_broker``'s.
"""

from __future__ import annotations

import logging
from typing import Any

from rmq.broker.config import BrokerRole
from rmq.broker.processor.base import Handler, Processor, success
from rmq.broker.services import SubscriptionGroupServices
from rmq.broker.subscription_group import parse_subscription_group
from rmq.errors import RequestRefused
from rmq.net.codec import RemotingCommand, body_bytes
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.fields import bool_field, json_body, str_field

log = logging.getLogger("rmq.broker")


class SubscriptionGroupProcessor(Processor[SubscriptionGroupServices]):
    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: self.update_and_create_subscription_group,
            RequestCode.DELETE_SUBSCRIPTIONGROUP: self.delete_subscription_group,
        }

    def _refuse_on_slave(self) -> None:
        if self.controller.config.broker_role is BrokerRole.SLAVE:
            raise RequestRefused(
                ResponseCode.NO_PERMISSION,
                "a slave broker's consumer groups are copied from its master: send this to the master",
            )

    def update_and_create_subscription_group(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        self._refuse_on_slave()
        try:
            config = parse_subscription_group(json_body(body_bytes(request.body)))
        except ValueError as e:
            raise RequestRefused(ResponseCode.INVALID_PARAMETER, f"subscription group config refused: {e}") from None
        self.controller.subscription_group_manager.update_subscription_group_config(config)
        log.info("subscription group %s set by %s", config.group_name, getattr(channel, "remote_address", "?"))
        return success(request)

    def delete_subscription_group(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        """Forget the group's config (and with removeOffset/cleanOffset its offsets). A group that
        is still consumed is created again with the defaults at its next pull when
        autoCreateSubscriptionGroup is on, as in RocketMQ."""
        self._refuse_on_slave()
        ext = request.ext_fields
        group = str_field(ext, "groupName")
        c = self.controller
        c.subscription_group_manager.delete_subscription_group_config(group)
        if bool_field(ext, "removeOffset") or bool_field(ext, "cleanOffset"):
            c.consumer_offset_manager.remove_offset(group)
        log.info("subscription group %s deleted by %s", group, getattr(channel, "remote_address", "?"))
        return success(request)
