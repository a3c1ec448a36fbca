"""Every setting of rmq, declared once: key (RocketMQ's name), type, default, allowed values, help.

How settings are read and checked, and where each one came from:

    loaded = load_settings("broker.conf", [("--set", {"flushDiskType": "SYNC_FLUSH"})])
    broker_config = BrokerConfig.from_settings(loaded)         # rmq.broker.config
    store_config = MessageStoreConfig.from_settings(loaded)    # rmq.store.config
    loaded.source("flushDiskType")                             # '--set'

Strict, the way a new user needs it: an unknown key (with a "did you mean"), a value of the wrong
type or out of range, an unreadable file: each a ``ConfigError`` whose one line names the key, the
value, what was expected and where it came from. What can be checked here is not left to fail later
on some service thread.

A role's config is a dataclass of ``SettingsView`` whose fields are declared ``setting(KEY)``: the
field's default and checks come from the declaration below, and ``tests/test_settings.py`` checks
that every declared key is a field of some config and every field names a declared key. A new
setting (replication, ACL, perf) is one ``Setting(...)`` line here and one field there.

Keys are RocketMQ's camelCase names (``brokerIP1``); their snake_case attribute names
(``broker_ip1``) are accepted too.
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import ipaddress
import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from rmq.errors import ConfigError
from rmq.protocol.acl import ClusterAuthMode
from rmq.protocol.controller import parse_peers
from rmq.protocol.message import MAX_MESSAGE_SIZE, topic_error
from rmq.protocol.perm import PERM_ALL, PERM_READ, PERM_WRITE
from rmq.protocol.route import MASTER_ID
from rmq.protocol.tls import TlsMode

DEFAULT_SOURCE = "default"
KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30


class BrokerRole(str, enum.Enum):
    """brokerRole: a master answers sends after its own flush (ASYNC) or after a slave acked (SYNC)."""

    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"


class MetricsExporterType(str, enum.Enum):
    """metricsExporterType: RocketMQ 5.x's; rmq exports to Prometheus only (no OTLP_GRPC, no LOG)."""

    DISABLE = "DISABLE"
    PROM = "PROM"


class FlushDiskType(str, enum.Enum):
    """flushDiskType: answer a send once its bytes are in the page cache (ASYNC) or on disk (SYNC)."""

    ASYNC_FLUSH = "ASYNC_FLUSH"
    SYNC_FLUSH = "SYNC_FLUSH"


def camel_to_snake(name: str) -> str:
    """``storePathRootDir`` -> ``store_path_root_dir``, ``brokerIP1`` -> ``broker_ip1``."""
    name = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    return name.lower()


# -- kinds: how a value is read from text and checked ----------------------------------------------


class Invalid(Exception):
    """A value a kind refuses; the message continues "<key> ...", e.g. "must be an integer, got 'x'"."""


class Kind:
    """How one type of setting is read from text (``parse``), checked when typed (``check``) and
    written back (``format``)."""

    #: what a value must be, as the error and --print-config say it ("an integer", "true or false")
    expected: str = "a value"

    def parse(self, text: str) -> Any:
        return self.check(text.strip())

    def check(self, value: Any) -> Any:
        return value

    def format(self, value: Any) -> str:
        return str(value)

    def refuse(self, value: Any, expected: str | None = None) -> Invalid:
        shown = repr(value) if isinstance(value, str) else str(value)
        return Invalid(f"must be {expected or self.expected}, got {shown}")


class Int(Kind):
    """An integer, optionally bounded."""

    def __init__(
        self,
        minimum: int | None = None,
        maximum: int | None = None,
        expected: str | None = None,
        optional: bool = False,
    ):
        self.minimum = minimum
        self.maximum = maximum
        self.optional = optional  # None (or empty text) means unset: a default derived from others
        if expected is not None:
            self.expected = expected
        elif minimum is not None and maximum is not None:
            self.expected = f"an integer from {minimum} to {maximum}"
        elif minimum is not None:
            self.expected = f"at least {minimum}"
        else:
            self.expected = "an integer"

    def parse(self, text: str) -> int:
        if self.optional and not text.strip():
            return None  # type: ignore[return-value]
        try:
            value = int(text.strip())
        except ValueError:
            raise self.refuse(text, "an integer") from None
        return self.check(value)

    def check(self, value: Any) -> int:
        if value is None and self.optional:
            return None  # type: ignore[return-value]
        if isinstance(value, str):
            return self.parse(value)
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.refuse(value, "an integer")
        if (self.minimum is not None and value < self.minimum) or (self.maximum is not None and value > self.maximum):
            raise self.refuse(value)
        return value


class Size(Int):
    """A number of bytes: ``1073741824``, or with a unit, ``64k``, ``512m``, ``1g`` (also KiB/MiB/GiB)."""

    _UNITS = {"": 1, "k": KiB, "kb": KiB, "kib": KiB, "m": MiB, "mb": MiB, "mib": MiB, "g": GiB, "gb": GiB, "gib": GiB}
    _PATTERN = re.compile(r"^(\d+)\s*([a-z]*)$")

    def __init__(self, minimum: int = 0):
        super().__init__(minimum, None, f"a size of at least {minimum} bytes")

    def parse(self, text: str) -> int:
        match = self._PATTERN.match(text.strip().lower())
        if match is None or match.group(2) not in self._UNITS:
            raise self.refuse(text, "a size in bytes, like 1073741824 or 1g")
        return self.check(int(match.group(1)) * self._UNITS[match.group(2)])


class Bool(Kind):
    # Java's Boolean.parseBoolean reads anything but "true" as false; a typo must not silently turn a
    # feature off.
    expected = "true or false"

    def parse(self, text: str) -> bool:
        lowered = text.strip().lower()
        if lowered not in ("true", "false"):
            raise self.refuse(text)
        return lowered == "true"

    def check(self, value: Any) -> bool:
        if isinstance(value, str):
            return self.parse(value)
        if not isinstance(value, bool):
            raise self.refuse(value)
        return value

    def format(self, value: Any) -> str:
        return "true" if value else "false"


class Ratio(Kind):
    """A fraction from 0 to 1, like ``0.90`` (RocketMQ's disk levels are such system properties)."""

    expected = "a fraction from 0 to 1, like 0.90"

    def parse(self, text: str) -> float:
        try:
            value = float(text.strip())
        except ValueError:
            raise self.refuse(text) from None
        return self.check(value)

    def check(self, value: Any) -> float:
        if isinstance(value, str):
            return self.parse(value)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value <= 1:
            raise self.refuse(value)
        return float(value)


class Choice(Kind):
    """One member of a string enum, by value."""

    def __init__(self, enum_type: type[enum.Enum]):
        self.enum_type = enum_type
        self.expected = "one of " + ", ".join(str(m.value) for m in enum_type)

    def check(self, value: Any) -> enum.Enum:
        if isinstance(value, self.enum_type):
            return value
        try:
            return self.enum_type(str(value).strip())
        except ValueError:
            raise self.refuse(value) from None

    def format(self, value: Any) -> str:
        return str(value.value)


