"""What rmq-admin (and RocketMQ's mqadmin) asks a broker, with RocketMQ's codes and body shapes
(AdminBrokerProcessor):

    GET_ALL_TOPIC_CONFIG (21)           -> topics.json's object (TopicConfigSerializeWrapper)
    GET_BROKER_RUNTIME_INFO (28)        -> {"table": {name: value}} (the keys of RocketMQ's that rmq can
                                           answer with a real value, as brokerStatus shows them)
    GET_ALL_CONSUMER_OFFSET (43)        -> consumerOffset.json's object (ConsumerOffsetSerializeWrapper)
    GET_ALL_DELAY_OFFSET (45)           -> delayOffset.json's object
    GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201) -> subscriptionGroup.json's object (SubscriptionGroupWrapper)
    GET_SUBSCRIPTIONGROUP_CONFIG (352) {group} -> that group's object; SUBSCRIPTION_GROUP_NOT_EXIST
    GET_TOPIC_STATS_INFO (202) {topic}  -> TopicStatsTable: per write queue min/max offset, last store time
    GET_CONSUMER_CONNECTION_LIST (203) {consumerGroup} -> ConsumerConnection; CONSUMER_NOT_ONLINE
    GET_CONSUME_STATS (208) {consumerGroup, topic?} -> ConsumeStats: per read queue broker/consumer offset
    DELETE_TOPIC_IN_BROKER (215) {topic}
    INVOKE_BROKER_TO_RESET_OFFSET (222) {topic, group, timestamp, isForce} -> ResetOffsetBody
    QUERY_TOPIC_CONSUME_BY_WHO (300) {topic} -> {"groupList": [...]}

The four GET_ALL_* answers are what a slave copies from its master every 10 s
(``rmq.broker.slave_sync``): the managers' file objects, as RocketMQ's are.

Reset offset differs from RocketMQ on purpose: RocketMQ only tells the group's online consumers
(RESET_CONSUMER_CLIENT_OFFSET, which they apply and commit) and answers CONSUMER_NOT_ONLINE when
there are none, leaving mqadmin to fall back to UPDATE_CONSUMER_OFFSET per queue. rmq commits the
new offsets itself, so one request works whether the group is online or not, and still tells the
online consumers, so they do not overwrite the reset with their next commit.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from typing import TYPE_CHECKING, Any

from rmq.broker.config import BrokerRole
from rmq.broker.delay import delay_level_to_queue_id
from rmq.broker.processor.base import Handler, Processor, success
from rmq.broker.runtime_stats import human_bytes
from rmq.broker.services import AdminBrokerServices
from rmq.errors import RequestRefused
from rmq.net.codec import RemotingCommand
from rmq.net.frame import VERSION
from rmq.protocol.admin_body import (
    encode_reset_offset_body_for_c,
    encode_with_mq_tables,
)
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.fields import str_field
from rmq.protocol.headers import reset_offset_header
from rmq.protocol.message import SCHEDULE_TOPIC, topic_error
from rmq.protocol.message_queue import MessageQueue
from rmq.protocol.proxy import RUNTIME_GRPC_PORT
from rmq.protocol.replica import RUNTIME_CONTROLLER_ADDR

if TYPE_CHECKING:
    from rmq.broker.consumer_offset import ConsumerOffsetManager
    from rmq.store import MessageStore

log = logging.getLogger("rmq.broker")

# timestamp of INVOKE_BROKER_TO_RESET_OFFSET meaning "the end of every queue"
RESET_TO_MAX_OFFSET = -1
# the language a C++ client reports; it reads ResetOffsetBodyForC
CPP_LANGUAGE = "CPP"


def queue_offsets(
    store: MessageStore, offsets: ConsumerOffsetManager, broker_name: str, group: str, topic: str, queue_nums: int
) -> dict[MessageQueue, dict[str, int]]:
    """ConsumeStats' offsetTable rows (OffsetWrapper) of a group on the first ``queue_nums`` queues
    of a topic: the queue's end, the group's committed offset, the store time of the last message
    it consumed."""
    committed = offsets.query_offsets(group, topic)
    rows = {}
    for queue_id in range(queue_nums):
        consumer_offset = max(0, committed.get(queue_id, 0))
        last = store.get_message_store_timestamp(topic, queue_id, consumer_offset - 1) if consumer_offset > 0 else 0
        rows[MessageQueue(topic, broker_name, queue_id)] = {
            "brokerOffset": max(0, store.get_max_offset_in_queue(topic, queue_id)),
            "consumerOffset": consumer_offset,
            "lastTimestamp": max(0, last),
        }
    return rows


def _json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


class AdminBrokerProcessor(Processor[AdminBrokerServices]):
    def handlers(self) -> dict[int, Handler]:
        return {
            RequestCode.GET_ALL_TOPIC_CONFIG: self.get_all_topic_config,
            RequestCode.GET_BROKER_RUNTIME_INFO: self.get_broker_runtime_info,
            RequestCode.GET_ALL_CONSUMER_OFFSET: self.get_all_consumer_offset,
            RequestCode.GET_ALL_DELAY_OFFSET: self.get_all_delay_offset,
            RequestCode.GET_TIMER_CHECKPOINT: self.get_timer_checkpoint,
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: self.get_all_subscription_group_config,
            RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG: self.get_subscription_group_config,
            RequestCode.GET_TOPIC_STATS_INFO: self.get_topic_stats_info,
            RequestCode.GET_CONSUMER_CONNECTION_LIST: self.get_consumer_connection_list,
            RequestCode.GET_CONSUME_STATS: self.get_consume_stats,
            RequestCode.DELETE_TOPIC_IN_BROKER: self.delete_topic,
            RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: self.reset_offset,
            RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: self.query_topic_consume_by_who,
        }

    def _queue(self, topic: str, queue_id: int) -> MessageQueue:
        return MessageQueue(topic, self.controller.config.broker_name, queue_id)

    def _topic_config(self, topic: str):
        config = self.controller.topic_config_manager.select_topic_config(topic)
        if config is None:
            raise RequestRefused(
                ResponseCode.TOPIC_NOT_EXIST,
                f"topic {topic!r} does not exist on broker {self.controller.config.broker_name}",
            )
        return config

    def _refuse_on_slave(self) -> None:
        if self.controller.config.broker_role is BrokerRole.SLAVE:
            raise RequestRefused(
                ResponseCode.SYSTEM_ERROR,
                "a slave broker's topics and offsets are copied from its master: send this to the master",
            )

    # -- reads ----------------------------------------------------------------------------------

    def get_all_topic_config(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        return success(request, body=_json(self.controller.topic_config_manager.encode()))

    def get_all_consumer_offset(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        return success(request, body=_json(self.controller.consumer_offset_manager.encode()))

    def get_all_delay_offset(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        return success(request, body=_json(self.controller.delay_offset_manager.encode()))

    def get_timer_checkpoint(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        return success(request, body=_json(self.controller.timer_message_store.checkpoint.encode()))

    def get_all_subscription_group_config(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        return success(request, body=_json(self.controller.subscription_group_manager.encode()))

    def get_subscription_group_config(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        group = str_field(request.ext_fields, "group")
        config = self.controller.subscription_group_manager.find_subscription_group_config(group)
        if config is None:
            raise RequestRefused(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"consumer group {group!r} does not exist on this broker"
            )
        return success(request, body=_json(config.to_json()))

    def get_broker_runtime_info(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        c = self.controller
        store = c.store
        table = {
            "brokerVersionDesc": "rmq",
            "brokerVersion": VERSION,
            "brokerName": c.config.broker_name,
            "brokerRole": c.config.broker_role.value,
            # the master term this broker's log is in (rmq's key: a slave shows its master's)
            "epoch": store.epoch,
            "commitLogMinOffset": store.get_min_phy_offset(),
            "commitLogMaxOffset": store.get_max_phy_offset(),
            "commitLogDiskRatio": f"{store.disk_used_ratio():.4f}",
            "earliestMessageTimeStamp": store.get_earliest_message_time(),
            # msyncs of the CommitLog so far (SYNC_FLUSH: group commit rounds), not a RocketMQ key;
            # MappedFileQueue.flush_count is a readonly attribute that _store.pyi does not declare yet
            "commitLogFlushRounds": (
                store.group_commit_flushes if store.sync_flush else store.commit_log.flush_count  # type: ignore[attr-defined]
            ),
        }
        if store.sync_flush:  # of those rounds, the loop's own and the flush thread's (rmq's keys)
            inline_rounds = store.group_commit_inline_rounds
            table["flushInlineRounds"] = inline_rounds
            table["flushThreadRounds"] = store.group_commit_flushes - inline_rounds
        if c.config.enable_controller_mode:  # rmq's key: rmq-admin broker promote asks these controllers
            table[RUNTIME_CONTROLLER_ADDR] = c.config.controller_addr or ""
        if c.config.enable_grpc:  # rmq's key: where its gRPC endpoint is, for another broker's routes
            table[RUNTIME_GRPC_PORT] = c.config.grpc_server_port
        table.update(c.runtime_stats.table())
        if c.send_lane is not None:  # frames the compiled send lane served and left to the processors (rmq's keys)
            table["sendLaneServed"] = c.send_lane.served
            table["sendLaneLeft"] = c.send_lane.left
        if c.pull_lane is not None:  # and the pulls it handed to the pull lane
            table["pullLaneServed"] = c.pull_lane.served
            table["pullLaneLeft"] = c.pull_lane.left
        # the send queue is the sends stored and not yet answered (rmq.broker.processor.send); pulls
        # are served as they are read (a parked long poll waits for messages, not for a thread)
        table["sendThreadPoolQueueSize"] = store.commit_queue_size
        table["sendThreadPoolQueueCapacity"] = c.config.send_thread_pool_queue_capacity
        table["pullThreadPoolQueueSize"] = 0
        # RocketMQ: how long the put lock has been held; here how long the disk keeps sends waiting
        table["pageCacheLockTimeMills"] = int(store.disk_wait_seconds * 1000)
        commit_log_dir = os.path.join(store.store_path, "commitlog")
        try:
            disk = shutil.disk_usage(commit_log_dir if os.path.isdir(commit_log_dir) else store.store_path)
            table["commitLogDirCapacity"] = f"Total : {human_bytes(disk.total)}, Free : {human_bytes(disk.free)}."
        except OSError:
            pass  # the store's directory is gone: the key is left out rather than made up
        max_phy = store.get_max_phy_offset()
        table["remainHowManyDataToFlush"] = human_bytes(max(0, max_phy - store.commit_log.get_flushed_where()))
        # a master dispatches each record in its put; a slave dispatches what it replicated after
        table["dispatchBehindBytes"] = max(0, max_phy - store.reput_offset) if c.is_slave else 0
        for level, offset in c.delay_offset_manager.offset_table().items():
            max_offset = store.get_max_offset_in_queue(SCHEDULE_TOPIC, delay_level_to_queue_id(level))
            table[f"scheduleMessageOffset_{level}"] = f"{offset},{max_offset}"
        return success(request, body=_json({"table": {k: str(v) for k, v in table.items()}}))

    def get_topic_stats_info(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        topic = str_field(request.ext_fields, "topic")
        config = self._topic_config(topic)
        store = self.controller.store
        table = {}
        for queue_id in range(config.write_queue_nums):
            max_offset = max(0, store.get_max_offset_in_queue(topic, queue_id))
            last = store.get_message_store_timestamp(topic, queue_id, max_offset - 1) if max_offset > 0 else 0
            table[self._queue(topic, queue_id)] = {
                "lastUpdateTimestamp": max(0, last),
                "maxOffset": max_offset,
                "minOffset": max(0, store.get_min_offset_in_queue(topic, queue_id)),
            }
        return success(request, body=encode_with_mq_tables({}, {"offsetTable": table}))

    def get_consume_stats(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        c = self.controller
        group = str_field(request.ext_fields, "consumerGroup")
        topic = request.ext_fields.get("topic") or ""
        topics = {topic} if topic else c.consumer_offset_manager.which_topic_by_consumer(group)
        online = c.client_manager.consumers.get_consumer_group_info(group)
        table = {}
        for name in sorted(topics):
            config = c.topic_config_manager.select_topic_config(name)
            if config is None:
                continue
            if online is not None and online.subscriptions and name not in online.subscriptions:
                continue  # RocketMQ: an online group reports only what it subscribes to
            table.update(
                queue_offsets(
                    c.store, c.consumer_offset_manager, c.config.broker_name, group, name, config.read_queue_nums
                )
            )
        return success(request, body=encode_with_mq_tables({"consumeTps": 0.0}, {"offsetTable": table}))

    def get_consumer_connection_list(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        group = str_field(request.ext_fields, "consumerGroup")
        info = self.controller.client_manager.consumers.get_consumer_group_info(group)
        if info is None or not info.channels:
            raise RequestRefused(ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{group}] not online")
        body = {
            "connectionSet": [
                {
                    "clientId": ci.client_id,
                    "clientAddr": getattr(ci.channel, "remote_address", ""),
                    "language": ci.language,
                    "version": ci.version,
                }
                for ci in info.channels.values()
            ],
            "subscriptionTable": {t: sub.to_json() for t, sub in info.subscriptions.items()},
            "consumeType": info.consume_type.name,
            "messageModel": info.message_model.name,
            "consumeFromWhere": info.consume_from_where.name,
        }
        return success(request, body=_json(body))

    def query_topic_consume_by_who(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        topic = str_field(request.ext_fields, "topic")
        c = self.controller
        groups = c.client_manager.consumers.query_topic_consume_by_who(topic)
        groups |= c.consumer_offset_manager.which_group_by_topic(topic)
        return success(request, body=_json({"groupList": sorted(groups)}))

    # -- changes --------------------------------------------------------------------------------

    def delete_topic(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        """Forget the topic's config (the name servers hear at once through the topic manager's
        change hook) and every group's offsets on it, and delete its ConsumeQueue files (their space
        comes back now). Its records in the CommitLog age out with retention."""
        self._refuse_on_slave()
        topic = str_field(request.ext_fields, "topic")
        reason = topic_error(topic)
        if reason is not None:
            # no such topic can exist, and its name must not reach a path (found by fuzz_broker.py)
            raise RequestRefused(ResponseCode.MESSAGE_ILLEGAL, reason)
        c = self.controller
        if c.topic_config_manager.delete_topic(topic):
            log.info("topic %s deleted by %s", topic, getattr(channel, "remote_address", "?"))
        c.consumer_offset_manager.clean_offset_by_topic(topic)
        c.store.delete_topic(topic)
        return success(request)

    def reset_offset(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        """Move a group's offsets on a topic to the first message stored at or after ``timestamp``
        (ms; -1: the end). Without ``isForce`` an offset only moves back. Answers the new offsets."""
        self._refuse_on_slave()
        c = self.controller
        header = reset_offset_header(request)  # the one the ACL check read
        topic, group, timestamp, force = header.topic, header.group, header.timestamp, header.is_force
        config = self._topic_config(topic)
        committed = c.consumer_offset_manager.query_offsets(group, topic)
        online = c.client_manager.consumers.get_consumer_group_info(group)
        if not committed and (online is None or not online.channels):
            raise RequestRefused(
                ResponseCode.SYSTEM_ERROR,
                f"consumer group {group!r} has no offsets on topic {topic!r} and no consumer online: nothing to reset",
            )
        offsets: dict[MessageQueue, int] = {}
        for queue_id in range(config.write_queue_nums):
            if timestamp == RESET_TO_MAX_OFFSET:
                target = c.store.get_max_offset_in_queue(topic, queue_id)
            else:
                target = c.store.get_offset_in_queue_by_time(topic, queue_id, timestamp)
            current = committed.get(queue_id, -1)
            offsets[self._queue(topic, queue_id)] = (
                max(0, target) if force or current < 0 or target < current else current
            )
        c.consumer_offset_manager.reset_offset(group, topic, {mq.queue_id: o for mq, o in offsets.items()})
        if online is not None:
            self._tell_consumers(online, topic, group, timestamp, offsets)
        log.info(
            "offsets of %s on %s reset to timestamp %d by %s: %s",
            group,
            topic,
            timestamp,
            getattr(channel, "remote_address", "?"),
            {mq.queue_id: o for mq, o in offsets.items()},
        )
        return success(request, body=encode_with_mq_tables({}, {"offsetTable": offsets}))

    def _tell_consumers(self, online, topic: str, group: str, timestamp: int, offsets: dict[MessageQueue, int]) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET to each online consumer, oneway, in the body its language reads."""
        ext = {"topic": topic, "group": group, "timestamp": timestamp, "isForce": "true"}
        java_body = encode_with_mq_tables({}, {"offsetTable": offsets})
        for info in online.channels.values():
            body = encode_reset_offset_body_for_c(offsets) if info.language == CPP_LANGUAGE else java_body
            info.channel.send_oneway(RemotingCommand.request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, ext, body))
