"""The cluster, topic, consumer and producer pages (rocketmq-dashboard's), each read through the
session's AdminClient; the writes (topic create, update, delete; offset reset) are POST forms
checked by ``session.check_write``. Tables are sorted so an operator finds things: by name, by lag
(largest first) where lag is shown."""

from __future__ import annotations

import dataclasses
import re
import time
from typing import Any

from flask import Blueprint, flash, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from rmq.client.admin_client import AdminClient, QueueProgress
from rmq.dashboard.forms import (
    BadInput,
    checked_group,
    datetime_input,
    group_field,
    int_field,
    text_field,
    time_field,
    topic_field,
)
from rmq.dashboard.session import admin, check_write
from rmq.errors import AdminError, NotFound, ResponseError
from rmq.protocol.codes import ResponseCode
from rmq.protocol.message import is_system_group, is_system_topic, retry_topic
from rmq.protocol.perm import PERM_READ, PERM_WRITE, perm_to_string

blueprint = Blueprint("pages", __name__)

# the perms a topic form offers, as RocketMQ's dashboard does
TOPIC_PERMS = {"RW": PERM_READ | PERM_WRITE, "R": PERM_READ, "W": PERM_WRITE}
MAX_QUEUES = 1024


def _first_rate(rates: str | None) -> str:
    """The 10-second rate of runtime info's ``putTps`` / ``getTransferedTps`` ("10s 60s 600s")."""
    try:
        return f"{float((rates or '').split(' ')[0]):,.1f}"
    except ValueError:
        return "-"


@blueprint.route("/")
def cluster() -> str:
    client = admin()
    rows = client.cluster_brokers()
    brokers = [
        {
            "cluster": row.cluster,
            "broker_name": row.broker_name,
            "broker_id": row.broker_id,
            "addr": row.addr,
            "answered": bool(row.runtime),
            "role": row.role or "-",
            "version": row.runtime.get("brokerVersionDesc", "-"),
            "epoch": row.epoch,
            "max_offset": row.max_offset,
            "lag_bytes": row.lag_bytes,
            "disk": _percent(row.runtime.get("commitLogDiskRatio")),
            "disk_free": _disk_free(row.runtime.get("commitLogDirCapacity")),
            "tps_in": _first_rate(row.runtime.get("putTps")),
            "tps_out": _first_rate(row.runtime.get("getTransferedTps")),
            "up": _uptime(row.runtime.get("bootTimestamp")),
        }
        for row in rows
    ]
    return render_template("cluster.html", brokers=brokers, namesrvs=client.namesrv_addrs)


def _disk_free(capacity: str | None) -> str:
    """The free space of runtime info's ``commitLogDirCapacity`` ("Total : 252.0 GiB, Free : 58.8 GiB.")."""
    found = re.fullmatch(r"Total : (.+), Free : (.+)\.", capacity or "")
    return found.group(2) if found else (capacity or "-")


def _uptime(boot_ms: str | None) -> str:
    """How long since ``bootTimestamp`` (ms), in its two largest units."""
    try:
        seconds = max(0, int(time.time() - int(boot_ms or "") / 1000))
    except ValueError:
        return "-"
    parts: list[str] = []
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60), ("s", 1)):
        if seconds >= size or (unit == "s" and not parts):
            parts.append(f"{seconds // size} {unit}")
            seconds %= size
    return " ".join(parts[:2])


def _percent(ratio: str | None) -> str:
    try:
        return f"{float(ratio or ''):.1%}"
    except ValueError:
        return "-"


# -- topics -------------------------------------------------------------------------------------


@dataclasses.dataclass
class TopicRow:
    name: str
    system: bool
    brokers: list[str]
    read_queues: int
    write_queues: int
    perm: str
    tps: float
    day: int


def _cluster_and_broker_names(client: AdminClient) -> set[str]:
    """The names of clusters and broker sets: each is a topic of its own (brokerTopicEnable,
    clusterTopicEnable) that rocketmq-dashboard counts with the system's."""
    info = client.cluster_info()
    return set(info.get("clusterAddrTable") or {}) | set(info.get("brokerAddrTable") or {})