class Text(Kind):
    """A string; empty means unset (None) when ``optional``. ``validate`` returns why a value is
    refused (the rest of the message after the key), or None."""

    def __init__(
        self, optional: bool = False, validate: Callable[[str], str | None] | None = None, expected: str = "a string"
    ):
        self.optional = optional
        self.validate = validate
        self.expected = expected

    def check(self, value: Any) -> str | None:
        if value is None and self.optional:
            return None
        if not isinstance(value, str):
            raise self.refuse(value)
        text = value.strip()
        if not text:
            if self.optional:
                return None
            raise self.refuse(text)
        reason = self.validate(text) if self.validate is not None else None
        if reason is not None:
            raise Invalid(reason)
        return text


def _topic_name(value: str) -> str | None:
    # brokerClusterName and brokerName become topics of their own (a producer may address either).
    reason = topic_error(value)
    return None if reason is None else f"is used as a topic name: {reason}"


def _ipv4(value: str) -> str | None:
    try:
        ipaddress.IPv4Address(value)
    except ValueError:
        return f"must be an IPv4 address, got {value!r}"
    return None


def _addresses(value: str) -> str | None:
    for part in value.split(";"):
        host, sep, port = part.strip().rpartition(":")
        if part.strip() and (not sep or not host or not port.isdigit() or not 0 < int(port) <= 65535):
            return f"must be addresses host:port separated by ';', got {value!r} ({part.strip()!r} is not one)"
    return None


def _address(value: str) -> str | None:
    if ";" in value or _addresses(value) is not None:
        return f"must be an address host:port, got {value!r}"
    return None


def _controller_peers(value: str) -> str | None:
    try:
        parse_peers(value)
    except ValueError as e:
        return f"must be controller peers id-host:port separated by ';': {e}"
    return None


def _hours(value: str) -> str | None:
    hours = [h.strip() for h in value.split(";")]
    if not all(h.isdigit() and 0 <= int(h) <= 23 for h in hours):
        return f"must be hours of the day 0-23 separated by ';' (like 04 or 04;16), got {value!r}"
    return None


DELAY_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"


def parse_delay_levels(levels: str) -> dict[int, int]:
    """``"1s 5s 1m"`` -> ``{1: 1000, 2: 5000, 3: 60000}`` (delay level -> delay in ms).

    The one parser of ``messageDelayLevel``: the store uses it for the deliver time of delayed
    messages, the broker for its schedule service.
    """
    table: dict[int, int] = {}
    for level, token in enumerate(levels.split(), start=1):
        unit = DELAY_UNIT_MS.get(token[-1:])
        if unit is None or not token[:-1].isdigit():
            raise ConfigError(
                f"messageDelayLevel {levels!r}: level {level} is {token!r}, "
                "expected digits followed by one of s, m, h, d"
            )
        table[level] = int(token[:-1]) * unit
    if not table:
        raise ConfigError("messageDelayLevel is empty: expected delays like '1s 5s 10s'")
    return table


def _delay_levels(value: str) -> str | None:
    try:
        parse_delay_levels(value)
    except ConfigError as e:
        return f"must be delays like '1s 5s 10s' (digits, then s, m, h or d): {e}"
    return None


# -- the declarations --------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Setting:
    """One setting: its RocketMQ key, how it is read, its default and a line of help."""

    key: str
    kind: Kind
    default: Any
    help: str
    section: str = ""
    # a value never printed (``rmq-broker -p`` shows it masked)
    secret: bool = False
    # a broker reads it where it is used, so UPDATE_BROKER_CONFIG may change it while the broker runs
    # (``rmq-admin broker config update``); every other setting is read once, at start
    live: bool = False

    @property
    def attr(self) -> str:
        """The attribute name of the setting in the config classes (snake_case)."""
        return camel_to_snake(self.key)

    def check(self, value: Any, source: str = "") -> Any:
        """``value`` (text or typed) as this setting's type, or a ConfigError naming the key."""
        try:
            return self.kind.parse(value) if isinstance(value, str) else self.kind.check(value)
        except Invalid as e:
            where = f" (from {source})" if source else ""
            raise ConfigError(f"{self.key} {e}{where}") from None

    def format(self, value: Any) -> str:
        return "" if value is None else self.kind.format(value)


class SettingsTable(dict[str, Setting]):
    """The settings one command reads (``rmq-broker``'s, ``rmq-namesrv``'s), by key. A key means one
    thing within a table; two tables may give it different defaults (RocketMQ's ``listenPort`` is
    10911 for a broker and 9876 for a name server)."""

    def __init__(self, command: str):
        super().__init__()
        #: the command whose ``--print-config`` lists the table, for "is not a setting" errors
        self.command = command
        self._by_attr: dict[str, Setting] = {}

    def declare(self, section: str, *settings: Setting) -> None:
        for s in settings:
            assert s.key not in self, f"setting {s.key} declared twice for {self.command}"
            self[s.key] = dataclasses.replace(s, section=section)
            self._by_attr[s.attr] = self[s.key]

    def lookup(self, key: str, source: str = "") -> Setting:
        """The setting named ``key`` (RocketMQ's camelCase or the snake_case attribute), or a
        ConfigError with a "did you mean" for a misspelt one."""
        found = self.get(key) or self._by_attr.get(key)
        if found is not None:
            return found
        where = f" (from {source})" if source else ""
        by_lower = {k.lower(): k for k in self}
        close = difflib.get_close_matches(key.lower().replace("_", ""), list(by_lower), n=1, cutoff=0.75)
        hint = f"did you mean {by_lower[close[0]]}?" if close else f"{self.command} --print-config lists every setting"
        raise ConfigError(f"{key} is not a setting{where}: {hint}")


#: the broker's and its store's settings (rmq-broker)
SETTINGS = SettingsTable("rmq-broker")
#: the name server's settings (rmq-namesrv), declared after the broker's: it shares several
NAMESRV_SETTINGS = SettingsTable("rmq-namesrv")
#: a controller's settings (rmq-controller); a name server with enableControllerInNamesrv reads them too
CONTROLLER_SETTINGS = SettingsTable("rmq-controller")
#: the dashboard's settings (rmq-dashboard)
DASHBOARD_SETTINGS = SettingsTable("rmq-dashboard")
# rocketmq-dashboard's port (its server.port)
DEFAULT_DASHBOARD_PORT = 8080
# RocketMQ's name server port (NamesrvStartup's listenPort), where clients and brokers look by default
DEFAULT_NAMESRV_PORT = 9876
#: where the SDK and rmq-admin look for a name server when given no address
DEFAULT_NAMESRV_ADDR = f"127.0.0.1:{DEFAULT_NAMESRV_PORT}"
# RocketMQ 5.x's controller port (ControllerStartup's listenPort)
DEFAULT_CONTROLLER_PORT = 9878


def _section(name: str, *settings: Setting) -> None:
    SETTINGS.declare(name, *settings)


# The declarations read as a table, one setting a line or two: ruff format leaves them as written.
# fmt: off
_PORT = Int(0, 65535, "a TCP port (0-65535)")
_POSITIVE_MS = Int(1)

