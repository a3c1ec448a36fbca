"""rmq-admin's operator commands of mqadmin's daily set (issue 28, part 1), registered on ``rmq-admin``
by ``rmq.cli.admin``:

    rmq-admin group update GroupA --retry-max-times 2 --no-consume-enable     (updateSubGroup)
    rmq-admin group delete GroupA --remove-offset                             (deleteSubGroup)
    rmq-admin group list                                                      (every master's groups)
    rmq-admin broker config get broker-a        rmq-admin broker config update broker-a brokerPermission=4
    rmq-admin broker wipe-write-perm broker-a   rmq-admin broker add-write-perm broker-a
    rmq-admin kv put ORDER_TOPIC_CONFIG TopicA "broker-a:4"   rmq-admin kv get|delete NAMESPACE KEY

Each takes -n/--json/--timeout and the credentials as every rmq-admin command does;
``rmq.cli.admin`` adds the groups to ``rmq-admin``.
"""

from __future__ import annotations

from typing import Any

import click

from rmq.cli.admin_base import admin_command, emit, render_key_values, render_table
from rmq.client.admin_client import AdminClient
from rmq.errors import NotFound

# SubscriptionGroupConfig's JSON names, and the option each is set with (None: not an option)
_GROUP_OPTIONS = {
    "consume_enable": "consumeEnable",
    "consume_from_min_enable": "consumeFromMinEnable",
    "consume_broadcast_enable": "consumeBroadcastEnable",
    "consume_message_orderly": "consumeMessageOrderly",
    "notify_consumer_ids_changed_enable": "notifyConsumerIdsChangedEnable",
    "retry_queue_nums": "retryQueueNums",
    "retry_max_times": "retryMaxTimes",
    "broker_id": "brokerId",
    "which_broker_when_consume_slowly": "whichBrokerWhenConsumeSlowly",
}


@click.group("group")
def group_commands() -> None:
    """Consumer groups' settings on the brokers (SubscriptionGroupConfig): create, change, delete, list."""


def _targets(fn: Any) -> Any:
    fn = click.option("-b", "--broker", "broker_addr", default=None, help="Only this broker (host:port).")(fn)
    return click.option("-c", "--cluster", "cluster_name", default=None, help="Only the masters of this cluster.")(fn)


def _flag(name: str, help_text: str) -> Any:
    dashed = name.replace("_", "-")
    return click.option(f"--{dashed}/--no-{dashed}", name, default=None, help=help_text)


@admin_command(group_commands, "update")
@click.argument("group")
@_flag("consume_enable", "Whether the group may consume at all (off: pulls and pops are refused NO_PERMISSION).")
@_flag("consume_from_min_enable", "Kept for mqadmin (4.x's brokers store it and act on it nowhere, as rmq).")
@_flag("consume_broadcast_enable", "Whether its consumers may consume in BROADCASTING mode.")
@_flag("consume_message_orderly", "FIFO for RocketMQ 5.x clients: one message of a queue at a time.")
@_flag("notify_consumer_ids_changed_enable", "Tell its consumers to rebalance when members come or go.")
@click.option("--retry-queue-nums", type=click.IntRange(min=1), default=None, help="Queues of %RETRY%<group>.")
@click.option(
    "--retry-max-times",
    type=click.IntRange(min=0),
    default=None,
    help="Retries of a failing message before it goes to %DLQ%<group> (5.x clients: max attempts - 1).",
)
@click.option("--broker-id", type=click.IntRange(min=0), default=None, help="The broker its pulls are steered to.")
@click.option(
    "--which-broker-when-consume-slowly",
    type=click.IntRange(min=0),
    default=None,
    help="The broker (a slave id) pulls are steered to when they read far behind the CommitLog's end.",
)
@_targets
def group_update(
    admin: AdminClient, as_json: bool, group: str, cluster_name: str | None, broker_addr: str | None, **fields: Any
) -> None:
    """Create GROUP or change the settings given; the others keep the values the first broker has
    (the defaults for a new group). Sent to every master (or -c/-b), as mqadmin updateSubGroup."""
    addrs = admin.target_brokers(cluster_name, broker_addr)
    config = dict(admin.subscription_groups(addrs[0]).get(group) or {})
    config["groupName"] = group
    for name, json_name in _GROUP_OPTIONS.items():
        if fields.get(name) is not None:
            config[json_name] = fields[name]
    for addr in addrs:
        admin.update_subscription_group(config, broker_addr=addr)
    emit(
        as_json,
        {"group": group, "config": config, "brokers": addrs},
        lambda: (
            f"set consumer group {group} on {', '.join(addrs)}: "
            + ", ".join(f"{k}={v}" for k, v in sorted(config.items()) if k != "groupName")
        ),
    )


