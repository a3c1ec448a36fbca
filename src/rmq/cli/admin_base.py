"""What every ``rmq-admin`` command shares: the -n/--json/--timeout/credential options, errors as a
one-line message and an exit code (0 done, 1 failed, 2 bad usage, 3 not found), tables and JSON on
stdout, messages shown, times read. The commands are ``rmq.cli.admin``'s and those of the modules it
registers (``rmq.cli.admin_ops``, ``rmq.cli.admin_runtime``).
"""

from __future__ import annotations

import base64
import datetime
import functools
import json
import ssl
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import click

from rmq.client.admin_client import DEFAULT_NAMESRV, DEFAULT_TIMEOUT, RESET_TO_LATEST, AdminClient, message_body
from rmq.errors import AdminError, NotFound, RemotingError, ResponseError
from rmq.protocol.codes import ResponseCode
from rmq.protocol.message import MessageProperty
from rmq.protocol.record import StoredMessage

EXIT_FAILED = 1
EXIT_NOT_FOUND = 3
NOT_FOUND_CODES = (ResponseCode.TOPIC_NOT_EXIST, ResponseCode.QUERY_NOT_FOUND, ResponseCode.CONSUMER_NOT_ONLINE)
# How much of a body the human view of a message shows.
BODY_PREVIEW_BYTES = 4096


# -- output -------------------------------------------------------------------------------------