_section(
    "broker",
    Setting("brokerClusterName", Text(validate=_topic_name), "DefaultCluster",
            "the cluster this broker registers in"),
    # RocketMQ defaults to the host name; a fixed name keeps a single-machine quick start predictable.
    Setting("brokerName", Text(validate=_topic_name), "broker-a",
            "the name a master and its slaves share"),
    Setting("brokerId", Int(0), MASTER_ID, "0 for the master, greater than 0 for a slave"),
    Setting("brokerRole", Choice(BrokerRole), BrokerRole.ASYNC_MASTER,
            "ASYNC_MASTER, SYNC_MASTER (sends wait for a slave) or SLAVE"),
    Setting("namesrvAddr", Text(optional=True, validate=_addresses, expected="host:port;host:port"), None,
            "name servers, 'host:port;host:port'; unset: the broker runs one embedded"),
    Setting("listenPort", _PORT, 10911, "the port clients connect to"),
    Setting("namesrvListenPort", _PORT, DEFAULT_NAMESRV_PORT,
            "the port of the embedded name server (rmq only; used when namesrvAddr is unset)"),
    # None until BrokerConfig.resolve(): 127.0.0.1 with an embedded name server, else the host's
    # first non-loopback IPv4 (RocketMQ's only default).
    Setting("brokerIP1", Text(optional=True, validate=_ipv4), None,
            "the address registered with name servers and written into every record (msgIds carry it)"),
    Setting("brokerIP2", Text(optional=True, validate=_ipv4), None,
            "the address slaves use to reach this master's HA port; default haListenAddress if set, "
            "else brokerIP1"),
    # None until BrokerConfig.resolve(): listenPort + 1, as RocketMQ derives it
    Setting("haListenPort", Int(0, 65535, "a TCP port (0-65535)", optional=True), None,
            "the port slaves replicate from; default listenPort + 1"),
    Setting("haListenAddress", Text(optional=True, validate=_ipv4), None,
            "the address haListenPort binds to (one interface: the replication network, or 127.0.0.1); "
            "unset: every interface (0.0.0.0). brokerIP2 defaults to it when set"),
    Setting("brokerPermission", Int(0, PERM_ALL, "a perm bit set 0-7"), PERM_READ | PERM_WRITE,
            "perm bits of the whole broker: 4 read, 2 write", live=True),
    Setting("brokerConfigPath", Text(optional=True), None,
            "the file live changes (rmq-admin broker config update) are written to; unset: the -c file "
            "rmq-broker started with (without one, a change lasts until the broker stops)"),
    Setting("defaultTopicQueueNums", Int(1), 8, "queues of an auto-created topic"),
    Setting("autoCreateTopicEnable", Bool(), True, "create a topic on its first send (through TBW102)", live=True),
    Setting("clusterTopicEnable", Bool(), True, "a topic named after the cluster"),
    Setting("brokerTopicEnable", Bool(), True, "a topic named after the broker"),
    Setting("autoCreateSubscriptionGroup", Bool(), True, "create a consumer group on its first use", live=True),
    Setting("traceTopicEnable", Bool(), False, "create the message trace topic"),
    Setting("msgTraceTopicName", Text(validate=_topic_name), "RMQ_SYS_TRACE_TOPIC", "the message trace topic"),
    Setting("registerBrokerTimeoutMills", _POSITIVE_MS, 6000, "ms a registration with a name server may take"),
    Setting("registerNameServerPeriod", Int(1000), 30_000, "ms between registrations with the name servers"),
    Setting("longPollingEnable", Bool(), True, "park pulls that find nothing until a message arrives", live=True),
    Setting("shortPollingTimeMills", _POSITIVE_MS, 1000, "ms a pull is parked without long polling", live=True),
    Setting("notifyConsumerIdsChangedEnable", Bool(), True, "tell a group's consumers when members change", live=True),
    Setting("slaveReadEnable", Bool(), False, "let consumers read from slaves", live=True),
    Setting("slaveSyncInterval", _POSITIVE_MS, 10_000,
            "ms between a slave's copies of its master's topics, offsets, delay offsets and groups "
            "(rmq's key: RocketMQ fixes it at 10 s)"),
    Setting("waitTimeMillsInSendQueue", _POSITIVE_MS, 200,
            "ms a send may wait before being served; longer is answered SYSTEM_BUSY"),
    Setting("sendThreadPoolQueueCapacity", Int(1), 10_000,
            "sends the broker may hold unanswered (waiting for the disk or a slave); more are "
            "answered SYSTEM_BUSY [OVERLOAD]"),
    Setting("fastLaneEnable", Bool(), True,
            "serve plain sends and pulls in the compiled send and pull lanes (rmq's key; RMQ_NO_FAST_LANE=1 "
            "turns them off too): off, every send and pull takes the Python processor"),
    Setting("flushConsumerOffsetInterval", _POSITIVE_MS, 5000, "ms between writes of consumerOffset.json"),
    Setting("statsLogInterval", Int(0), 60_000,
            "ms between records of <storePathRootDir>/logs/stats.log (per topic and group; 0: none)"),
    # RocketMQ reads this one from the system property rocketmq.broker.rebalance.lockMaxLiveTime.
    Setting("rebalanceLockMaxLiveTime", _POSITIVE_MS, 60_000, "ms a queue lock of an orderly consumer lives"),
    Setting("rejectTransactionMessage", Bool(), False, "refuse transactional (prepared) messages", live=True),
    Setting("transactionTimeOut", _POSITIVE_MS, 6000, "ms a half message waits for its END_TRANSACTION before a check"),
    Setting("transactionCheckMax", Int(1), 15, "check-backs before a half message is given up"),
    Setting("transactionCheckInterval", _POSITIVE_MS, 60_000, "ms between transaction check rounds"),
)

# POP consumption (RocketMQ 5.x's names and defaults; docs/pop.md)
_section(
    "broker",
    Setting("reviveQueueNum", Int(1, 999 - 1), 8,
            "queues of the revive topic rmq_sys_REVIVE_LOG_<cluster>, where POP checkpoints and acks are kept"),
    Setting("reviveInterval", _POSITIVE_MS, 1000,
            "ms between revive rounds: unacked POP messages past their invisible time go to the retry topic"),
    Setting("popFromRetryProbability", Int(0, 100), 20,
            "percent of POP requests that look in the group's POP retry topic first"),
    Setting("maxPopPollingSize", Int(0), 100000, "POP long polls parked at once; more are answered POLLING_FULL"),
)

# SQL92 subscriptions (RocketMQ's name and default): filtered on the broker, by message properties.
_section(
    "broker",
    Setting("enablePropertyFilter", Bool(), False,
            "filter pulls of SQL92 subscriptions by message properties; off: such pulls are refused"),
)

# Reads from slaves (RocketMQ's names): where pulls are steered when a consumer reads far behind.
_section(
    "broker",
    Setting("whichBrokerWhenConsumeSlowly", Int(0), 1,
            "the brokerId a pull answer suggests to a group reading far behind (slaveReadEnable); "
            "the default of groups created on this broker, per group in subscriptionGroup.json"),
)
_section(
    "store",
    Setting("accessMessageInMemoryMaxRatio", Int(0, 100), 40,
            "percent of physical memory a pull may read behind the CommitLog's end before the answer "
            "suggests whichBrokerWhenConsumeSlowly (slaveReadEnable)"),
)

