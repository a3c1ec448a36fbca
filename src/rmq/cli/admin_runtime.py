"""``rmq-admin``'s commands for who is connected and what the cluster is doing (mqadmin's
producerConnection, consumerStatus, queryMsgById -g/-d and -s, statsAll, clusterRT,
queryMsgByOffset, printMsg), added to ``rmq.cli.admin``'s groups (``producer`` is this module's):

    rmq-admin producer connections GroupP [-t Topic]
    rmq-admin consumer running-info GroupC [--client-id ID] [--jstack]
    rmq-admin message consume-directly MSG_ID -t Topic -g GroupC --client-id ID
    rmq-admin message resend MSG_ID -t Topic
    rmq-admin message by-offset Topic broker-a 0 42
    rmq-admin message print Topic --begin 2024-05-01T12:00:00 [--end now] [--broker b --queue 0 --from-offset 10]
    rmq-admin cluster stats-all [-t Topic] [--active]
    rmq-admin broker consume-stats broker-a [--order] [--min-lag 100]
    rmq-admin cluster rt [-a 100] [-s 128] [-c Cluster]
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

import click

from rmq.cli.admin_base import (
    EXIT_FAILED,
    admin_command,
    emit,
    format_time,
    message_human,
    message_json,
    parse_timestamp,
    render_table,
)
from rmq.client.admin_client import AdminClient
from rmq.errors import AdminError, NotFound
from rmq.protocol.message_queue import MessageQueue
from rmq.protocol.running_info import CMResult


@click.group()
def producer() -> None:
    """Producer groups: who is connected."""


# the commands of nouns rmq.cli.admin has: gathered here, added to its groups by it
broker = click.Group("broker")
consumer = click.Group("consumer")
message = click.Group("message")
cluster = click.Group("cluster")


@admin_command(producer, "connections")
@click.argument("group")
@click.option(
    "-t", "--topic", "topic_name", default=None, help="Ask the brokers of this topic (default: every master)."
)
def producer_connections(admin: AdminClient, as_json: bool, group: str, topic_name: str | None) -> None:
    """GROUP's online producers (mqadmin producerConnection): client id, address, language, version."""
    rows = admin.producer_connections(group, topic_name)
    emit(
        as_json,
        rows,
        lambda: render_table(
            ["Client ID", "Address", "Language", "Version"],
            [[c["clientId"], c.get("clientAddr", "-"), c.get("language", "-"), c.get("version", "-")] for c in rows],
        ),
    )