def _topic_row(client: AdminClient, name: str, own_topics: set[str]) -> TopicRow:
    route = client.topic_route(name)
    queues = route.get("queueDatas") or []
    tps, day = client.topic_tps(name) if queues else (0.0, 0)
    return TopicRow(
        name,
        name in own_topics or is_system_topic(name),
        sorted(q["brokerName"] for q in queues),
        sum(int(q["readQueueNums"]) for q in queues),
        sum(int(q["writeQueueNums"]) for q in queues),
        ", ".join(sorted({perm_to_string(int(q["perm"])) for q in queues})),
        tps,
        day,
    )


@blueprint.route("/topics")
def topics() -> str:
    client = admin()
    needle = request.args.get("q", "").strip()
    show_system = request.args.get("system") == "1"
    own = _cluster_and_broker_names(client)
    names = [
        t
        for t in client.topic_list()
        if (show_system or not (t in own or is_system_topic(t))) and needle.lower() in t.lower()
    ]
    rows = []
    for name in names:
        try:
            rows.append(_topic_row(client, name, own))
        except ResponseError as e:
            if e.code != ResponseCode.TOPIC_NOT_EXIST:  # deleted since the list was read
                raise
    return render_template("topics.html", topics=rows, q=needle, show_system=show_system, perms=TOPIC_PERMS)


@blueprint.route("/topics/<topic>")
def topic(topic: str) -> str:
    client = admin()
    row = _topic_row(client, topic, _cluster_and_broker_names(client))
    route = client.topic_route(topic)
    queue_datas = sorted(route.get("queueDatas") or [], key=lambda q: q["brokerName"])
    broker_datas = sorted(route.get("brokerDatas") or [], key=lambda b: b["brokerName"])
    stats = client.topic_stats(topic)
    groups: list[dict[str, Any]] = []
    for group in client.topic_consumer_groups(topic):
        try:
            progress = client.consume_progress(group, topic)
        except (ResponseError, AdminError):
            progress = []
        tps, _ = client.group_tps(group, topic)
        groups.append({"group": group, "lag": sum(p.lag for p in progress), "tps": tps})
    groups.sort(key=lambda g: (-g["lag"], g["group"]))
    return render_template(
        "topic.html",
        topic=row,
        queue_datas=queue_datas,
        broker_datas=broker_datas,
        stats=stats,
        messages=sum(s.max_offset - s.min_offset for s in stats),
        groups=groups,
        perms=TOPIC_PERMS,
        perm_to_string=perm_to_string,
    )


@blueprint.route("/topics", methods=["POST"])
def save_topic() -> Response:
    check_write()
    name = topic_field("topic")
    queues = int_field("queues", minimum=1, maximum=MAX_QUEUES)
    perm_name = text_field("perm", "RW")
    if perm_name not in TOPIC_PERMS:
        raise BadInput(f"perm must be one of {', '.join(TOPIC_PERMS)}, got {perm_name!r}")
    addrs = admin().update_topic(name, queues, queues, TOPIC_PERMS[perm_name])
    flash(f"topic {name} saved on {', '.join(addrs)}: {queues} queues, perm {perm_name}", "done")
    return redirect(url_for("pages.topic", topic=name))


@blueprint.route("/topics/<topic>/delete", methods=["POST"])
def delete_topic(topic: str) -> Response:
    check_write()
    if request.form.get("confirm") != topic:
        raise BadInput(f"type the topic's name ({topic}) to confirm its deletion")
    addrs = admin().delete_topic(topic)
    flash(f"topic {topic} deleted from {', '.join(addrs) or 'the name servers'}", "done")
    return redirect(url_for("pages.topics"))


# -- consumers ----------------------------------------------------------------------------------


def _progress(client: AdminClient, group: str) -> list[QueueProgress]:
    """The group's progress per queue; none for a group (or its topics) the brokers do not know."""
    try:
        return client.consume_progress(group)
    except ResponseError as e:
        if e.code not in (ResponseCode.TOPIC_NOT_EXIST, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST):
            raise
        return []