_section(
    "store",
    Setting("storePathRootDir", Text(), os.path.join(os.path.expanduser("~"), "store"),
            "the store's directory: commitlog/, consumequeue/, index/, config/, logs/"),
    Setting("mappedFileSizeCommitLog", Size(4096), GiB, "bytes of one CommitLog file"),
    Setting("mappedFileSizeConsumeQueue", Size(20), 300_000 * 20,
            "bytes of one ConsumeQueue file (20-byte entries)"),
    Setting("flushDiskType", Choice(FlushDiskType), FlushDiskType.ASYNC_FLUSH,
            "ASYNC_FLUSH (flush in the background) or SYNC_FLUSH (a send waits for its group commit)"),
    Setting("flushIntervalCommitLog", _POSITIVE_MS, 500, "ms between ASYNC_FLUSH rounds"),
    Setting("flushCommitLogLeastPages", Int(0), 4, "dirty pages an ASYNC_FLUSH round needs before it flushes"),
    Setting("flushCommitLogThoroughInterval", _POSITIVE_MS, 10_000,
            "ms after which an ASYNC_FLUSH round flushes whatever is dirty"),
    Setting("flushIntervalConsumeQueue", _POSITIVE_MS, 1000, "ms between ConsumeQueue and index flushes"),
    Setting("syncFlushTimeout", Int(0), 5000,
            "ms a SYNC_FLUSH send waits for its group commit before FLUSH_DISK_TIMEOUT"),
    # rmq's key (RocketMQ always hands a round to its GroupCommitService): docs/sync-flush.md
    Setting("syncFlushInlineMaxMicros", Int(0), 0,
            "SYNC_FLUSH: while each of the last 16 flush rounds' msyncs took at most this many us, the "
            "broker's event loop makes a round of up to 16 sends itself when nothing else is ready, "
            "saving the hand-off to the flush thread and back; a slower round sends the next ones back "
            "to the flush thread (0, the default: always the flush thread; it pays only where a flush "
            "costs less than the hand-off, docs/sync-flush.md)"),
    Setting("osPageCacheBusyTimeOutMills", _POSITIVE_MS, 1000,
            "ms the oldest send may wait for the disk before new sends are answered SYSTEM_BUSY "
            "[PCBUSY_CLEAN_QUEUE]"),
    Setting("fileReservedTime", Int(0), 72, "hours a CommitLog file is kept"),
    Setting("deleteWhen", Text(validate=_hours), "04", "hours of the day (';'-separated) when expired files go"),
    Setting("diskMaxUsedSpaceRatio", Int(0, 100), 75,
            "percent of the disk above which expired files are deleted at any hour, not only at deleteWhen"),
    # RocketMQ reads these two as system properties (rocketmq.broker.diskSpace...Ratio), fractions:
    # kept as fractions so that a value copied from a RocketMQ deployment means the same here.
    Setting("diskSpaceCleanForciblyRatio", Ratio(), 0.85,
            "fraction of the disk above which the oldest CommitLog files are deleted even if not expired"),
    Setting("diskSpaceWarningLevelRatio", Ratio(), 0.90,
            "fraction of the disk above which the store marks itself full and refuses writes"),
    Setting("cleanResourceInterval", _POSITIVE_MS, 10_000, "ms between retention checks"),
    Setting("maxMessageSize", Size(1), MAX_MESSAGE_SIZE, "bytes of the largest message body accepted"),
    Setting("maxHashSlotNum", Int(1), 5_000_000, "hash slots of an IndexFile"),
    Setting("maxIndexNum", Int(1), 20_000_000, "entries of an IndexFile"),
    Setting("messageDelayLevel", Text(validate=_delay_levels), DEFAULT_DELAY_LEVELS,
            "the delay of each delay level, '1s 5s 10s ...'"),
)

# Timed delivery (RocketMQ 5.x's timer message store: rmq.broker.timer).
_section(
    "store",
    Setting("timerWheelEnable", Bool(), True,
            "accept messages with TIMER_DELIVER_MS / TIMER_DELAY_SEC / TIMER_DELAY_MS (refused when false)"),
    Setting("timerPrecisionMs", Int(100, 1000), 1000, "ms of one tick (slot) of the timing wheel"),
    Setting("timerMaxDelaySec", Int(1), 3 * 24 * 3600,
            "seconds ahead a timed message may be due at most; a later one is refused"),
    Setting("mappedFileSizeTimerLog", Size(4096), 100 * MiB, "bytes of one timer log file"),
)

# Replication (RocketMQ keeps these in MessageStoreConfig too; docs/replication.md).
_section(
    "store",
    Setting("haMasterAddress", Text(optional=True, validate=_address, expected="host:port"), None,
            "a slave's master HA address, host:port; unset: the one the name server answers"),
    Setting("haSendHeartbeatInterval", _POSITIVE_MS, 5000,
            "ms between a slave's offset reports, and between a master's heartbeats to an idle slave"),
    Setting("haHousekeepingInterval", _POSITIVE_MS, 20_000, "ms after which a silent HA peer is dropped"),
    # rmq's, as serverMaxConnections is (RocketMQ bounds neither port)
    Setting("haMaxConnections", Int(1, optional=True), None,
            "slave connections a master serves at once on haListenPort; one more is accepted and closed "
            "at once (logged). Unset: as serverMaxConnections unset, the open-file limit less 256"),
    Setting("haTransferBatchSize", Size(1), 32 * KiB, "bytes of CommitLog a master sends a slave per frame"),
    Setting("haMaxGapNotInSync", Size(0), 256 * MiB,
            "bytes a slave may lag before SYNC_MASTER sends are answered SLAVE_NOT_AVAILABLE at once"),
    Setting("slaveTimeout", _POSITIVE_MS, 3000,
            "ms a SYNC_MASTER send waits for a slave's ack before FLUSH_SLAVE_TIMEOUT"),
    # controller mode's sync state set (RocketMQ 5.x's MessageStoreConfig; docs/controller.md)
    Setting("inSyncReplicas", Int(1), 1,
            "controller mode, SYNC_MASTER: brokers of the sync state set, the master counted, that hold a "
            "send before it is answered (1: the master alone)"),
    Setting("minInSyncReplicas", Int(1), 1,
            "controller mode, SYNC_MASTER: a sync state set smaller than this answers sends "
            "SLAVE_NOT_AVAILABLE at once, and no send is answered with fewer brokers holding it"),
    Setting("allAckInSyncStateSet", Bool(), False,
            "controller mode, SYNC_MASTER: a send is answered once every broker of the sync state set holds it "
            "(inSyncReplicas ignored)"),
    Setting("haMaxTimeSlaveNotCatchup", _POSITIVE_MS, 15_000,
            "ms since a slave last had all of its master's CommitLog after which it is out of the sync state set"),
)

