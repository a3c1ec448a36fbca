"""``rmq-admin``: topics, clusters, consumer progress and messages of an rmq (or RocketMQ) cluster.

    rmq-admin topic create TopicA -q 4          rmq-admin consumer progress GroupA
    rmq-admin topic status TopicA --json        rmq-admin consumer reset-offset GroupA TopicA --timestamp now
    rmq-admin message id 7F000001000029...      rmq-admin message key TopicA order-42
    rmq-admin producer connections GroupP       rmq-admin consumer running-info GroupA
    rmq-admin cluster stats-all                 rmq-admin message print TopicA --begin 2024-05-01T12:00

(who is connected and the cluster's figures: ``rmq.cli.admin_runtime``)

Every command takes ``-n host:port[;host:port]`` (default $NAMESRV_ADDR, else 127.0.0.1:9876) and
``--json`` (machine-readable output on stdout). Exit codes: 0 done, 1 failed (a refusal, nobody
answering), 2 bad usage, 3 not found (unknown topic, no message).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from typing import Any

import click

from rmq.cli import admin_ops, admin_runtime
from rmq.cli.admin_base import (
    EXIT_FAILED,
    admin_command,
    emit,
    fail,
    format_time,
    message_human,
    message_json,
    parse_timestamp,
    render_key_values,
    render_table,
)
from rmq.client.admin_client import (
    DEFAULT_CONTROLLER,
    DEFAULT_QUEUE_NUMS,
    AdminClient,
)
from rmq.errors import AdminError, ConfigError, NotFound, ResponseError
from rmq.protocol.codes import ResponseCode
from rmq.protocol.perm import PERM_READ, PERM_WRITE, perm_to_string
from rmq.protocol.replica import DEFAULT_RANGE_SIZE
from rmq.protocol.route import MASTER_ID
from rmq.protocol.topic_attributes import SETTABLE_TYPES
from rmq.settings import Invalid, Size

# -- commands -----------------------------------------------------------------------------------


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Administer an rmq (RocketMQ-compatible) cluster through its name servers and brokers.

    Exit codes: 0 done, 1 failed, 2 bad usage, 3 not found."""


@main.group()
def topic() -> None:
    """Create, change, delete and inspect topics."""


@main.group()
def cluster() -> None:
    """Clusters and their brokers."""


@main.group()
def consumer() -> None:
    """Consumer groups: progress and offsets."""


@main.group()
def broker() -> None:
    """One broker (a master and its slaves): replication status and checks."""


@main.group()
def controller() -> None:
    """The controllers of controller mode (docs/controller.md): their Raft group."""


def controllers_option(fn: Callable) -> Callable:
    return click.option(
        "--controller",
        "controllers",
        envvar="CONTROLLER_ADDR",
        default=DEFAULT_CONTROLLER,
        show_default=True,
        help="Controller address(es), host:port[;host:port] (their remoting port, not the Raft one).",
    )(fn)


@main.group()
def message() -> None:
    """Find messages by id or key."""