def _connections(client: AdminClient, group: str) -> dict[str, Any]:
    """ConsumerConnection's body; empty when no consumer of the group is online."""
    try:
        return client.consumer_connections(group)
    except ResponseError as e:
        if e.code != ResponseCode.CONSUMER_NOT_ONLINE:
            raise
        return {}


@blueprint.route("/consumers")
def consumers() -> str:
    client = admin()
    needle = request.args.get("q", "").strip()
    show_system = request.args.get("system") == "1"
    groups: list[dict[str, Any]] = []
    for group, config in client.all_subscription_groups().items():
        if needle.lower() not in group.lower() or (is_system_group(group) and not show_system):
            continue
        progress = _progress(client, group)
        connections = _connections(client, group)
        tps = sum(client.group_tps(group, t)[0] for t in sorted({p.topic for p in progress}))
        groups.append(
            {
                "group": group,
                "lag": sum(p.lag for p in progress),
                "tps": round(tps, 2),
                "connections": len(connections.get("connectionSet") or []),
                "model": connections.get("messageModel") or "-",  # the consumers say; a group may be either
                "consume_type": connections.get("consumeType") or "-",
                "retry_max_times": config.get("retryMaxTimes", "-"),
                "enabled": config.get("consumeEnable", True),
            }
        )
    groups.sort(key=lambda g: (-g["lag"], g["group"]))
    return render_template("consumers.html", groups=groups, q=needle, show_system=show_system)


@blueprint.route("/consumers/<group>")
def consumer(group: str) -> str:
    client = admin()
    progress = _progress(client, group)
    by_topic: dict[str, list[QueueProgress]] = {}
    for p in progress:
        by_topic.setdefault(p.topic, []).append(p)
    topics: list[dict[str, Any]] = [
        {
            "topic": t,
            "lag": sum(p.lag for p in rows),
            "queues": sorted(rows, key=lambda p: (-p.lag, p.broker_name, p.queue_id)),
        }
        for t, rows in by_topic.items()
    ]
    topics.sort(key=lambda t: (-t["lag"], t["topic"]))
    connections = _connections(client, group)
    pops = client.pop_progress(group)
    # shown for a group that pops: messages of it are invisible, or it has POP retry queues (a push or
    # pull group's queues are answered too, their offsets as the lag table has them)
    if not any(p.invisible or p.retry for p in pops):
        pops = []
    resettable = sorted(t for t in by_topic if t != retry_topic(group))
    return render_template(
        "consumer.html",
        group=group,
        topics=topics,
        total_lag=sum(p.lag for p in progress),
        pops=pops,
        connections=sorted(connections.get("connectionSet") or [], key=lambda c: c["clientId"]),
        subscriptions=sorted((connections.get("subscriptionTable") or {}).items()),
        model=connections.get("messageModel"),
        consume_type=connections.get("consumeType"),
        resettable=resettable,
        now_input=datetime_input(int(time.time() * 1000)),
    )


@blueprint.route("/consumers/<group>/reset", methods=["POST"])
def reset_offset(group: str) -> Response:
    check_write()
    topic = topic_field("topic")
    when = time_field("timestamp")
    if when is None:
        raise BadInput("timestamp is missing: expected the date and time to consume from")
    rows = admin().reset_offset(checked_group(group), topic, when)
    moved = ", ".join(f"{r.broker_name}/{r.queue_id} to {r.offset}" for r in rows) or "no queue"
    flash(f"{group} on {topic} reset: {moved}", "done")
    return redirect(url_for("pages.consumer", group=group))


# -- producers ----------------------------------------------------------------------------------


@blueprint.route("/producers")
def producers() -> str:
    group = request.args.get("group", "").strip()
    topic = request.args.get("topic", "").strip()
    connections: list[dict[str, Any]] = []
    missing = None
    if group:
        group = group_field("group")
        try:
            connections = admin().producer_connections(group, topic or None)
        except NotFound as e:
            missing = str(e)
    return render_template("producers.html", group=group, topic=topic, connections=connections, missing=missing)