# Access control (RocketMQ 4.x plain ACL: rmq.broker.acl). 4.x reads ${ROCKETMQ_HOME}/conf/plain_acl.yml.
_section(
    "broker",
    Setting("aclEnable", Bool(), False, "check every request's signature and permissions against aclConfigFile"),
    Setting("aclConfigFile", Text(), "conf/plain_acl.yml",
            "the plain_acl.yml of aclEnable, reloaded when it changes; a relative path is taken from "
            "storePathRootDir"),
)

# Cluster authentication (beyond 4.x, which leaves name-server writes and the HA port open): the
# account the cluster's own processes sign with, as plain ACL signs (rmq.protocol.acl).
_section(
    "broker",
    Setting("clusterAccessKey", Text(optional=True), None,
            "the cluster account's access key: name-server writes are signed with it, and a slave proves "
            "it to its master's HA port; it also turns epoch fencing on (a master fences itself only on a "
            "newer master's claim signed with the cluster secret)"),
    Setting("clusterSecretKey", Text(optional=True), None, "the cluster account's secret key (clusterAccessKey)",
            secret=True),
    Setting("clusterAuthMode", Choice(ClusterAuthMode), ClusterAuthMode.ENFORCING,
            "with cluster credentials: enforcing refuses unsigned cluster writes; permissive takes them "
            "and logs each (the upgrade path: give every process the credentials in permissive mode, "
            "then turn every name server and master to enforcing)"),
)

# TLS (rmq.net.tls). RocketMQ 4.x reads these as system properties: tls.enable, tls.server.mode,
# tls.server.certPath, tls.server.keyPath.
_section(
    "broker",
    Setting("tlsEnable", Bool(), False,
            "serve TLS on listenPort, haListenPort (and the embedded name server's port); a slave "
            "replicates from its master over TLS"),
    Setting("tlsServerMode", Choice(TlsMode), TlsMode.PERMISSIVE,
            "permissive: TLS and plain clients (and slaves) on one port; enforcing: TLS only"),
    Setting("tlsServerCertPath", Text(optional=True), None, "the server's certificate chain, PEM (tlsEnable)"),
    Setting("tlsServerKeyPath", Text(optional=True), None, "the server's private key, PEM, unencrypted (tlsEnable)"),
    # a broker's client side: a slave's connection to its master's HA port (tls.client.trustCertPath,
    # tls.test.mode.enable; RocketMQ's test mode defaults to true, trusting any certificate: rmq's
    # default verifies, since the HA stream carries every message)
    Setting("tlsClientTrustCertPath", Text(optional=True), None,
            "CA certificates (PEM) a slave with tlsEnable verifies its master's HA port certificate "
            "against; unset: the system's CAs"),
    Setting("tlsTestModeEnable", Bool(), False,
            "a slave with tlsEnable takes any certificate from its master (encrypted, not verified: "
            "tests only)"),
)

# Connections (rmq.net.server). serverChannelMaxIdleTimeSeconds is RocketMQ's NettyServerConfig key,
# read from broker.conf as RocketMQ reads it; RocketMQ (4.x and 5.x) has no connection maximum, no
# timeout for a frame that never completes and no bound on all connections' unsent answers (only
# Netty's per-channel write-buffer water marks): those keys are rmq's.
_section(
    "broker",
    Setting("serverChannelMaxIdleTimeSeconds", Int(0), 120,
            "seconds a connection may go without reading or writing a byte before it is closed (0: never)"),
    Setting("serverMaxConnections", Int(1, optional=True), None,
            "connections served at once; one more is accepted and closed at once. Unset: the open-file "
            "limit (RLIMIT_NOFILE) less 256 descriptors kept for the broker's own files"),
    Setting("serverSocketBacklog", Int(1), 1024,
            "connections the kernel completes and queues for accept on the listening port (listen()'s "
            "backlog, capped by net.core.somaxconn)"),
    Setting("serverFrameTimeoutSeconds", Int(0), 60,
            "seconds a frame (or a TLS handshake) may take from its first byte to its last before its "
            "connection is closed: a client trickling bytes is not idle (0: never)"),
    Setting("serverMaxPendingWriteBytes", Size(0), 256 * MiB,
            "bytes of answers queued on all connections together and not yet sent; past it the "
            "connections holding more than their share stop being read until they drain, as one "
            "connection stops past 8 MiB of its own (0: no bound beside that one)"),
)

# Metrics (rmq.broker.metrics), RocketMQ 5.x's names and defaults (BrokerConfig).
_section(
    "broker",
    Setting("metricsExporterType", Choice(MetricsExporterType), MetricsExporterType.DISABLE,
            "PROM: serve Prometheus metrics on metricsPromExporterHost:metricsPromExporterPort"),
    Setting("metricsPromExporterHost", Text(optional=True), None,
            "the address the Prometheus endpoint listens on; unset: brokerIP1, as RocketMQ"),
    Setting("metricsPromExporterPort", _PORT, 5557, "the port of the Prometheus endpoint (GET /metrics)"),
)

# The gRPC endpoint for RocketMQ 5.x clients (rmq.proxy, RocketMQ 5.x's proxy in local mode; its
# ProxyConfig keys and defaults; docs/grpc.md).
_section(
    "broker",
    Setting("enableGrpc", Bool(), True,
            "serve RocketMQ 5.x clients (apache.rocketmq.v2.MessagingService) on grpcServerPort beside "
            "the remoting port (rmq's key: RocketMQ runs its proxy as a separate mode)"),
    Setting("grpcServerPort", _PORT, 8081,
            "the port of the gRPC endpoint (enableGrpc); with tlsEnable it serves TLS only, with the "
            "broker's certificate and key"),
    Setting("enableTopicMessageTypeCheck", Bool(), True,
            "refuse a send whose message type (normal, FIFO, delay, transactional) is not its topic's "
            "+message.type attribute (MESSAGE_PROPERTY_CONFLICT_WITH_TYPE; remoting: MESSAGE_ILLEGAL)"),
)

# Controller mode (RocketMQ 5.x's BrokerConfig keys and defaults; docs/controller.md): the controllers
# elect this broker set's master, rmq.broker.replicas follows them.
_section(
    "broker",
    Setting("enableControllerMode", Bool(), False,
            "let the controllers (controllerAddr) decide this broker's role and id: brokerRole and "
            "brokerId are not used; it takes sends once they made it master"),
    Setting("controllerAddr", Text(optional=True, validate=_addresses, expected="host:port;host:port"), None,
            "the controllers' remoting addresses, 'host:port;host:port' (enableControllerMode)"),
    Setting("syncBrokerMetadataPeriod", _POSITIVE_MS, 5000,
            "ms between a broker's asks of its set's master and epoch (CONTROLLER_GET_REPLICA_INFO): a "
            "lost role-change notice delays a switch by at most this"),
    Setting("checkSyncStateSetPeriod", _POSITIVE_MS, 5000,
            "ms between a master's comparisons of its in-sync slaves with the sync state set the "
            "controllers hold (it asks them to alter it when the two differ)"),
    Setting("syncControllerMetadataPeriod", _POSITIVE_MS, 10_000,
            "ms between a broker's asks of which controller leads (CONTROLLER_GET_METADATA_INFO)"),
    Setting("controllerHeartBeatTimeoutMills", _POSITIVE_MS, 10_000,
            "ms without this broker's heartbeat after which the controllers count it gone (and elect "
            "another master if it was the master); it heartbeats every second"),
    Setting("brokerElectionPriority", Int(), 2**31 - 1,
            "the controllers prefer the lowest among candidates of equal epoch and log length"),
)

