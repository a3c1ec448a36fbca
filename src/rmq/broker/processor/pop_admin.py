"""What ``rmq-admin consumer progress`` shows of a POP group (rmq's own request; RocketMQ's
ConsumeStats has no room for it): per queue the group pops from, the queue's end, the group's
consume offset, the messages popped and still invisible (neither acked nor past their invisible
time), and those popped and no longer invisible. docs/pop.md#progress.

    GET_POP_CONSUME_STATS (9105) {consumerGroup, topic?}
        -> {"offsetTable": {MessageQueue: {brokerOffset, consumerOffset, invisible, acked}}}

Without a topic: every topic the group has offsets on (a POP moves the consume offset as it pops);
with one: that topic; and the group's POP retry topic of each, where it exists.
A retry topic's queue holds the messages that came back unacked: its lag (brokerOffset -
consumerOffset) and its invisible ones are the group's retrying messages.

``acked`` is popped minus invisible: what a consumer acked, and what came back unacked after its
invisible time (then counted again in the retry topic's row). ``invisible`` is read from the
checkpoints the revive service has read (it reads its queues every reviveInterval) and from the FIFO
batches still locked.
"""

from __future__ import annotations

from typing import Any

from rmq._clock import now_ms
from rmq.broker.processor.base import Handler, Processor, success
from rmq.broker.services import PopAdminServices
from rmq.net.codec import RemotingCommand
from rmq.protocol.admin_body import encode_with_mq_tables
from rmq.protocol.codes import RequestCode
from rmq.protocol.fields import str_field
from rmq.protocol.message_queue import MessageQueue
from rmq.protocol.pop import pop_retry_topic


class PopAdminProcessor(Processor[PopAdminServices]):
    def handlers(self) -> dict[int, Handler]:
        return {RequestCode.GET_POP_CONSUME_STATS: self.get_pop_consume_stats}

    def get_pop_consume_stats(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        c = self.controller
        group = str_field(request.ext_fields, "consumerGroup")
        topic = request.ext_fields.get("topic") or ""
        offsets = c.consumer_offset_manager
        popped = {topic} if topic else offsets.which_topic_by_consumer(group)
        # a retry topic the group has not popped from yet has no offsets: named by its topic
        topics = popped | {pop_retry_topic(name, group) for name in popped}
        in_flight = c.pop_service.in_flight_by_queue(group)
        order_info = c.pop_service.order_info
        now = now_ms()
        table = {}
        for name in sorted(topics):
            config = c.topic_config_manager.select_topic_config(name)
            if config is None:
                continue
            for queue_id in range(config.read_queue_nums):
                consumer_offset = max(0, offsets.query_offset(group, name, queue_id))
                invisible = in_flight.get((name, queue_id), 0)
                done = consumer_offset
                batch = order_info.get(group, name, queue_id)
                if batch is not None and batch.blocks(now):
                    # a FIFO queue's consume offset stays at its batch's first unacked message
                    invisible += len(batch.offsets) - len(batch.acked)
                    done = max(done, batch.next_offset)
                table[MessageQueue(name, c.config.broker_name, queue_id)] = {
                    "brokerOffset": max(0, c.store.get_max_offset_in_queue(name, queue_id)),
                    "consumerOffset": consumer_offset,
                    "invisible": invisible,
                    "acked": max(0, done - invisible),
                }
        return success(request, body=encode_with_mq_tables({}, {"offsetTable": table}))
