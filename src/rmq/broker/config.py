"""BrokerConfig: the broker's settings under RocketMQ's property names, and ``broker.conf`` parsing.

A RocketMQ ``broker.conf`` is a Java properties file that carries the broker's keys and the store's
keys side by side. ``load_broker_config`` reads the file, applies ``--set key=value`` overrides,
converts the broker's keys to typed fields and hands back every other key untouched, for
``MessageStoreConfig.from_properties``:

    config, rest = load_broker_config("broker.conf", parse_set_options(["listenPort=20911"]))
    store_config = MessageStoreConfig.from_properties(config.store_properties(rest))

Keys are RocketMQ's camelCase names (``brokerIP1``); the snake_case attribute names
(``broker_ip1``) are accepted too.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import socket
from pathlib import Path
from typing import Any, Iterable, Mapping

from rmq.errors import ConfigError
from rmq.protocol.message import topic_error
from rmq.protocol.perm import PERM_READ, PERM_WRITE
from rmq.protocol.route import MASTER_ID

log = logging.getLogger("rmq.broker")

LOOPBACK_IP = "127.0.0.1"


class BrokerRole(str, enum.Enum):
    """brokerRole: a master answers sends after its own flush (ASYNC) or after a slave acked (SYNC)."""

    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"


def _setting(key: str, default: Any, kind: type) -> Any:
    """A BrokerConfig field read from the property ``key`` and converted to ``kind``."""
    return dataclasses.field(default=default, metadata={"key": key, "kind": kind})


@dataclasses.dataclass
class BrokerConfig:
    """The broker's settings; defaults are RocketMQ 4.9's unless a comment says why not."""

    broker_cluster_name: str = _setting("brokerClusterName", "DefaultCluster", str)
    # RocketMQ defaults to the host name; a fixed name keeps a single-machine quick start predictable.
    broker_name: str = _setting("brokerName", "broker-a", str)
    broker_id: int = _setting("brokerId", MASTER_ID, int)
    # "host:port;host:port". None: the broker runs an embedded name server in its own process.
    namesrv_addr: str | None = _setting("namesrvAddr", None, str)
    listen_port: int = _setting("listenPort", 10911, int)
    # The port of the name server the broker embeds when namesrvAddr is not set (rmq only).
    namesrv_listen_port: int = _setting("namesrvListenPort", 9876, int)
    # The address registered with name servers and written into every stored record (msgIds carry
    # it). None until resolve(): 127.0.0.1 with an embedded name server, else the first
    # non-loopback IPv4 of the host (RocketMQ's only default).
    broker_ip1: str | None = _setting("brokerIP1", None, str)
    # The address slaves use to reach this master's HA port; defaults to brokerIP1.
    broker_ip2: str | None = _setting("brokerIP2", None, str)
    ha_listen_port: int = _setting("haListenPort", 10912, int)
    broker_role: BrokerRole = _setting("brokerRole", BrokerRole.ASYNC_MASTER, BrokerRole)
    broker_permission: int = _setting("brokerPermission", PERM_READ | PERM_WRITE, int)
    default_topic_queue_nums: int = _setting("defaultTopicQueueNums", 8, int)
    auto_create_topic_enable: bool = _setting("autoCreateTopicEnable", True, bool)
    cluster_topic_enable: bool = _setting("clusterTopicEnable", True, bool)
    broker_topic_enable: bool = _setting("brokerTopicEnable", True, bool)
    auto_create_subscription_group: bool = _setting("autoCreateSubscriptionGroup", True, bool)
    trace_topic_enable: bool = _setting("traceTopicEnable", False, bool)
    msg_trace_topic_name: str = _setting("msgTraceTopicName", "RMQ_SYS_TRACE_TOPIC", str)
    register_broker_timeout_mills: int = _setting("registerBrokerTimeoutMills", 6000, int)
    register_name_server_period: int = _setting("registerNameServerPeriod", 30_000, int)
    long_polling_enable: bool = _setting("longPollingEnable", True, bool)
    short_polling_time_mills: int = _setting("shortPollingTimeMills", 1000, int)
    notify_consumer_ids_changed_enable: bool = _setting("notifyConsumerIdsChangedEnable", True, bool)
    slave_read_enable: bool = _setting("slaveReadEnable", False, bool)
    # A send that waited longer than this before being served is answered SYSTEM_BUSY.
    wait_time_mills_in_send_queue: int = _setting("waitTimeMillsInSendQueue", 200, int)
    flush_consumer_offset_interval: int = _setting("flushConsumerOffsetInterval", 5000, int)
    # RocketMQ reads this one from the system property rocketmq.broker.rebalance.lockMaxLiveTime.
    rebalance_lock_max_live_time: int = _setting("rebalanceLockMaxLiveTime", 60_000, int)
    reject_transaction_message: bool = _setting("rejectTransactionMessage", False, bool)
    # A half message younger than this is not checked yet.
    transaction_time_out: int = _setting("transactionTimeOut", 6000, int)
    transaction_check_max: int = _setting("transactionCheckMax", 15, int)
    # SPEC.md section 8 (30 s); RocketMQ 4.9 defaults to 60 s.
    transaction_check_interval: int = _setting("transactionCheckInterval", 30_000, int)

    def __post_init__(self) -> None:
        self.broker_role = BrokerRole(self.broker_role)
        self._check()

    def _check(self) -> None:
        # Both names become topics of their own (producers may address a cluster or a broker).
        for name in ("broker_cluster_name", "broker_name"):
            reason = topic_error(getattr(self, name) or "")
            if reason is not None:
                raise ConfigError(f"{_key_of(name)} is used as a topic name: {reason}")
        for name in ("listen_port", "ha_listen_port", "namesrv_listen_port"):
            port = getattr(self, name)
            if not 0 <= port <= 65535:
                raise ConfigError(f"{_key_of(name)} must be a TCP port (0-65535), got {port}")
        if not 0 <= self.broker_permission <= 7:
            raise ConfigError(f"brokerPermission must be a perm bit set 0-7, got {self.broker_permission}")
        if self.default_topic_queue_nums < 1:
            raise ConfigError(f"defaultTopicQueueNums must be at least 1, got {self.default_topic_queue_nums}")
        if self.broker_id < 0:
            raise ConfigError(f"brokerId must be 0 (master) or more (slave), got {self.broker_id}")
        # RocketMQ silently forces a master's id to 0; a slave id under a master role is almost
        # always a forgotten brokerRole=SLAVE, and silently turning it into a second master is worse.
        if self.broker_role is BrokerRole.SLAVE and self.broker_id == MASTER_ID:
            raise ConfigError("brokerRole=SLAVE needs a brokerId greater than 0 (0 is the master's)")
        if self.broker_role is not BrokerRole.SLAVE and self.broker_id != MASTER_ID:
            raise ConfigError(f"brokerId={self.broker_id} with brokerRole={self.broker_role.value}: "
                              "a master's brokerId is 0; set brokerRole=SLAVE for a slave")

    @property
    def embedded_namesrv(self) -> bool:
        """True when no name server address is configured: the broker runs one itself."""
        return not self.namesrv_addr

    @property
    def namesrv_addr_list(self) -> list[str]:
        return [a.strip() for a in (self.namesrv_addr or "").split(";") if a.strip()]

    @property
    def broker_addr(self) -> str:
        """``ip:port`` as registered with name servers."""
        return f"{self.broker_ip1}:{self.listen_port}"

    @property
    def ha_server_addr(self) -> str:
        return f"{self.broker_ip2 or self.broker_ip1}:{self.ha_listen_port}"

    def resolve(self) -> "BrokerConfig":
        """Fill the defaults that depend on other settings or on the host (brokerIP1/2)."""
        if not self.broker_ip1:
            self.broker_ip1 = LOOPBACK_IP if self.embedded_namesrv else first_non_loopback_ipv4()
        if not self.broker_ip2:
            self.broker_ip2 = self.broker_ip1
        return self

    def store_properties(self, leftover: Mapping[str, str]) -> dict[str, Any]:
        """The properties for the store's config: the keys the broker did not take, plus the ones both
        need (the store writes brokerIP1:listenPort into records; brokerRole decides replication)."""
        self.resolve()
        props: dict[str, Any] = dict(leftover)
        props.update({
            "brokerIP1": self.broker_ip1,
            "listenPort": self.listen_port,
            "haListenPort": self.ha_listen_port,
            "brokerRole": self.broker_role.value,
        })
        return props

    def to_properties(self) -> dict[str, str]:
        """Every setting as ``{propertyName: string}`` (for start-up logs and admin output)."""
        result = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is None:
                continue
            if isinstance(value, enum.Enum):
                value = value.value
            elif isinstance(value, bool):
                value = "true" if value else "false"
            result[field.metadata["key"]] = str(value)
        return result

    @classmethod
    def from_properties(cls, properties: Mapping[str, Any]) -> tuple["BrokerConfig", dict[str, Any]]:
        """Typed config from string (or already typed) values; returns it with the keys it did not use."""
        kwargs: dict[str, Any] = {}
        leftover: dict[str, Any] = {}
        for key, value in properties.items():
            field = _FIELDS_BY_KEY.get(key)
            if field is None:
                leftover[key] = value
                continue
            if value is None:  # an unset command-line option: keep the default
                continue
            kwargs[field.name] = _convert(field.metadata["key"], value, field.metadata["kind"])
        return cls(**kwargs), leftover


_FIELDS_BY_KEY: dict[str, dataclasses.Field] = {}
for _field in dataclasses.fields(BrokerConfig):
    _FIELDS_BY_KEY[_field.metadata["key"]] = _field
    _FIELDS_BY_KEY[_field.name] = _field


def _key_of(field_name: str) -> str:
    return _FIELDS_BY_KEY[field_name].metadata["key"]


def _convert(key: str, value: Any, kind: type) -> Any:
    """``value`` (usually a string from a file) as ``kind``, or a ConfigError naming key and value."""
    if kind is bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        # Java's Boolean.parseBoolean reads anything but "true" as false; a typo should not
        # silently turn a feature off.
        if text not in ("true", "false"):
            raise ConfigError(f"{key} must be true or false, got {value!r}")
        return text == "true"
    if kind is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        try:
            return int(str(value).strip())
        except ValueError:
            raise ConfigError(f"{key} must be an integer, got {value!r}") from None
    if issubclass(kind, enum.Enum):
        try:
            return kind(str(value.value if isinstance(value, enum.Enum) else value).strip())
        except ValueError:
            names = ", ".join(m.value for m in kind)
            raise ConfigError(f"{key} must be one of {names}, got {value!r}") from None
    text = str(value).strip()
    return text or None


# -- Java properties --------------------------------------------------------------------------------

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
                out.append(chr(int(text[i + 2:i + 6], 16)))
                i += 6
                continue
            except ValueError:
                raise ConfigError(f"malformed \\uXXXX escape in {text!r}") from None
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def parse_set_options(options: Iterable[str]) -> dict[str, str]:
    """``["key=value", ...]`` from ``--set`` options into a dict (the last one of a key wins)."""
    result = {}
    for option in options:
        key, sep, value = option.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set expects key=value, got {option!r}")
        result[key.strip()] = value.strip()
    return result


def load_broker_config(
    config_file: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    resolve: bool = True,
) -> tuple[BrokerConfig, dict[str, Any]]:
    """Read ``broker.conf`` (if given), apply ``overrides`` on top, build the BrokerConfig.

    Returns the config (with host-dependent defaults resolved unless ``resolve`` is False) and the
    properties it did not use: the store's keys, and any the operator misspelt.
    """
    properties: dict[str, Any] = {}
    if config_file is not None:
        try:
            data = Path(config_file).read_bytes()
        except OSError as e:
            raise ConfigError(f"cannot read broker config file {str(config_file)!r}: {e.strerror}") from None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            # Java's Properties.load(InputStream) reads ISO-8859-1, so RocketMQ's own files may be in it.
            text = data.decode("latin-1")
        properties.update(parse_properties(text))
    properties.update(overrides or {})
    config, leftover = BrokerConfig.from_properties(properties)
    if resolve:
        config.resolve()
    return config, leftover


def first_non_loopback_ipv4() -> str:
    """The host's first non-loopback IPv4 address (RocketMQ's brokerIP1 default), else 127.0.0.1."""
    candidates: list[str] = []
    try:
        infos = socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET, socket.SOCK_STREAM)
        candidates.extend(info[4][0] for info in infos)
    except OSError:
        pass
    try:
        # Connecting a UDP socket sends nothing; it only asks the kernel which source address it
        # would route from.
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))
            candidates.append(s.getsockname()[0])
    except OSError:
        pass
    for ip in candidates:
        if not ip.startswith("127.") and ip != "0.0.0.0":
            return ip
    return LOOPBACK_IP