# The gRPC endpoint's consumer side (rmq.proxy.consumer; RocketMQ 5.x's ProxyConfig keys and defaults):
# what a 5.x consumer's receive may ask for.
_section(
    "broker",
    Setting("minInvisibleTimeMillsForRecv", Int(0), 10_000,
            "ms: the shortest invisible duration a ReceiveMessage may ask for (ILLEGAL_INVISIBLE_TIME "
            "below; ChangeInvisibleDuration may go lower)"),
    Setting("maxInvisibleTimeMills", Int(0), 12 * 3_600_000,
            "ms: the longest invisible duration a receive or a change may ask for (0: no bound)"),
    Setting("defaultInvisibleTimeMills", _POSITIVE_MS, 60_000,
            "ms a message is invisible when its consumer asks for auto renewal (the push consumers)"),
    Setting("enableProxyAutoRenew", Bool(), True,
            "a receive with auto_renew pops for defaultInvisibleTimeMills whatever duration it names"),
    Setting("grpcClientConsumerMinLongPollingTimeoutMillis", _POSITIVE_MS, 5000,
            "ms: the shortest long poll of a ReceiveMessage (a shorter one is lengthened)"),
    Setting("grpcClientConsumerMaxLongPollingTimeoutMillis", _POSITIVE_MS, 20_000,
            "ms: the longest long poll of a ReceiveMessage (a longer one is shortened)"),
    Setting("longPollingReserveTimeInMillis", Int(0), 100,
            "ms of a ReceiveMessage's deadline kept for its answer to travel: the poll ends this much "
            "before the client gives up"),
    Setting("renewSchedulePeriodMillis", _POSITIVE_MS, 5000,
            "ms between scans of the auto-renewed messages (enableProxyAutoRenew) for those to renew"),
    Setting("renewAheadTimeMillis", Int(0), 10_000,
            "ms before its invisible time ends that an auto-renewed message is made invisible for "
            "defaultInvisibleTimeMills more"),
    Setting("renewMaxTimeMillis", _POSITIVE_MS, 3 * 3_600_000,
            "ms after its receive an auto-renewed message is no longer renewed (it comes back when its "
            "invisible time ends)"),
    Setting("maxRenewRetryTimes", Int(0), 3, "failed renewals in a row after which a message is no longer renewed"),
    Setting("invisibleTimeMillisWhenClear", Int(0), 1000,
            "ms: the invisible time left to the auto-renewed messages of a client that went away"),
)

# The name server's (rmq-namesrv -c namesrv.conf, --set): RocketMQ's NamesrvConfig and NettyServerConfig
# keys. What it serves connections with, TLS and the cluster account are the broker's keys, meaning the
# same; a broker's embedded name server takes its broker's values of those.
NAMESRV_SETTINGS.declare(
    "namesrv",
    Setting("listenPort", _PORT, DEFAULT_NAMESRV_PORT, "the port brokers and clients connect to (0: a free one)"),
    Setting("bindAddress", Text(expected="a host name or IP address"), "0.0.0.0",
            "the address listenPort binds to (0.0.0.0: every interface)"),
    Setting("scanNotActiveBrokerInterval", _POSITIVE_MS, 10_000,
            "ms between scans for brokers that stopped sending heartbeats"),
    # RocketMQ's is a constant (RouteInfoManager's BROKER_CHANNEL_EXPIRED_TIME); brokers heartbeat
    # every registerNameServerPeriod (30 s)
    Setting("brokerChannelExpiredTime", _POSITIVE_MS, 120_000,
            "ms of silence after which a broker is dropped from the routes (rmq's key)"),
    Setting("kvConfigPath", Text(), os.path.join(os.path.expanduser("~"), "namesrv", "kvConfig.json"),
            "the file of the KV config operators set (rmq-admin kv; ORDER_TOPIC_CONFIG); an embedded name "
            "server keeps it in memory"),
    *(SETTINGS[key] for key in (
        "serverChannelMaxIdleTimeSeconds", "serverMaxConnections", "serverSocketBacklog",
        "serverFrameTimeoutSeconds", "serverMaxPendingWriteBytes")),
    dataclasses.replace(SETTINGS["tlsEnable"], help="serve TLS on listenPort"),
    dataclasses.replace(SETTINGS["tlsServerMode"], help="permissive: TLS and plain clients on one port; "
                        "enforcing: TLS only"),
    SETTINGS["tlsServerCertPath"],
    SETTINGS["tlsServerKeyPath"],
    dataclasses.replace(SETTINGS["clusterAccessKey"],
                        help="the cluster account (the brokers' clusterAccessKey): registrations, "
                        "unregistrations and topic deletions must be signed by it (plain ACL); reads stay open"),
    SETTINGS["clusterSecretKey"],
    dataclasses.replace(SETTINGS["clusterAuthMode"],
                        help="with clusterAccessKey: enforcing refuses unsigned writes; permissive takes them "
                        "and logs who sent them (the upgrade path)"),
)

# A controller's (rmq-controller -c controller.conf; docs/controller.md): RocketMQ 5.x's ControllerConfig
# keys. RocketMQ's name server reads them from its own file when enableControllerInNamesrv is set, so
# the name server's table holds them too, with the same meaning (scanNotActiveBrokerInterval is then
# both the name server's scan and the controller's, as in RocketMQ where both configs read the key).
_CONTROLLER_RAFT = (
    Setting("controllerDLegerGroup", Text(), "DefaultControllerGroup",
            "the name of the controllers' Raft group (every member the same)"),
    Setting("controllerDLegerPeers", Text(validate=_controller_peers, expected="n0-host:port;n1-host:port"),
            "n0-127.0.0.1:9877",
            "every member's Raft address, n0-host:port;n1-host:port;...: 1, 3 or 5 members, the same on each "
            "(the Raft port is not listenPort: brokers and tools never use it)"),
    Setting("controllerDLegerSelfId", Text(), "n0", "this member's id in controllerDLegerPeers"),
    Setting("controllerStorePath", Text(), os.path.join(os.path.expanduser("~"), "DLedgerController"),
            "the directory of this member's Raft journal and full dump (the replicated broker sets)"),
    Setting("electMasterMaxRetryCount", Int(1), 3,
            "times the leader tries an election its scan asked for before it waits for the next scan"),
    Setting("enableElectUncleanMaster", Bool(), False,
            "elect from any alive broker of the set when none of its sync state set is alive (it may lack "
            "acknowledged messages)"),
    Setting("notifyBrokerRoleChanged", Bool(), True,
            "tell the alive brokers of a set of its new master at once (NOTIFY_BROKER_ROLE_CHANGED); they "
            "also poll"),
)
CONTROLLER_SETTINGS.declare(
    "controller",
    Setting("listenPort", _PORT, DEFAULT_CONTROLLER_PORT,
            "the port brokers and rmq-admin speak remoting to (0: a free one)"),
    dataclasses.replace(NAMESRV_SETTINGS["bindAddress"]),
    dataclasses.replace(NAMESRV_SETTINGS["scanNotActiveBrokerInterval"], default=5000,
                        help="ms between the leader's scans for masters whose heartbeats stopped"),
    *_CONTROLLER_RAFT,
    *(NAMESRV_SETTINGS[key] for key in (
        "serverChannelMaxIdleTimeSeconds", "serverMaxConnections", "serverSocketBacklog",
        "serverFrameTimeoutSeconds", "serverMaxPendingWriteBytes", "tlsEnable", "tlsServerMode",
        "tlsServerCertPath", "tlsServerKeyPath")),
    dataclasses.replace(SETTINGS["clusterAccessKey"],
                        help="the cluster account (the brokers' clusterAccessKey): what brokers ask a controller "
                        "to change, and their heartbeats, must be signed by it (plain ACL); reads stay open"),
    SETTINGS["clusterSecretKey"],
    NAMESRV_SETTINGS["clusterAuthMode"],
)
NAMESRV_SETTINGS.declare(
    "namesrv",
    Setting("enableControllerInNamesrv", Bool(), False,
            "run a controller in this name server, on its listenPort, with the controller keys below"),
    *_CONTROLLER_RAFT,
)