@admin_command(group_commands, "delete")
@click.argument("group")
@click.option("--remove-offset", is_flag=True, help="Forget the group's committed offsets too.")
@_targets
def group_delete(
    admin: AdminClient,
    as_json: bool,
    group: str,
    remove_offset: bool,
    cluster_name: str | None,
    broker_addr: str | None,
) -> None:
    """Delete GROUP's settings on every master (or -c/-b). A group still consumed comes back with
    the defaults when the brokers auto-create groups (autoCreateSubscriptionGroup)."""
    addrs = admin.delete_subscription_group(group, remove_offset, cluster_name, broker_addr)
    emit(
        as_json,
        {"group": group, "removeOffset": remove_offset, "brokers": addrs},
        lambda: (
            f"deleted consumer group {group} on {', '.join(addrs)}" + (" with its offsets" if remove_offset else "")
        ),
    )


@admin_command(group_commands, "list")
@_targets
def group_list(admin: AdminClient, as_json: bool, cluster_name: str | None, broker_addr: str | None) -> None:
    """Every consumer group of every master (or -c/-b) with its settings."""
    rows = [
        {"brokerAddr": addr, **config}
        for addr in admin.target_brokers(cluster_name, broker_addr)
        for _, config in sorted(admin.subscription_groups(addr).items())
    ]
    emit(
        as_json,
        rows,
        lambda: render_table(
            ["Broker", "Group", "Consume", "Broadcast", "Orderly", "Retry Queues", "Retry Max", "Broker Id", "Slow Id"],
            [
                [
                    r["brokerAddr"],
                    r["groupName"],
                    r.get("consumeEnable"),
                    r.get("consumeBroadcastEnable"),
                    r.get("consumeMessageOrderly", False),
                    r.get("retryQueueNums"),
                    r.get("retryMaxTimes"),
                    r.get("brokerId"),
                    r.get("whichBrokerWhenConsumeSlowly"),
                ]
                for r in rows
            ],
        ),
    )


# -- broker settings at runtime -------------------------------------------------------------------


@click.group()
def broker_commands() -> None:
    """Holds the ``rmq-admin broker`` subcommands of this module; ``rmq.cli.admin`` adds them to ``broker``."""


@broker_commands.group("config")
def broker_config_commands() -> None:
    """A broker's settings while it runs (GET_BROKER_CONFIG / UPDATE_BROKER_CONFIG)."""


@admin_command(broker_config_commands, "get")
@click.argument("broker_name", metavar="BROKER_ADDR_OR_NAME")
@click.argument("keys", nargs=-1)
def broker_config_get(admin: AdminClient, as_json: bool, broker_name: str, keys: tuple[str, ...]) -> None:
    """BROKER's settings (only KEYS, when given), as the broker runs with them."""
    addr = admin.broker_address(broker_name)
    table = admin.broker_config(addr)
    if keys:
        missing = [k for k in keys if k not in table]
        if missing:
            raise NotFound(f"{addr} has no setting {', '.join(missing)}")
        table = {k: table[k] for k in keys}
    emit(as_json, {"brokerAddr": addr, "config": dict(sorted(table.items()))}, lambda: render_key_values(table, "="))