def format_time(ms: int) -> str:
    if ms <= 0:
        return "-"
    return datetime.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def render_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """Columns padded to their widest cell; numbers right-aligned."""
    rows = [[str(cell) for cell in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    numeric = [all(r[i].lstrip("-").isdigit() for r in rows) and bool(rows) for i in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        padded = (c.rjust(w) if num else c.ljust(w) for c, w, num in zip(cells, widths, numeric, strict=True))
        return "  ".join(padded).rstrip()

    return "\n".join([line(headers)] + [line(r) for r in rows])


def render_key_values(table: dict[str, str], separator: str) -> str:
    """``key <separator> value`` a line, sorted by key, the separators aligned."""
    width = max(map(len, table), default=0)
    return "\n".join(f"{key:<{width}} {separator} {value}" for key, value in sorted(table.items()))


def emit(ctx_json: bool, data: Any, human: Callable[[], str]) -> None:
    click.echo(json.dumps(data, indent=2) if ctx_json else human())


def message_json(m: StoredMessage) -> dict[str, Any]:
    body = message_body(m)
    try:
        text, encoding = body.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        text, encoding = base64.b64encode(body).decode(), "base64"
    return {
        "msgId": m.msg_id,
        "topic": m.topic,
        "tags": m.tags,
        "keys": m.keys,
        "uniqKey": m.properties.get(MessageProperty.UNIQ_KEY),
        "queueId": m.queue_id,
        "queueOffset": m.queue_offset,
        "commitLogOffset": m.physical_offset,
        "reconsumeTimes": m.reconsume_times,
        "bornTimestamp": m.born_timestamp,
        "storeTimestamp": m.store_timestamp,
        "bornHost": f"{m.born_host[0]}:{m.born_host[1]}",
        "storeHost": f"{m.store_host[0]}:{m.store_host[1]}",
        "sysFlag": m.sys_flag,
        "properties": m.properties,
        "body": text,
        "bodyEncoding": encoding,
        "bodySize": len(body),
    }


def message_human(m: StoredMessage) -> str:
    body = message_body(m)
    preview = body[:BODY_PREVIEW_BYTES]
    try:
        shown = preview.decode("utf-8")
    except UnicodeDecodeError:
        shown = preview.hex(" ")
    if len(body) > len(preview):
        shown += f"\n... ({len(body) - len(preview)} more bytes; --json has all of it)"
    fields = [
        ("Message ID", m.msg_id),
        ("Topic", m.topic),
        ("Tags", m.tags or "-"),
        ("Keys", " ".join(m.keys) or "-"),
        ("Client ID", m.properties.get("UNIQ_KEY", "-")),
        ("Queue ID", m.queue_id),
        ("Queue Offset", m.queue_offset),
        ("CommitLog Offset", m.physical_offset),
        ("Reconsume Times", m.reconsume_times),
        ("Born Timestamp", format_time(m.born_timestamp)),
        ("Store Timestamp", format_time(m.store_timestamp)),
        ("Born Host", f"{m.born_host[0]}:{m.born_host[1]}"),
        ("Store Host", f"{m.store_host[0]}:{m.store_host[1]}"),
        ("System Flag", m.sys_flag),
        ("Properties", m.properties),
        ("Body", f"{len(body)} bytes"),
    ]
    return "\n".join(f"{name + ':':<18}{value}" for name, value in fields) + "\n" + shown


# -- the commands' shared options and error handling --------------------------------------------


# -- the commands' shared options and error handling --------------------------------------------


def admin_command(group: click.Group, name: str, **kwargs) -> Callable:
    """A subcommand of ``group`` with -n/--json/--timeout, run with an AdminClient; errors become a
    one-line message on stderr and the exit code."""

    def decorate(fn: Callable) -> click.Command:
        @group.command(name, **kwargs)
        @click.option(
            "-n",
            "--namesrv",
            envvar="NAMESRV_ADDR",
            default=DEFAULT_NAMESRV,
            show_default=True,
            help="Name server address(es), host:port[;host:port].",
        )
        @click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts instead of tables.")
        @click.option(
            "--timeout",
            default=DEFAULT_TIMEOUT,
            show_default=True,
            type=click.FloatRange(min=0.1),
            help="Seconds to wait for each answer.",
        )
        @click.option(
            "--access-key",
            envvar="RMQ_ACCESS_KEY",
            default=None,
            help="Sign requests with this access key (brokers with aclEnable); needs --secret-key.",
        )
        @click.option(
            "--secret-key",
            envvar="RMQ_SECRET_KEY",
            default=None,
            help="The access key's secret (or the RMQ_SECRET_KEY environment variable, kept out of ps).",
        )
        @click.option(
            "--tls", "use_tls", is_flag=True, help="Connect with TLS, verifying servers against the system's CAs."
        )
        @click.option(
            "--tls-ca",
            default=None,
            type=click.Path(exists=True, dir_okay=False),
            help="Connect with TLS, verifying servers against this CA certificate (PEM).",
        )
        @functools.wraps(fn)
        def command(
            namesrv: str,
            as_json: bool,
            timeout: float,
            access_key: str | None,
            secret_key: str | None,
            use_tls: bool,
            tls_ca: str | None,
            **params,
        ):
            if (access_key is None) != (secret_key is None):
                raise click.UsageError("--access-key and --secret-key go together")
            credentials = (access_key, secret_key) if access_key and secret_key else None
            tls: bool | ssl.SSLContext = use_tls
            if tls_ca:
                tls = ssl.create_default_context(cafile=tls_ca)
                tls.check_hostname = False  # brokers and name servers are addressed by IP
            try:
                with AdminClient(namesrv, timeout, credentials=credentials, tls=tls) as admin:
                    fn(admin, as_json, **params)
            except NotFound as e:
                fail(str(e), EXIT_NOT_FOUND)
            except ResponseError as e:
                fail(describe_refusal(e), EXIT_NOT_FOUND if e.code in NOT_FOUND_CODES else EXIT_FAILED)
            except RemotingError as e:
                fail(f"cannot reach the cluster: {e}", EXIT_FAILED)
            except AdminError as e:
                fail(str(e), EXIT_FAILED)

        return command

    return decorate


def describe_refusal(e: ResponseError) -> str:
    try:
        name = ResponseCode(e.code).name
    except ValueError:
        name = f"code {e.code}"
    return f"{e.address or 'the peer'} answered {name}: {e.remark or 'no remark'}"


def fail(message: str, code: int) -> None:
    click.echo(f"rmq-admin: {message}", err=True)
    sys.exit(code)


def parse_timestamp(text: str) -> int:
    """ms since the epoch from: digits (ms), ``now``, ``latest`` (the end of every queue), an ISO
    date-time (local time), or mqadmin's ``yyyy-MM-dd#HH:mm:ss:SSS``."""
    value = text.strip()
    if value.lstrip("-").isdigit():
        return int(value)
    if value.lower() == "now":
        return int(datetime.datetime.now().timestamp() * 1000)
    if value.lower() == "latest":
        return RESET_TO_LATEST
    for fmt in ("%Y-%m-%d#%H:%M:%S:%f", None):
        try:
            when = datetime.datetime.strptime(value, fmt) if fmt else datetime.datetime.fromisoformat(value)
            return int(when.timestamp() * 1000)
        except ValueError:
            continue
    raise click.BadParameter(
        f"{text!r}: expected milliseconds, 'now', 'latest', an ISO date-time "
        "(2024-05-01T12:00:00) or yyyy-MM-dd#HH:mm:ss:SSS"
    )