# The dashboard's (rmq-dashboard -c dashboard.conf, --set; docs/dashboard.md): where it listens, the
# cluster it shows, who may use it. rocketmq-dashboard's own keys are Spring's (server.port,
# rocketmq.config.namesrvAddrs, rocketmq.config.loginRequired): here they are spelled as rmq's others.
DASHBOARD_SETTINGS.declare(
    "dashboard",
    Setting("listenPort", _PORT, DEFAULT_DASHBOARD_PORT, "the HTTP port of the dashboard's pages (0: a free one)"),
    dataclasses.replace(NAMESRV_SETTINGS["bindAddress"], help="the address listenPort binds to (0.0.0.0: every "
                        "interface)"),
    Setting("namesrvAddr", Text(validate=_addresses, expected="host:port;host:port"), DEFAULT_NAMESRV_ADDR,
            "the name servers of the cluster shown (rmq-dashboard -n, or $NAMESRV_ADDR, as rmq-admin)"),
    Setting("loginRequired", Bool(), False,
            "every page asks for a login first: an account of the brokers' plain_acl.yml (accessKey and "
            "secretKey), which then signs every request of the session (for clusters with aclEnable)"),
    Setting("readOnly", Bool(), False,
            "offer and accept no writes (topic create, update and delete, offset resets, resends), whoever "
            "is logged in"),
    Setting("sessionSecret", Text(optional=True), None,
            "the key the session cookie is signed with; unset: a new random one per process (a restart "
            "logs everyone out)", secret=True),
    Setting("capacityReportDir", Text(optional=True), None,
            "a directory rmq-capacity wrote (report.html, capacity.json, charts) shown on the capacity "
            "page; unset: the page says how to make one"),
    Setting("adminTimeoutMillis", _POSITIVE_MS, 5000,
            "ms each request to a name server or broker may take before the page says it did not answer"),
    Setting("tlsEnable", Bool(), False,
            "reach the name servers and brokers over TLS, verifying them against the system's CAs or "
            "tlsTrustCertPath (rmq-admin --tls)"),
    # RocketMQ's client property tls.client.trustCertPath
    Setting("tlsTrustCertPath", Text(optional=True), None,
            "the CA certificate (PEM) to verify the cluster's TLS certificates against; implies tlsEnable "
            "(rmq-admin --tls-ca)"),
)

# fmt: on


def lookup(key: str, source: str = "") -> Setting:
    """The broker's setting named ``key`` (``SettingsTable.lookup``)."""
    return SETTINGS.lookup(key, source)


# -- loading -------------------------------------------------------------------------------------------


@dataclasses.dataclass
class LoadedSettings:
    """Typed values of the settings that were given, and where each came from; defaults for the rest."""

    values: dict[str, Any] = dataclasses.field(default_factory=dict)
    sources: dict[str, str] = dataclasses.field(default_factory=dict)
    #: the settings the values are of (the broker's unless said)
    table: SettingsTable = dataclasses.field(default_factory=lambda: SETTINGS, repr=False)

    def value(self, key: str) -> Any:
        return self.values[key] if key in self.values else self.table[key].default

    def source(self, key: str) -> str:
        return self.sources.get(key, DEFAULT_SOURCE)

    def apply(self, source: str, properties: Mapping[str, Any]) -> None:
        """Check ``properties`` (text or typed values) and lay them over what is loaded.
        A None value (an unset command-line option) keeps what was there."""
        for key, value in properties.items():
            setting = self.table.lookup(key, source)
            if value is None:
                continue
            self.values[setting.key] = setting.check(value, source)
            self.sources[setting.key] = source


def load_settings(
    config_file: str | os.PathLike[str] | None = None,
    layers: Iterable[tuple[str, Mapping[str, Any]]] = (),
    table: SettingsTable = SETTINGS,
) -> LoadedSettings:
    """Read ``config_file`` (Java properties, RocketMQ's broker.conf) if given, then each
    ``(source, properties)`` layer over it (``--set``, ``-n``), checking every key and value
    against ``table``."""
    loaded = LoadedSettings(table=table)
    if config_file is not None:
        loaded.apply(f"file {config_file}", read_properties_file(config_file))
    for source, properties in layers:
        loaded.apply(source, properties)
    return loaded


def update_properties_text(text: str, changes: Mapping[str, str]) -> str:
    """``text`` (a properties file) with each key of ``changes`` set: its line rewritten where the
    key is (comments, order and the other lines kept), appended where it is not."""
    lines = text.splitlines()
    left = dict(changes)
    for i, line in enumerate(lines):
        stripped = line.lstrip(" \t\f")
        if not stripped or stripped[0] in "#!" or _continues(stripped):
            continue
        key = _unescape(_split_key_value(stripped)[0])
        if key in left:
            lines[i] = f"{key}={left.pop(key)}"
    lines += [f"{key}={value}" for key, value in left.items()]
    return "\n".join(lines) + "\n"


