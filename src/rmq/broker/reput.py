"""Store a copy of a stored message somewhere else: a send-back into ``%RETRY%``/``%DLQ%``, a delayed
message whose time has come. Body, flag, sysFlag, born time and born host travel with it; the store
writes its own store time and host. Pulls parked on the destination queue are woken.
"""

from __future__ import annotations

from typing import Any

from rmq.message import encode_properties
from rmq.store import PutMessageResult, StoredMessage, ipv4_to_int


def reput_message(controller: Any, message: StoredMessage, topic: str, queue_id: int,
                  properties: dict[str, str], reconsume_times: int) -> PutMessageResult:
    """Put ``message`` as a new record of (topic, queue_id) with these properties. Never waits for
    the disk: RocketMQ's own re-puts are not WAIT_STORE_MSG_OK either."""
    born_ip, born_port = message.born_host
    result = controller.store.put_message(
        topic, queue_id, message.body, encode_properties(properties), sys_flag=message.sys_flag,
        born_timestamp=message.born_timestamp, flag=message.flag, reconsume_times=reconsume_times,
        born_host=ipv4_to_int(born_ip), born_port=born_port)
    if result.ok:
        controller.notify_message_arriving(topic, queue_id)
    return result