@admin_command(broker_config_commands, "update")
@click.argument("broker_name", metavar="BROKER_ADDR_OR_NAME")
@click.argument("settings", nargs=-1, required=True, metavar="KEY=VALUE...")
def broker_config_update(admin: AdminClient, as_json: bool, broker_name: str, settings: tuple[str, ...]) -> None:
    """Change settings of BROKER that may change while it runs, and keep them in its config file.
    A key that is unknown, a wrong value or a setting that needs a restart is refused and nothing
    changes."""
    changes = {}
    for item in settings:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{item!r}: expected KEY=VALUE", param_hint="KEY=VALUE")
        changes[key.strip()] = value.strip()
    addr = admin.broker_address(broker_name)
    admin.update_broker_config(addr, changes)
    emit(
        as_json,
        {"brokerAddr": addr, "updated": changes},
        lambda: f"{addr}: " + ", ".join(f"{k}={v}" for k, v in changes.items()),
    )


# -- maintenance on the name servers --------------------------------------------------------------


def _write_perm(admin: AdminClient, as_json: bool, broker_name: str, writeable: bool) -> None:
    counts = admin.set_write_perm_of_broker(broker_name, writeable)
    verb = "gave write permission back to" if writeable else "took write permission off"
    emit(
        as_json,
        {"brokerName": broker_name, "writeable": writeable, "topicCounts": counts},
        lambda: "\n".join(f"{addr}: {verb} {count} topic routes of {broker_name}" for addr, count in counts.items()),
    )


@admin_command(broker_commands, "wipe-write-perm")
@click.argument("broker_name", metavar="BROKER")
def broker_wipe_write_perm(admin: AdminClient, as_json: bool, broker_name: str) -> None:
    """Drain BROKER before a restart: every name server takes the write permission off its topic
    routes, so producers send elsewhere from their next route refresh (30 s) while consumers go on
    reading it. Lasts until add-write-perm or a change of the broker's topics."""
    _write_perm(admin, as_json, broker_name, False)


@admin_command(broker_commands, "add-write-perm")
@click.argument("broker_name", metavar="BROKER")
def broker_add_write_perm(admin: AdminClient, as_json: bool, broker_name: str) -> None:
    """Give BROKER's topic routes their write permission back on every name server."""
    _write_perm(admin, as_json, broker_name, True)


@click.group("kv")
def kv_commands() -> None:
    """The name servers' KV config (namespace, key -> value), e.g. ORDER_TOPIC_CONFIG."""


@admin_command(kv_commands, "put")
@click.argument("namespace")
@click.argument("key")
@click.argument("value")
def kv_put(admin: AdminClient, as_json: bool, namespace: str, key: str, value: str) -> None:
    """Set KEY of NAMESPACE to VALUE on every name server."""
    addrs = admin.put_kv_config(namespace, key, value)
    emit(
        as_json,
        {"namespace": namespace, "key": key, "value": value, "namesrvs": addrs},
        lambda: f"{namespace} {key} = {value} on {', '.join(addrs)}",
    )


@admin_command(kv_commands, "get")
@click.argument("namespace")
@click.argument("key")
def kv_get(admin: AdminClient, as_json: bool, namespace: str, key: str) -> None:
    """KEY's value in NAMESPACE (exit 3 when there is none)."""
    value = admin.get_kv_config(namespace, key)
    emit(as_json, {"namespace": namespace, "key": key, "value": value}, lambda: value)


@admin_command(kv_commands, "delete")
@click.argument("namespace")
@click.argument("key")
def kv_delete(admin: AdminClient, as_json: bool, namespace: str, key: str) -> None:
    """Delete KEY of NAMESPACE on every name server."""
    addrs = admin.delete_kv_config(namespace, key)
    emit(
        as_json,
        {"namespace": namespace, "key": key, "namesrvs": addrs},
        lambda: f"deleted {namespace} {key} on {', '.join(addrs)}",
    )