def read_properties_file(path: str | os.PathLike[str]) -> dict[str, str]:
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise ConfigError(f"cannot read config file {str(path)!r}: {e.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        # Java's Properties.load(InputStream) reads ISO-8859-1, so RocketMQ's own files may be in it.
        text = data.decode("latin-1")
    return parse_properties(text)


def parse_set_options(options: Iterable[str]) -> dict[str, str]:
    """``["key=value", ...]`` from ``--set`` options into a dict (the last one of a key wins)."""
    result = {}
    for option in options:
        key, sep, value = option.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set expects key=value, got {option!r}")
        result[key.strip()] = value.strip()
    return result


# -- the config classes' base ---------------------------------------------------------------------------


def setting(key: str, table: SettingsTable = SETTINGS) -> Any:
    """A dataclass field of a SettingsView: the setting ``key`` of ``table``, with its default."""
    declared = table[key]
    # a secret stays out of the config's repr, and so out of any log line or traceback showing it
    return dataclasses.field(default=declared.default, metadata={"setting": declared}, repr=not declared.secret)


@dataclasses.dataclass
class ServerSettings:
    """The fields of a role's remoting server, one declaration for the three roles that have one
    (BrokerConfig, NamesrvSettings, ControllerSettings): connection limits, TLS, the cluster account.
    ``rmq.net.server_config.ServerConfig`` turns them into what a RemotingServer takes."""

    server_channel_max_idle_time_seconds: int = setting("serverChannelMaxIdleTimeSeconds")
    server_max_connections: int | None = setting("serverMaxConnections")
    server_socket_backlog: int = setting("serverSocketBacklog")
    server_frame_timeout_seconds: int = setting("serverFrameTimeoutSeconds")
    server_max_pending_write_bytes: int = setting("serverMaxPendingWriteBytes")
    tls_enable: bool = setting("tlsEnable")
    tls_server_mode: TlsMode = setting("tlsServerMode")
    tls_server_cert_path: str | None = setting("tlsServerCertPath")
    tls_server_key_path: str | None = setting("tlsServerKeyPath")
    cluster_access_key: str | None = setting("clusterAccessKey")
    cluster_secret_key: str | None = setting("clusterSecretKey")
    cluster_auth_mode: ClusterAuthMode = setting("clusterAuthMode")


@dataclasses.dataclass
class ProxySettings:
    """The fields of the gRPC endpoint a broker runs (rmq.proxy): declared once, read by BrokerConfig
    from the broker's settings and handed to the endpoint's ProxyConfig."""

    enable_grpc: bool = setting("enableGrpc")
    grpc_server_port: int = setting("grpcServerPort")
    enable_topic_message_type_check: bool = setting("enableTopicMessageTypeCheck")
    # the consumer side's (rmq.proxy.consumer)
    min_invisible_time_mills_for_recv: int = setting("minInvisibleTimeMillsForRecv")
    max_invisible_time_mills: int = setting("maxInvisibleTimeMills")
    default_invisible_time_mills: int = setting("defaultInvisibleTimeMills")
    enable_proxy_auto_renew: bool = setting("enableProxyAutoRenew")
    grpc_client_consumer_min_long_polling_timeout_millis: int = setting("grpcClientConsumerMinLongPollingTimeoutMillis")
    grpc_client_consumer_max_long_polling_timeout_millis: int = setting("grpcClientConsumerMaxLongPollingTimeoutMillis")
    long_polling_reserve_time_in_millis: int = setting("longPollingReserveTimeInMillis")
    renew_schedule_period_millis: int = setting("renewSchedulePeriodMillis")
    renew_ahead_time_millis: int = setting("renewAheadTimeMillis")
    renew_max_time_millis: int = setting("renewMaxTimeMillis")
    max_renew_retry_times: int = setting("maxRenewRetryTimes")
    invisible_time_millis_when_clear: int = setting("invisibleTimeMillisWhenClear")


@dataclasses.dataclass
class ControllerRaftSettings:
    """The fields of a controller's Raft group and elections, one declaration for ``rmq-controller``'s
    settings and a name server's (enableControllerInNamesrv)."""

    controller_d_leger_group: str = setting("controllerDLegerGroup", CONTROLLER_SETTINGS)
    controller_d_leger_peers: str = setting("controllerDLegerPeers", CONTROLLER_SETTINGS)
    controller_d_leger_self_id: str = setting("controllerDLegerSelfId", CONTROLLER_SETTINGS)
    controller_store_path: str = setting("controllerStorePath", CONTROLLER_SETTINGS)
    elect_master_max_retry_count: int = setting("electMasterMaxRetryCount", CONTROLLER_SETTINGS)
    enable_elect_unclean_master: bool = setting("enableElectUncleanMaster", CONTROLLER_SETTINGS)
    notify_broker_role_changed: bool = setting("notifyBrokerRoleChanged", CONTROLLER_SETTINGS)


_View = TypeVar("_View", bound="SettingsView")


class SettingsView:
    """Base of the config dataclasses (BrokerConfig, MessageStoreConfig, NamesrvSettings): fields
    made with ``setting(KEY)`` are checked on construction, however the config was made."""

    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]
    #: the table the fields' settings are declared in
    settings_table: ClassVar[SettingsTable] = SETTINGS

    def __post_init__(self) -> None:
        for field in self.settings_fields():
            s: Setting = field.metadata["setting"]
            setattr(self, field.name, s.check(getattr(self, field.name)))

    @classmethod
    def settings_fields(cls) -> list[dataclasses.Field[Any]]:
        return [f for f in dataclasses.fields(cls) if "setting" in f.metadata]

    @classmethod
    def from_settings(cls: type[_View], loaded: LoadedSettings, **fixed: Any) -> _View:
        """This config from loaded settings; ``fixed`` values (by attribute) win."""
        kwargs = {f.name: loaded.value(f.metadata["setting"].key) for f in cls.settings_fields()}
        kwargs.update(fixed)
        return cls(**kwargs)

    @classmethod
    def from_properties(cls: type[_View], properties: Mapping[str, Any]) -> _View:
        """This config from ``{key: value}`` (text or typed); every key must be a setting."""
        return cls.from_settings(load_settings(layers=[("properties", properties)], table=cls.settings_table))

    def to_properties(self) -> dict[str, str]:
        """Every setting of this config that has a value, as ``{key: text}``."""
        result = {}
        for field in self.settings_fields():
            value = getattr(self, field.name)
            if value is not None:
                result[field.metadata["setting"].key] = field.metadata["setting"].format(value)
        return result


# -- Java properties -------------------------------------------------------------------------------

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text as ``java.util.Properties.load`` does.

    ``#`` / ``!`` comment lines, blank lines, ``key=value`` / ``key:value`` / ``key value``, leading
    whitespace ignored, a line ending in an odd number of backslashes continues on the next
    (whose leading whitespace is dropped), escapes ``\\t \\n \\r \\f \\uXXXX`` and ``\\x`` -> ``x``.
    """
    result: dict[str, str] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].lstrip(" \t\f")
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip(" \t\f")
            i += 1
        if _continues(line):
            line = line[:-1]
        key, value = _split_key_value(line)
        result[_unescape(key)] = _unescape(value)
    return result


def _continues(line: str) -> bool:
    backslashes = len(line) - len(line.rstrip("\\"))
    return backslashes % 2 == 1


def _split_key_value(line: str) -> tuple[str, str]:
    """The key ends at the first unescaped ``=``, ``:`` or whitespace; one separator is consumed."""
    pos = 0
    while pos < len(line):
        ch = line[pos]
        if ch == "\\":
            pos += 2
            continue
        if ch in "=: \t\f":
            break
        pos += 1
    key = line[:pos]
    rest = line[pos:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return key, rest


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 >= len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u" and i + 6 <= len(text):
            try:
                out.append(chr(int(text[i + 2 : i + 6], 16)))
                i += 6
                continue
            except ValueError:
                raise ConfigError(f"malformed \\uXXXX escape in {text!r}") from None
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)