def running_info_json(info: dict[str, Any]) -> dict[str, Any]:
    """ConsumerRunningInfo with its mqTable as a list of rows (JSON keys cannot be queues)."""
    table: dict[MessageQueue, dict[str, Any]] = info.get("mqTable") or {}
    queues = [
        {"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id, **pq}
        for mq, pq in sorted(table.items())
    ]
    return {**info, "mqTable": queues}


def running_info_human(client_id: str, info: dict[str, Any]) -> str:
    properties = info.get("properties") or {}
    lines = [f"Client {client_id}"]
    lines += [f"  {key:<32}: {value}" for key, value in sorted(properties.items())]
    subscriptions = render_table(
        ["Topic", "Expression", "Type"],
        [
            [s.get("topic"), s.get("subString", "*"), s.get("expressionType", "TAG")]
            for s in info.get("subscriptionSet") or []
        ],
    )
    queues = render_table(
        ["Topic", "Broker", "Queue", "Commit Offset", "Cached", "Cached Min", "Cached Max", "Locked", "Last Pull"],
        [
            [
                q["topic"],
                q["brokerName"],
                q["queueId"],
                q["commitOffset"],
                q["cachedMsgCount"],
                q["cachedMsgMinOffset"],
                q["cachedMsgMaxOffset"],
                "yes" if q["locked"] else "no",
                format_time(q["lastPullTimestamp"]),
            ]
            for q in info["mqTable"]
        ],
    )
    text = "\n".join(lines) + f"\n\n{subscriptions}\n\n{queues}"
    if info.get("jstack"):
        text += "\n\n" + info["jstack"]
    return text


@admin_command(consumer, "running-info")
@click.argument("group")
@click.option("--client-id", default=None, help="Only this client (default: every online consumer of GROUP).")
@click.option("--jstack", is_flag=True, help="Also each thread's stack in the client.")
def consumer_running_info(admin: AdminClient, as_json: bool, group: str, client_id: str | None, jstack: bool) -> None:
    """What GROUP's consumers say of themselves (mqadmin consumerStatus, GET_CONSUMER_RUNNING_INFO
    forwarded by a broker to the client): settings, subscriptions, and per queue held the committed
    offset, the messages cached, lock and last pull."""
    if client_id is None:
        client_ids = sorted(c["clientId"] for c in admin.consumer_connections(group)["connectionSet"])
    else:
        client_ids = [client_id]
    infos = {cid: running_info_json(admin.consumer_running_info(group, cid, jstack)) for cid in client_ids}
    emit(as_json, infos, lambda: "\n\n".join(running_info_human(cid, info) for cid, info in infos.items()))


@admin_command(message, "consume-directly")
@click.argument("msg_id")
@click.option("-t", "--topic", "topic_name", required=True, help="The message's topic.")
@click.option("-g", "--group", required=True, help="The consumer group.")
@click.option("--client-id", required=True, help="The consumer (a client id of `consumer connections`).")
def message_consume_directly(
    admin: AdminClient, as_json: bool, msg_id: str, topic_name: str, group: str, client_id: str
) -> None:
    """Hand message MSG_ID (a broker or client message id) to one consumer's listener now (mqadmin
    queryMsgById -g -d, CONSUME_MESSAGE_DIRECTLY): its offsets do not move and a failure is not
    retried. Exit 1 unless the listener consumed it."""
    result = admin.consume_message_directly(group, client_id, topic_name, msg_id)
    outcome = result.get("consumeResult")

    def human() -> str:
        text = f"{client_id} of {group}: {outcome} in {result.get('spentTimeMills', 0)} ms"
        return text + (f" ({result['remark']})" if result.get("remark") else "")

    emit(as_json, result, human)
    if outcome != CMResult.CR_SUCCESS.value:
        sys.exit(EXIT_FAILED)


@admin_command(message, "resend")
@click.argument("msg_id")
@click.option("-t", "--topic", "topic_name", required=True, help="The message's topic.")
def message_resend(admin: AdminClient, as_json: bool, msg_id: str, topic_name: str) -> None:
    """Send message MSG_ID of TOPIC again (mqadmin queryMsgById -s true): a new stored message with
    the same body, tags, keys and properties, the client message id included."""
    sent = admin.resend_message(topic_name, msg_id)
    data = {
        "originalMsgId": msg_id,
        "sendStatus": sent.status.name,
        "msgId": sent.msg_id,
        "offsetMsgId": sent.offset_msg_id,
        "brokerName": sent.message_queue.broker_name,
        "queueId": sent.message_queue.queue_id,
        "queueOffset": sent.queue_offset,
    }
    emit(
        as_json,
        data,
        lambda: (
            f"resent {msg_id}: {sent.status.name}, stored as {sent.offset_msg_id} "
            f"(queue {sent.message_queue.queue_id} of {sent.message_queue.broker_name}, offset {sent.queue_offset})"
        ),
    )


@admin_command(message, "by-offset")
@click.argument("topic_name", metavar="TOPIC")
@click.argument("broker_name", metavar="BROKER")
@click.argument("queue_id", metavar="QUEUE", type=click.IntRange(min=0))
@click.argument("offset", type=click.IntRange(min=0))
def message_by_offset(
    admin: AdminClient, as_json: bool, topic_name: str, broker_name: str, queue_id: int, offset: int
) -> None:
    """The message at OFFSET of queue QUEUE of TOPIC on BROKER (mqadmin queryMsgByOffset)."""
    found = admin.message_by_offset(topic_name, broker_name, queue_id, offset)
    emit(as_json, message_json(found), lambda: message_human(found))


@admin_command(message, "print")
@click.argument("topic_name", metavar="TOPIC")
@click.option(
    "-b", "--begin", default=None, help="Stored at or after (ms, 'now', ISO date-time, yyyy-MM-dd#HH:mm:ss:SSS)."
)
@click.option("-e", "--end", default=None, help="Stored before (same forms).")
@click.option("--broker", "broker_name", default=None, help="Only a queue of this broker (with --queue).")
@click.option("--queue", "queue_id", type=click.IntRange(min=0), default=None, help="Only this queue (with --broker).")
@click.option("--from-offset", type=click.IntRange(min=0), default=None, help="From this queue offset (one queue).")
@click.option("--to-offset", type=click.IntRange(min=0), default=None, help="Up to this queue offset, excluded.")
@click.option(
    "--max", "max_num", type=click.IntRange(min=1), default=1000, show_default=True, help="At most this many."
)
def message_print(
    admin: AdminClient,
    as_json: bool,
    topic_name: str,
    begin: str | None,
    end: str | None,
    broker_name: str | None,
    queue_id: int | None,
    from_offset: int | None,
    to_offset: int | None,
    max_num: int,
) -> None:
    """TOPIC's messages stored in a time range, or one queue's in an offset range (mqadmin printMsg,
    printMsgByQueue), queue by queue in offset order."""
    if (broker_name is None) != (queue_id is None):
        raise click.UsageError("--broker and --queue go together")
    if (from_offset is not None or to_offset is not None) and queue_id is None:
        raise click.UsageError("an offset range is of one queue: give --broker and --queue")
    begin_ms = parse_timestamp(begin) if begin else None
    end_ms = parse_timestamp(end) if end else None
    queue = (broker_name, queue_id) if broker_name is not None and queue_id is not None else None
    offsets = (from_offset or 0, to_offset) if from_offset is not None or to_offset is not None else None
    found = admin.print_messages(topic_name, begin_ms, end_ms, queue, offsets, max_num)
    emit(
        as_json,
        [message_json(m) for m in found],
        lambda: render_table(
            ["Message ID", "Broker", "Queue", "Queue Offset", "Stored", "Tags", "Keys", "Body"],
            [
                [
                    m.msg_id,
                    f"{m.store_host[0]}:{m.store_host[1]}",
                    m.queue_id,
                    m.queue_offset,
                    format_time(m.store_timestamp),
                    m.tags or "-",
                    " ".join(m.keys) or "-",
                    f"{len(m.body)} bytes",
                ]
                for m in found
            ],
        ),
    )


@admin_command(cluster, "stats-all")
@click.option("-t", "--topic", "topic_name", default=None, help="Only this topic.")
@click.option("-a", "--active", is_flag=True, help="Only topics and groups with messages in the last day.")
def cluster_stats_all(admin: AdminClient, as_json: bool, topic_name: str | None, active: bool) -> None:
    """Per topic and consuming group (mqadmin statsAll, VIEW_BROKER_STATS_DATA): the group's lag,
    the last minute's in and out TPS, and the messages in and out over the last day, summed over
    the topic's masters. A topic nobody consumes shows NO_CONSUMER."""
    rows = admin.stats_all(topic_name, active)
    emit(
        as_json,
        [dataclasses.asdict(r) for r in rows],
        lambda: render_table(
            ["Topic", "Consumer Group", "Accumulation", "InTPS", "OutTPS", "InMsg24Hour", "OutMsg24Hour"],
            [
                [
                    r.topic,
                    r.group or "",
                    r.accumulation,
                    f"{r.in_tps:.2f}",
                    f"{r.out_tps:.2f}",
                    r.in_msg_24h,
                    r.out_msg_24h if r.group else "NO_CONSUMER",
                ]
                for r in rows
            ],
        ),
    )


@admin_command(cluster, "rt")
@click.option("-a", "--amount", type=click.IntRange(min=2), default=100, show_default=True, help="Messages per broker.")
@click.option("-s", "--size", type=click.IntRange(min=1), default=128, show_default=True, help="Bytes per message.")
@click.option("-c", "--cluster", "cluster_name", default=None, help="Only this cluster.")
def cluster_rt(admin: AdminClient, as_json: bool, amount: int, size: int, cluster_name: str | None) -> None:
    """Send RT per master (mqadmin clusterRT): AMOUNT messages of SIZE bytes sent one after another to
    each master's own topic (named after the broker); the mean ms of all but the first. Exit 1 when
    a send failed."""
    rows = admin.cluster_rt(amount, size, cluster_name)
    if not rows:
        raise NotFound("no broker is registered with the name server")
    emit(
        as_json,
        [dataclasses.asdict(r) for r in rows],
        lambda: render_table(
            ["Cluster", "Broker", "RT ms", "Success", "Failed"],
            [[r.cluster, r.broker_name, f"{r.rt_ms:.2f}", r.success_count, r.fail_count] for r in rows],
        ),
    )
    if any(r.fail_count for r in rows):
        raise AdminError(f"{sum(r.fail_count for r in rows)} test message(s) could not be sent")


@admin_command(broker, "consume-stats")
@click.argument("broker_name", metavar="BROKER_ADDR_OR_NAME")
@click.option("--order", is_flag=True, help="Only ordered topics.")
@click.option(
    "--min-lag", type=click.IntRange(min=0), default=0, show_default=True, help="Only queues this far behind."
)
def broker_consume_stats(admin: AdminClient, as_json: bool, broker_name: str, order: bool, min_lag: int) -> None:
    """Every consumer group's queues on one broker (mqadmin brokerConsumeStats,
    GET_BROKER_CONSUME_STATS): broker offset, consumer offset, lag, last consumed; and the total lag."""
    addr = admin.broker_address(broker_name)
    total, rows = admin.broker_consume_stats(addr, order)
    shown = [(group, r) for group, r in rows if r.lag >= min_lag]
    data = {
        "brokerAddr": addr,
        "totalDiff": total,
        "queues": [{"group": group, **r.to_json()} for group, r in shown],
    }

    def human() -> str:
        table = render_table(
            ["Topic", "Group", "Broker", "Queue", "Broker Offset", "Consumer Offset", "Lag", "Last Consumed"],
            [
                [r.topic, group, r.broker_name, r.queue_id, r.broker_offset, r.consumer_offset, r.lag,
                 format_time(r.last_timestamp)]
                for group, r in shown
            ],
        )  # fmt: skip
        return f"{table}\n\nTotal lag: {total}"

    emit(as_json, data, human)