def topic_settings(fn: Callable) -> Callable:
    options = [
        click.option(
            "-q",
            "--queues",
            type=click.IntRange(1, 1024),
            default=None,
            help="Read and write queue count (both).  [default: 8]",
        ),
        click.option("-r", "--read-queues", type=click.IntRange(0, 1024), default=None, help="Read queue count."),
        click.option("-w", "--write-queues", type=click.IntRange(0, 1024), default=None, help="Write queue count."),
        click.option(
            "-p",
            "--perm",
            type=click.IntRange(0, 7),
            default=None,
            help="Permission bits: 4 read, 2 write.  [default: 6 on create; update keeps the topic's]",
        ),
        click.option("-o", "--order/--no-order", default=None, help="An ordered topic (update: unset keeps it)."),
        click.option(
            "-t",
            "--type",
            "message_type",
            type=click.Choice(SETTABLE_TYPES, case_sensitive=False),
            default=None,
            help="The messages it takes (RocketMQ 5.x's +message.type attribute; checked on every send). "
            "Unset: NORMAL.",
        ),
        click.option("-c", "--cluster", default=None, help="Only the masters of this cluster."),
        click.option("-b", "--broker", default=None, help="Only this broker (host:port)."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _update(
    admin: AdminClient,
    as_json: bool,
    topic_name: str,
    queues,
    read_queues,
    write_queues,
    perm,
    order,
    message_type,
    cluster_name,
    broker,
    verb: str,
    keep_current: bool = False,
) -> None:
    """Create or change the topic on each target broker; with ``keep_current`` what no option
    names keeps the value that broker has (``topic update --perm 4`` changes the permission only)."""
    kind = message_type.upper() if message_type else None
    addrs = admin.target_brokers(cluster_name, broker)
    current = admin.topic_settings_on(topic_name, addrs) if keep_current else {}
    sent = {}
    for addr in addrs:
        now = current.get(addr) or {}
        values = (
            _first(read_queues, queues, now.get("readQueueNums"), DEFAULT_QUEUE_NUMS),
            _first(write_queues, queues, now.get("writeQueueNums"), DEFAULT_QUEUE_NUMS),
            _first(perm, now.get("perm"), PERM_READ | PERM_WRITE),
            _first(order, now.get("order"), False),
        )
        admin.update_topic(topic_name, *values, broker_addr=addr, message_type=kind)
        sent[addr] = values
    read, write, perm, order = next(iter(sent.values()))
    data: dict[str, Any] = {
        "topic": topic_name,
        "readQueueNums": read,
        "writeQueueNums": write,
        "perm": perm,
        "order": order,
        "brokers": addrs,
    }
    if len(set(sent.values())) > 1:  # brokers that held different settings keep them where not changed
        data["perBroker"] = {
            addr: dict(zip(("readQueueNums", "writeQueueNums", "perm", "order"), v, strict=True))
            for addr, v in sent.items()
        }
    if kind:
        data["messageType"] = kind
    type_text = f", {kind} messages" if kind else ""
    emit(
        as_json,
        data,
        lambda: (
            f"{verb} topic {topic_name} ({read} read / {write} write queues, "
            f"perm {perm_to_string(perm)}{type_text}) on {', '.join(addrs)}"
        ),
    )


def _first(*values: Any) -> Any:
    """The first value that is not None (an option given, else the current setting, else the default)."""
    return next(v for v in values if v is not None)


@admin_command(topic, "create")
@click.argument("topic_name", metavar="TOPIC")
@topic_settings
def topic_create(admin: AdminClient, as_json: bool, topic_name: str, **settings) -> None:
    """Create TOPIC on every master (or -c/-b); refuses a topic that exists."""
    if admin.topic_exists(topic_name):
        raise AdminError(f"topic {topic_name!r} already exists: use 'rmq-admin topic update' to change it")
    _update(admin, as_json, topic_name, cluster_name=settings.pop("cluster"), verb="created", **settings)


@admin_command(topic, "update")
@click.argument("topic_name", metavar="TOPIC")
@topic_settings
def topic_update(admin: AdminClient, as_json: bool, topic_name: str, **settings) -> None:
    """Change TOPIC's queues, permission or order flag (it must exist); what is not given keeps each
    broker's current value (``--perm 4``: read-only, queues unchanged)."""
    if not admin.topic_exists(topic_name):
        raise NotFound(f"topic {topic_name!r} does not exist: use 'rmq-admin topic create'")
    _update(
        admin, as_json, topic_name, cluster_name=settings.pop("cluster"), verb="updated", keep_current=True, **settings
    )


@admin_command(topic, "delete")
@click.argument("topic_name", metavar="TOPIC")
@click.option("-c", "--cluster", "cluster_name", default=None, help="Only in this cluster.")
def topic_delete(admin: AdminClient, as_json: bool, topic_name: str, cluster_name: str | None) -> None:
    """Delete TOPIC on its brokers and on every name server (its messages age out with retention)."""
    addrs = admin.delete_topic(topic_name, cluster_name)
    emit(
        as_json,
        {"topic": topic_name, "brokers": addrs},
        lambda: f"deleted topic {topic_name} on {', '.join(addrs) or 'no broker'} and the name servers",
    )


@admin_command(topic, "list")
def topic_list(admin: AdminClient, as_json: bool) -> None:
    """Every topic the name server routes."""
    topics = admin.topic_list()
    emit(as_json, topics, lambda: "\n".join(topics))


@admin_command(topic, "route")
@click.argument("topic_name", metavar="TOPIC")
def topic_route(admin: AdminClient, as_json: bool, topic_name: str) -> None:
    """Which brokers serve TOPIC, with how many queues."""
    route = admin.topic_route(topic_name)
    addrs = {b["brokerName"]: b for b in route.get("brokerDatas") or []}

    def human() -> str:
        rows = []
        for q in sorted(route.get("queueDatas") or [], key=lambda q: q["brokerName"]):
            data = addrs.get(q["brokerName"], {})
            rows.append(
                [
                    data.get("cluster", "-"),
                    q["brokerName"],
                    " ".join(f"{k}={v}" for k, v in sorted((data.get("brokerAddrs") or {}).items())),
                    q["readQueueNums"],
                    q["writeQueueNums"],
                    perm_to_string(int(q["perm"])),
                ]
            )
        return render_table(["Cluster", "Broker", "Addresses (id=addr)", "Read", "Write", "Perm"], rows)

    emit(as_json, route, human)


@admin_command(topic, "status")
@click.argument("topic_name", metavar="TOPIC")
def topic_status(admin: AdminClient, as_json: bool, topic_name: str) -> None:
    """Per queue: min and max offset, time of the last message."""
    rows = admin.topic_stats(topic_name)
    data = [
        {
            "brokerName": r.broker_name,
            "queueId": r.queue_id,
            "minOffset": r.min_offset,
            "maxOffset": r.max_offset,
            "lastUpdateTimestamp": r.last_update_timestamp,
        }
        for r in rows
    ]
    emit(
        as_json,
        data,
        lambda: render_table(
            ["Broker", "Queue", "Min Offset", "Max Offset", "Last Updated"],
            [
                [r.broker_name, r.queue_id, r.min_offset, r.max_offset, format_time(r.last_update_timestamp)]
                for r in rows
            ],
        ),
    )


@admin_command(cluster, "list")
def cluster_list(admin: AdminClient, as_json: bool) -> None:
    """Every broker of every cluster, masters and slaves: role, epoch, CommitLog max offset, a
    slave's replication lag in bytes (its master's max offset minus its own), disk use."""
    rows = admin.cluster_brokers()
    data = [
        {
            "cluster": r.cluster,
            "brokerName": r.broker_name,
            "brokerId": r.broker_id,
            "addr": r.addr,
            "role": r.role,
            "epoch": r.epoch,
            "maxOffset": r.max_offset,
            "lagBytes": r.lag_bytes,
            "runtime": r.runtime,
        }
        for r in rows
    ]

    def cell(value: Any) -> Any:
        return "-" if value is None else value

    emit(
        as_json,
        data,
        lambda: render_table(
            ["Cluster", "Broker", "BID", "Address", "Role", "Epoch", "Max Offset", "Lag Bytes", "Version", "Disk Used"],
            [
                [
                    r.cluster,
                    r.broker_name,
                    r.broker_id,
                    r.addr,
                    cell(r.role),
                    cell(r.epoch),
                    cell(r.max_offset),
                    cell(r.lag_bytes),
                    r.runtime.get("brokerVersionDesc", "-"),
                    f"{float(r.runtime['commitLogDiskRatio']) * 100:.1f}%"
                    if "commitLogDiskRatio" in r.runtime
                    else "-",
                ]
                for r in rows
            ],
        ),
    )


@admin_command(consumer, "progress")
@click.argument("group")
@click.option("-t", "--topic", "topic_name", default=None, help="Only this topic.")
def consumer_progress(admin: AdminClient, as_json: bool, group: str, topic_name: str | None) -> None:
    """Per queue of GROUP: broker offset, consumer offset, lag; for a POP group (5.x consumers) also
    the messages invisible (popped, not acked), acked, and retrying (in its POP retry topic)."""
    rows = admin.consume_progress(group, topic_name)
    pop_rows = admin.pop_progress(group, topic_name)
    pop = {(r.topic, r.broker_name, r.queue_id): r for r in pop_rows}
    # a POP group: something in flight, or a POP retry topic (a pull group has neither)
    pop_group = any(r.invisible or r.retry for r in pop_rows)
    data: list[dict[str, Any]] = []
    for r in rows:
        row = r.to_json()
        found = pop.pop((r.topic, r.broker_name, r.queue_id), None)
        if found is not None:
            row.update(invisible=found.invisible, acked=found.acked)
            if found.retry:
                row["retrying"] = found.lag + found.invisible
        data.append(row)
    # an online group's consume stats leave its retry topics out
    for retry in (p for p in pop.values() if p.retry):
        data.append(
            {
                "topic": retry.topic,
                "brokerName": retry.broker_name,
                "queueId": retry.queue_id,
                "brokerOffset": retry.broker_offset,
                "consumerOffset": retry.consumer_offset,
                "lag": retry.lag,
                "invisible": retry.invisible,
                "acked": retry.acked,
                "retrying": retry.lag + retry.invisible,
            }
        )

    def human() -> str:
        if not data:
            return f"group {group} has no committed offsets"
        if not pop_group:
            table = render_table(
                ["Topic", "Broker", "Queue", "Broker Offset", "Consumer Offset", "Lag", "Last Consumed"],
                [
                    [
                        r.topic,
                        r.broker_name,
                        r.queue_id,
                        r.broker_offset,
                        r.consumer_offset,
                        r.lag,
                        format_time(r.last_timestamp),
                    ]
                    for r in rows
                ],
            )
            return f"{table}\n\nTotal lag: {sum(r.lag for r in rows)}"
        table = render_table(
            ["Topic", "Broker", "Queue", "Broker Offset", "Consumer Offset", "Lag", "Invisible", "Acked"],
            [
                [
                    d["topic"],
                    d["brokerName"],
                    d["queueId"],
                    d["brokerOffset"],
                    d["consumerOffset"],
                    d["lag"],
                    d.get("invisible", "-"),
                    d.get("acked", "-"),
                ]
                for d in data
            ],
        )
        lag = sum(d["lag"] for d in data if "retrying" not in d)
        retrying = sum(d["retrying"] for d in data if "retrying" in d)
        invisible = sum(d.get("invisible", 0) for d in data)
        return f"{table}\n\nTotal lag: {lag}\nInvisible: {invisible}\nRetrying: {retrying}"

    emit(as_json, data, human)


@admin_command(consumer, "connections")
@click.argument("group")
def consumer_connections(admin: AdminClient, as_json: bool, group: str) -> None:
    """GROUP's online consumers and what they subscribe to."""
    data = admin.consumer_connections(group)

    def human() -> str:
        clients = render_table(
            ["Client ID", "Address", "Language", "Version"],
            [
                [c["clientId"], c.get("clientAddr", "-"), c.get("language", "-"), c.get("version", "-")]
                for c in sorted(data["connectionSet"], key=lambda c: c["clientId"])
            ],
        )
        subscriptions = render_table(
            ["Topic", "Expression"],
            [[t, s.get("subString", "*")] for t, s in sorted(data["subscriptionTable"].items())],
        )
        return (
            f"{clients}\n\n{subscriptions}\n\nConsume type: {data.get('consumeType')}, "
            f"model: {data.get('messageModel')}, from: {data.get('consumeFromWhere')}"
        )

    emit(as_json, data, human)


@admin_command(consumer, "reset-offset")
@click.argument("group")
@click.argument("topic_name", metavar="TOPIC")
@click.option(
    "-s",
    "--timestamp",
    required=True,
    help="ms since the epoch, 'now', 'latest', ISO date-time, or yyyy-MM-dd#HH:mm:ss:SSS.",
)
@click.option(
    "--force/--no-force", default=True, show_default=True, help="Also move offsets forward (without: only back)."
)
def consumer_reset_offset(
    admin: AdminClient, as_json: bool, group: str, topic_name: str, timestamp: str, force: bool
) -> None:
    """Move GROUP's offsets on TOPIC to the first message stored at or after --timestamp."""
    when = parse_timestamp(timestamp)
    rows = admin.reset_offset(group, topic_name, when, force)
    data = [{"topic": r.topic, "brokerName": r.broker_name, "queueId": r.queue_id, "offset": r.offset} for r in rows]
    emit(
        as_json,
        data,
        lambda: render_table(["Broker", "Queue", "New Offset"], [[r.broker_name, r.queue_id, r.offset] for r in rows]),
    )


@admin_command(message, "id")
@click.argument("msg_id")
@click.option(
    "-t",
    "--topic",
    "topic_name",
    default=None,
    help="Look MSG_ID up as a client message id (UNIQ_KEY) of this topic first.",
)
def message_id(admin: AdminClient, as_json: bool, msg_id: str, topic_name: str | None) -> None:
    """The message with MSG_ID: a broker message id (offsetMsgId), or with --topic the client
    message id a producer got back."""
    try:
        found = admin.find_message(msg_id, topic_name)
    except AdminError as e:
        if topic_name is None:
            raise
        raise NotFound(str(e)) from None
    except ResponseError as e:
        if e.code == ResponseCode.SYSTEM_ERROR and "can not find message" in (e.remark or ""):
            raise NotFound(f"no message with id {msg_id} on {e.address}") from None
        raise
    emit(as_json, message_json(found), lambda: message_human(found))


@admin_command(message, "key")
@click.argument("topic_name", metavar="TOPIC")
@click.argument("key")
@click.option(
    "--max", "max_num", default=32, show_default=True, type=click.IntRange(1, 64), help="At most this many messages."
)
def message_key(admin: AdminClient, as_json: bool, topic_name: str, key: str, max_num: int) -> None:
    """Messages of TOPIC with KEY among their keys (or as client message id)."""
    found = admin.query_by_key(topic_name, key, max_num)
    if not found:
        raise NotFound(f"no message of topic {topic_name} has key {key!r}")
    emit(
        as_json,
        [message_json(m) for m in found],
        lambda: render_table(
            ["Message ID", "Queue", "Queue Offset", "Stored", "Tags", "Keys"],
            [
                [m.msg_id, m.queue_id, m.queue_offset, format_time(m.store_timestamp), m.tags or "-", " ".join(m.keys)]
                for m in found
            ],
        ),
    )


class ByteSize(click.ParamType):
    """A number of bytes, with an optional unit: 1048576, 64m, 1g (as the settings read sizes)."""

    name = "size"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        try:
            return int(Size(1).parse(str(value)))
        except (Invalid, ConfigError) as e:
            self.fail(str(e), param, ctx)


@admin_command(broker, "ha-verify")
@click.argument("broker_name", metavar="BROKER")
@click.option(
    "--range-size",
    type=ByteSize(),
    default=DEFAULT_RANGE_SIZE,
    show_default=True,
    help="Bytes of CommitLog per compared digest (64m, 1g, ...).",
)
def broker_ha_verify(admin: AdminClient, as_json: bool, broker_name: str, range_size: int) -> None:
    """Whether each slave of BROKER holds its master's CommitLog byte for byte: both hash what both
    hold (xxh3-128, range by range) and the first range that differs is named. Exit 1 if one differs."""
    checks = admin.verify_replicas(broker_name, range_size)

    def human() -> str:
        lines = []
        for c in checks:
            where = f"slave {c.slave_id} ({c.slave_addr}) against master {c.master_addr}"
            if c.first_difference is None:
                lines.append(f"{where}: identical from offset {c.verified_from} up to offset {c.verified_to}")
            else:
                lines.append(
                    f"{where}: DIFFERENT in [{c.first_difference}, {c.first_difference + c.difference_length})"
                    f" (identical before it from offset {c.verified_from})"
                )
            lines.append(f"  master max offset {c.master_max_offset}, slave max offset {c.slave_max_offset}")
        return "\n".join(lines)

    emit(as_json, [dataclasses.asdict(c) | {"identical": c.identical} for c in checks], human)
    if not all(c.identical for c in checks):
        sys.exit(EXIT_FAILED)


@admin_command(broker, "promote")
@click.argument("broker_name", metavar="BROKER")
@click.option("--broker-id", type=click.IntRange(min=1), required=True, help="The slave to promote (its brokerId).")
@click.option(
    "--role",
    type=click.Choice(["ASYNC_MASTER", "SYNC_MASTER"]),
    default="ASYNC_MASTER",
    show_default=True,
    help="The role it takes (SYNC_MASTER: sends wait for a slave, so they degrade until one joins).",
)
@click.option(
    "--controller",
    metavar="HOST:PORT;HOST:PORT",
    default=None,
    help="Controller mode: ask these controllers to elect it (default: the controllers the broker names).",
)
def broker_promote(
    admin: AdminClient, as_json: bool, broker_name: str, broker_id: int, role: str, controller: str | None
) -> None:
    """Make slave --broker-id of BROKER its master now, with a new epoch: it stops replicating, takes
    sends and registers as master, so clients move to it within one route refresh. Restart the old
    master as a slave (brokerRole=SLAVE, brokerId>0): it drops what the new master never had.
    Without cluster credentials a master that still runs keeps its route: then this says so and
    exits 1 (the promoted one takes the route once the old master is gone). In controller mode the
    controllers are asked to elect it (CONTROLLER_ELECT_MASTER with designateElect: it must be alive
    and in the sync state set); the old master follows it as a slave by itself."""
    promotion = admin.promote(broker_name, broker_id, role, controller)
    routed = admin.broker_addrs(broker_name).get(MASTER_ID)
    if routed != promotion.addr:
        raise AdminError(
            f"{promotion.addr} was promoted (epoch {promotion.epoch}), but the name server still routes "
            f"{routed or 'no broker'} as the master of {broker_name}: a live master keeps its route unless the "
            "promoted broker's registration is signed by the cluster account (clusterAccessKey). Stop the old "
            "master, and the promoted one takes the route at its next registration"
        )
    emit(
        as_json,
        dataclasses.asdict(promotion),
        lambda: (
            f"{broker_name}: {promotion.addr} is the master now, epoch {promotion.epoch} "
            f"from CommitLog offset {promotion.start_offset}"
        ),
    )


@admin_command(broker, "status")
@click.argument("broker", metavar="BROKER_ADDR_OR_NAME")
def broker_status(admin: AdminClient, as_json: bool, broker: str) -> None:
    """BROKER's runtime info, as ``mqadmin brokerStatus`` prints it: a key and its value a line
    (putTps, getTransferedTps, msgPutTotalTodayNow, runtime, commitLogDirCapacity, ...). BROKER is
    host:port, or a broker name (its master)."""
    addr = admin.broker_address(broker)
    table = admin.broker_runtime_info(addr)
    emit(as_json, {"brokerAddr": addr, "table": dict(sorted(table.items()))}, lambda: render_key_values(table, ":"))


@admin_command(broker, "ha-status")
@click.argument("broker_name", metavar="BROKER")
def broker_ha_status(admin: AdminClient, as_json: bool, broker_name: str) -> None:
    """What BROKER's master knows of each slave it replicates to: the broker id it named (controller
    mode), connected since, the offset the slave acknowledged, how far behind it is in bytes and ms,
    whether it is in sync (held the whole CommitLog within haMaxTimeSlaveNotCatchup) and in the sync
    state set the controllers committed, whether it proved the cluster secret (an unauthenticated
    one, served in clusterAuthMode permissive, does not ack SYNC_MASTER sends) and whether it
    replicates over TLS."""
    master, status = admin.ha_status(broker_name)
    data = {"brokerName": broker_name, "masterAddr": master, **status.to_json()}

    def human() -> str:
        head = f"master {master} of {broker_name}, CommitLog max offset {status.master_max_offset}"
        if status.sync_state_set is not None:
            head += f", sync state set {status.sync_state_set}"
        if not status.slaves:
            return f"{head}\nno slave connected"
        table = render_table(
            [
                "Slave (HA connection)",
                "Id",
                "Connected Since",
                "Acked Offset",
                "Lag Bytes",
                "Lag ms",
                "In Sync",
                "In Sync State Set",
                "Auth",
                "TLS",
            ],
            [
                [
                    s.address,
                    s.broker_id if s.broker_id >= 0 else "-",
                    format_time(s.connected_since),
                    s.acked_offset,
                    s.lag_bytes,
                    s.lag_ms,
                    "yes" if s.in_sync else "no",
                    "-" if status.sync_state_set is None else ("yes" if s.in_sync_state_set else "no"),
                    "yes" if s.authenticated else ("no" if s.acks_count else "no: acks not counted"),
                    "yes" if s.tls else "no",
                ]
                for s in status.slaves
            ],
        )
        return f"{head}\n{table}"

    emit(as_json, data, human)


@admin_command(controller, "status")
@controllers_option
def controller_status(admin: AdminClient, as_json: bool, controllers: str) -> None:
    """Each controller of --controller as it answers: its group, the members (their Raft addresses),
    the leader it knows of and the Raft term; exit 1 when none knows a leader (no majority)."""
    statuses = admin.controller_status(controllers)
    data = [
        {"address": st.address, "error": st.error, **(dataclasses.asdict(st.metadata) if st.metadata else {})}
        for st in statuses
    ]

    def human() -> str:
        return render_table(
            ["Controller", "Role", "Group", "Leader", "Leader Address", "Term", "Members"],
            [
                [st.address, "unreachable", "", "", "", "", st.error or ""]
                if st.metadata is None
                else [
                    st.address,
                    "leader" if st.metadata.is_leader else "follower",
                    st.metadata.group,
                    st.metadata.leader_id or "none",
                    st.metadata.leader_address,
                    st.metadata.term,
                    st.metadata.peers,
                ]
                for st in statuses
            ],
        )

    emit(as_json, data, human)
    if not any(st.metadata is not None and st.metadata.leader_id for st in statuses):
        fail("no controller knows a leader: is a majority of the group up?", EXIT_FAILED)


@admin_command(broker, "sync-state")
@click.argument("broker_name", metavar="BROKER")
@controllers_option
def broker_sync_state(admin: AdminClient, as_json: bool, broker_name: str, controllers: str) -> None:
    """BROKER's broker set as the controllers decided it (controller mode): its master, master epoch,
    sync state set and its epoch, and each replica, in the set or not, alive or not."""
    leader, info = admin.sync_state(controllers, broker_name)
    data = {"brokerName": broker_name, "controller": leader, **info.to_json()}

    def human() -> str:
        master = "none" if info.master_broker_id < 0 else f"{info.master_broker_id} ({info.master_address})"
        head = (
            f"{broker_name}: master {master}, master epoch {info.master_epoch}, "
            f"sync state set epoch {info.sync_state_set_epoch}"
        )
        rows = [
            [r.broker_id, r.broker_address, "yes" if in_sync else "no", "yes" if r.alive else "no"]
            for in_sync, replicas in ((True, info.in_sync), (False, info.not_in_sync))
            for r in replicas
        ]
        return f"{head}\n" + render_table(["Broker Id", "Address", "In Sync", "Alive"], sorted(rows))

    emit(as_json, data, human)


# the operator commands of mqadmin's daily set (rmq.cli.admin_ops)
main.add_command(admin_ops.group_commands)
main.add_command(admin_ops.kv_commands)
for _command in admin_ops.broker_commands.commands.values():
    broker.add_command(_command)

# who is connected and the cluster's figures, kept in a module of their own
main.add_command(admin_runtime.producer)
for _group, _gathered in (
    (consumer, admin_runtime.consumer),
    (message, admin_runtime.message),
    (cluster, admin_runtime.cluster),
    (broker, admin_runtime.broker),
):
    for _command in _gathered.commands.values():
        _group.add_command(_command)

if __name__ == "__main__":
    main()
