"""The plan: a workload against the model, as broker sets, disk and network.

**Modes in order of cost.** A mode is flushDiskType x brokerRole. Listed cheapest first::

    1 ASYNC_FLUSH standalone     one machine a set; the page cache absorbs writes, msync every 500 ms
    2 SYNC_FLUSH  standalone     one machine; every send waits for its group commit's fsync
    3 ASYNC_FLUSH async_master   two machines (a slave); the slave's copy trails the answer
    4 SYNC_FLUSH  async_master   two machines; the master's fsync in every send's way
    5 ASYNC_FLUSH sync_master    two machines; every send waits for the slave's ack (a network
                                 round trip and the slave's append)
    6 SYNC_FLUSH  sync_master    two machines; both waits

A slave doubles a set's machines, disks and the master's outbound traffic, so every replicated mode
costs more than every standalone one; within one shape, the order is of the work each send waits for
(a local fsync costs less than a round trip to another machine that appends and answers). The order
also ranks what the modes promise (a later one loses less on a crash), so the plan takes the
workload's ``flush`` and ``role`` as the least it must keep: a mode qualifies when its flush and role
are each at least the workload's. Of the qualifying modes that meet the SLO at the workload's size,
the cheapest is the one needing the fewest machines for the peak; a tie goes to the earlier in the
order. The measured cost of each mode (machines per set / saturation msgs/s, as a ratio to
ASYNC_FLUSH standalone's) is in the report.

**Arithmetic** (``retention_s`` = retention hours x 3600; a master and its slave hold the same)::

    broker sets       the most of what each resource asks, and the plan names the one that binds:
      throughput /    ceil(peak x (1 + headroom) / saturation msgs/s of one set): "latency SLO" when a
      latency SLO     heavier load acked more but broke the SLO, "throughput" when none acked more
      disk            the fewest sets whose broker's files fit below diskMaxUsedSpaceRatio of
                      ``disk_bytes`` (a broker machine's disk, when given)
      network         ceil(peak x (1 + headroom) x size x (groups + slaves per set) / ``network_mb_per_s``)
                      (a machine's network each way, when given)
    record bytes      91 + size + topic bytes + properties bytes (rmq.protocol.layout's CommitLog
                      record: UNIQ_KEY and WAIT as a Java producer sends them, TAGS and KEYS if used)
    CommitLog/broker  avg x record bytes x retention_s / sets, in files of mappedFileSizeCommitLog
    ConsumeQueue      20 B a message: avg x retention_s / sets x 20; files of 300,000 entries per queue
    IndexFile         per file 40 + 4 x maxHashSlotNum + 20 x maxIndexNum bytes (mapped whole), holding
                      maxIndexNum - 1 entries (entry 0 is never used); UNIQ_KEY and each key indexed
    files on disk     of each kind, the files the retention fills, plus the one being written, plus the
                      oldest: a file goes only once its last message expired (its mtime, as
                      ``MessageStore.clean_expired_files`` reads it), so it outlives the retention
    network in        peak x size over the cluster (message bodies; per master: / sets)
    network out       peak x size x (groups + slaves per set): each group reads every message once,
                      and each slave gets a copy

**The disk levels** are the broker's own settings (``rmq.settings``; a workload's ``store:``
overrides them as a broker's would): above diskMaxUsedSpaceRatio (75 %) expired files are deleted at
any hour, above diskSpaceCleanForciblyRatio (85 %) unexpired ones too, so the retention is lost,
and above diskSpaceWarningLevelRatio (90 %) sends are refused. A plan keeps a broker's retention
below the first: deleting only what has expired, with the gap to the other two as its margin.
Disk is per broker (a master, or a slave: it holds the same files) and per cluster (masters and
slaves counted apart).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from typing import Any

from rmq.client.msg_id import UNIQ_ID_LENGTH
from rmq.errors import ConfigError
from rmq.perf.capacity.model import BINDS_SLO, BINDS_THROUGHPUT, MB, Saturation, SizeFit
from rmq.protocol.layout import REC_FIXED_OVERHEAD
from rmq.protocol.message import MessageProperty, encode_properties, topic_error
from rmq.settings import Invalid, Size, load_settings

FLUSHES = ("ASYNC_FLUSH", "SYNC_FLUSH")
ROLES = ("standalone", "async_master", "sync_master")
# (flush, role), cheapest first: the module docstring says why
MODE_ORDER = (
    ("ASYNC_FLUSH", "standalone"),
    ("SYNC_FLUSH", "standalone"),
    ("ASYNC_FLUSH", "async_master"),
    ("SYNC_FLUSH", "async_master"),
    ("ASYNC_FLUSH", "sync_master"),
    ("SYNC_FLUSH", "sync_master"),
)
BASELINE = MODE_ORDER[0]
CQ_ENTRY_BYTES = 20
INDEX_HEADER_BYTES = 40
INDEX_SLOT_BYTES = 4
INDEX_ENTRY_BYTES = 20
# store settings a plan reads (defaults from rmq.settings; a workload's ``store:`` overrides)
STORE_SETTINGS = (
    "mappedFileSizeCommitLog",
    "mappedFileSizeConsumeQueue",
    "maxHashSlotNum",
    "maxIndexNum",
    *(DISK_LEVELS := ("diskMaxUsedSpaceRatio", "diskSpaceCleanForciblyRatio", "diskSpaceWarningLevelRatio")),
)
# what binds a plan's broker count (model.BINDS_* for one set's throughput)
BINDS_DISK = "disk"
BINDS_NETWORK = "network"


class WorkloadError(ValueError):
    """A workload that cannot be planned for, saying which field and why."""


@dataclasses.dataclass
class Workload:
    """What the operator expects: rates in msgs/s, size in bytes, headroom in per cent."""

    peak_rate: float
    size: int
    slo_p99_ms: float
    avg_rate: float | None = None  # None: the peak
    retention_hours: float = 72.0  # fileReservedTime's default
    role: str = "standalone"  # the least replication the plan may use
    flush: str = "ASYNC_FLUSH"  # the least flushing the plan may use
    groups: int = 1  # consumer groups, each reading every message
    headroom: float = 30.0  # per cent above the peak a set must carry
    topic: str = "TopicTest"
    tags: str | None = None
    keys: int = 0  # KEYS tokens per message (each indexed, besides UNIQ_KEY)
    key_bytes: int = 16
    queues: int = 8  # write queues of the topic per broker
    disk_bytes: int | None = None  # a broker machine's disk (the store's); None: not planned against
    network_mb_per_s: float | None = None  # a machine's network each way, 10^6 B/s; None: not planned
    store: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.avg_rate is None:
            self.avg_rate = self.peak_rate
        positive = ("peak_rate", "size", "slo_p99_ms", "retention_hours", "queues")
        for name in positive:
            if not isinstance(getattr(self, name), (int, float)) or getattr(self, name) <= 0:
                raise WorkloadError(f"{name} must be a number > 0, got {getattr(self, name)!r}")
        for name in ("avg_rate", "groups", "headroom", "keys", "key_bytes"):
            if not isinstance(getattr(self, name), (int, float)) or getattr(self, name) < 0:
                raise WorkloadError(f"{name} must be a number >= 0, got {getattr(self, name)!r}")
        if self.disk_bytes is not None:
            try:
                self.disk_bytes = Size(1).check(self.disk_bytes)
            except Invalid as e:
                raise WorkloadError(f"disk_bytes {e}") from None
        if self.network_mb_per_s is not None and (
            not isinstance(self.network_mb_per_s, (int, float)) or self.network_mb_per_s <= 0
        ):
            raise WorkloadError(f"network_mb_per_s must be a number > 0, got {self.network_mb_per_s!r}")
        if self.avg_rate > self.peak_rate:
            raise WorkloadError(f"avg_rate {self.avg_rate:g} is above peak_rate {self.peak_rate:g}")
        if self.role not in ROLES:
            raise WorkloadError(f"role {self.role!r}, expected one of {', '.join(ROLES)}")
        if self.flush not in FLUSHES:
            raise WorkloadError(f"flush {self.flush!r}, expected one of {', '.join(FLUSHES)}")
        if (problem := topic_error(self.topic)) is not None:
            raise WorkloadError(f"topic: {problem}")
        try:
            loaded = load_settings(layers=[("workload store", self.store)])
        except ConfigError as e:
            raise WorkloadError(f"store: {e}") from None
        self.store = {key: loaded.value(key) for key in STORE_SETTINGS}

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], source: str = "workload") -> Workload:
        """A workload from a YAML mapping (keys as the fields, dashes allowed); unknown keys refused."""
        if not isinstance(data, Mapping):
            raise WorkloadError(f"{source}: expected a mapping of workload fields, got {type(data).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}
        given = {str(k).replace("-", "_"): v for k, v in data.items()}
        unknown = sorted(set(given) - names)
        if unknown:
            raise WorkloadError(f"{source}: unknown field(s) {', '.join(unknown)}; known: {', '.join(sorted(names))}")
        missing = [n for n in ("peak_rate", "size", "slo_p99_ms") if given.get(n) is None]
        if missing:
            raise WorkloadError(f"{source}: {', '.join(missing)} must be given")
        return cls(**given)

    @property
    def slo_us(self) -> float:
        return self.slo_p99_ms * 1000.0

    @property
    def retention_s(self) -> float:
        return self.retention_hours * 3600.0

    def disk_levels_pct(self) -> dict[str, float]:
        """The broker's disk levels, in per cent of its disk (diskMaxUsedSpaceRatio is one already)."""
        return {key: float(self.store[key]) * (1 if key == "diskMaxUsedSpaceRatio" else 100) for key in DISK_LEVELS}

    @property
    def disk_limit_bytes(self) -> float | None:
        """What a broker's files may take of ``disk_bytes``: below diskMaxUsedSpaceRatio."""
        if self.disk_bytes is None:
            return None
        return self.disk_bytes * self.store["diskMaxUsedSpaceRatio"] / 100.0

    def properties(self) -> dict[str, str]:
        """The properties a stored message of this workload carries (their values' lengths matter)."""
        props = {MessageProperty.UNIQ_KEY: "0" * UNIQ_ID_LENGTH, MessageProperty.WAIT_STORE_MSG_OK: "true"}
        if self.tags:
            props[MessageProperty.TAGS] = self.tags
        if self.keys:
            props[MessageProperty.KEYS] = " ".join(["k" * self.key_bytes] * self.keys)
        return props

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def record_bytes(size: int, topic: str, properties: Mapping[str, str]) -> int:
    """Bytes of one CommitLog record (docs/store-format.md#commitlog-record; rmq.protocol.layout)."""
    return REC_FIXED_OVERHEAD + size + len(topic.encode()) + len(encode_properties(dict(properties)))


def mode_name(flush: str, role: str) -> str:
    return f"{flush} {role}"


def qualifies(flush: str, role: str, workload: Workload) -> bool:
    """At least the workload's flush and role (module docstring)."""
    return FLUSHES.index(flush) >= FLUSHES.index(workload.flush) and ROLES.index(role) >= ROLES.index(workload.role)


@dataclasses.dataclass
class Throughput:
    """One broker set's throughput at the workload's size under the SLO, and where it came from."""

    msgs_per_s: float
    how: str
    cell_ids: list[str]
    run_ids: list[str]
    band: tuple[float, float] | None = None  # min..max over repeats, when measured at this size
    at_least: bool = False  # no heavier load measured broke the SLO: the set may do more
    binding: str = BINDS_THROUGHPUT  # what stops the set there (model.Saturation.binding)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def throughput_at(
    flush: str, role: str, size: int, saturations: Iterable[Saturation], fits: Mapping[tuple[Any, ...], SizeFit]
) -> Throughput | None:
    """rmq's single-send saturation throughput of a mode at ``size``: measured at that size, else
    fitted over the sizes measured (the SLO binds it if it bound any of them); None when neither."""
    mode = ("rmq", "", flush, role, 1)
    of_mode = [s for s in saturations if s.point.mode == mode]
    for s in of_mode:
        p = s.point
        if p.size == size:
            low, high, _ = p.spread
            how = f"measured at {size} B, {p.in_flight} in flight" + (f", {p.rate} msgs/s offered" if p.rate else "")
            return Throughput(p.msgs_per_s, how, p.cell_ids, p.run_ids, (low, high), not s.bounded, s.binding)
    fit = fits.get(mode)
    if fit is None:
        return None
    sizes = ", ".join(f"{s} B" for s in fit.sizes)
    binding = BINDS_SLO if any(s.binding == BINDS_SLO for s in of_mode) else BINDS_THROUGHPUT
    return Throughput(
        fit.msgs_per_s(size), f"fitted 1/x = a + b*size over {sizes}", fit.cell_ids, fit.run_ids, binding=binding
    )


@dataclasses.dataclass
class Disk:
    """Bytes one broker (a master, or its slave: it holds the same) keeps for the retention, at
    most: files as mapped, each kind with its aged-out file and the one being written."""

    messages: float
    record_bytes: int
    commit_log_data_bytes: float
    commit_log_files: int
    commit_log_allocated_bytes: int
    consume_queue_data_bytes: float
    consume_queue_files: int
    consume_queue_allocated_bytes: int
    index_entries: float
    index_files: int
    index_allocated_bytes: int

    @property
    def total_allocated_bytes(self) -> int:
        return self.commit_log_allocated_bytes + self.consume_queue_allocated_bytes + self.index_allocated_bytes

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "total_allocated_bytes": self.total_allocated_bytes}


def _files_kept(data_bytes: float, file_bytes: int) -> int:
    """Files of one kind on disk at most: those the retention fills, the one being written, and the
    oldest, which outlives the retention until its last message expires."""
    return math.floor(data_bytes / file_bytes) + 2


def disk_per_broker(workload: Workload, broker_sets: int, retention_hours: float | None = None) -> Disk:
    """The disk arithmetic of the module docstring for one broker of ``broker_sets``."""
    hours = workload.retention_hours if retention_hours is None else retention_hours
    assert workload.avg_rate is not None
    messages = workload.avg_rate * hours * 3600.0 / broker_sets
    rec = record_bytes(workload.size, workload.topic, workload.properties())
    store = workload.store
    commit_log = messages * rec
    cl_file = store["mappedFileSizeCommitLog"]
    cq_file = store["mappedFileSizeConsumeQueue"]
    cl_files = _files_kept(commit_log, cl_file)
    cq_files = _files_kept(messages / workload.queues * CQ_ENTRY_BYTES, cq_file) * workload.queues
    index_entries = messages * (1 + workload.keys)
    slots, entries = store["maxHashSlotNum"], store["maxIndexNum"]
    index_files = math.floor(index_entries / (entries - 1)) + 2
    index_file_bytes = INDEX_HEADER_BYTES + INDEX_SLOT_BYTES * slots + INDEX_ENTRY_BYTES * entries
    return Disk(
        messages=messages,
        record_bytes=rec,
        commit_log_data_bytes=commit_log,
        commit_log_files=cl_files,
        commit_log_allocated_bytes=cl_files * cl_file,
        consume_queue_data_bytes=messages * CQ_ENTRY_BYTES,
        consume_queue_files=cq_files,
        consume_queue_allocated_bytes=cq_files * cq_file,
        index_entries=index_entries,
        index_files=index_files,
        index_allocated_bytes=index_files * index_file_bytes,
    )


# past this many broker sets the disk search gives up: the disk cannot hold even a broker's smallest files
MAX_SETS = 1 << 20


def sets_for_disk(workload: Workload, at_least: int = 1) -> int | None:
    """The fewest broker sets (from ``at_least``) whose broker's files fit below diskMaxUsedSpaceRatio
    of the workload's disk; None when no count does (the disk is smaller than a broker's fewest files)."""
    limit = workload.disk_limit_bytes
    assert limit is not None

    def fits(sets: int) -> bool:
        return disk_per_broker(workload, sets).total_allocated_bytes <= limit

    if fits(at_least):
        return at_least
    low, high = at_least, at_least * 2  # fits(low) is false; find a high that fits, then bisect
    while not fits(high):
        if high >= MAX_SETS:
            return None
        low, high = high, high * 2
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if fits(mid) else (mid, high)
    return high


def sets_for_network(workload: Workload, slaves: int) -> int | None:
    """Broker sets whose machines' networks carry the peak (with headroom) each way; None when the
    workload gives no network."""
    if workload.network_mb_per_s is None:
        return None
    peak = workload.peak_rate * (1 + workload.headroom / 100.0) * workload.size / MB
    busiest = peak * max(1, workload.groups + slaves)  # a master sends each group and its slave a copy
    return max(1, math.ceil(busiest / workload.network_mb_per_s))


@dataclasses.dataclass
class ModePlan:
    """One mode's answer to the workload."""

    flush: str
    role: str
    throughput: Throughput | None
    qualifies: bool  # at least the workload's flush and role
    broker_sets: int | None = None
    # broker sets each resource asks for (throughput: one set's saturation under the SLO; disk and
    # network only when the workload gives a machine's): the most of them is broker_sets
    broker_sets_for: dict[str, int | None] = dataclasses.field(default_factory=dict)
    binding: str | None = None  # which resource's count broker_sets is (BINDS_*)
    masters: int | None = None
    slaves: int | None = None
    machines: int | None = None
    disk: Disk | None = None  # per broker
    disk_bytes: int | None = None  # a broker machine's disk, as the workload gives it
    network_in_mb_per_s: float | None = None
    network_out_mb_per_s: float | None = None
    cost_ratio: float | None = None  # machines a set / msgs/s, over ASYNC_FLUSH standalone's
    why_not: str | None = None

    @property
    def name(self) -> str:
        return mode_name(self.flush, self.role)

    @property
    def usable(self) -> bool:
        return self.qualifies and self.broker_sets is not None

    @property
    def disk_used_pct(self) -> float | None:
        """A broker's files at most, in per cent of its machine's disk."""
        if self.disk is None or not self.disk_bytes:
            return None
        return 100.0 * self.disk.total_allocated_bytes / self.disk_bytes

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        del d["disk"]
        d["mode"] = self.name
        d["throughput"] = self.throughput.to_json() if self.throughput else None
        per_broker = self.disk.total_allocated_bytes if self.disk else None
        d["disk_per_broker"] = self.disk.to_json() if self.disk else None
        d["disk_per_master_bytes"] = per_broker
        d["disk_per_slave_bytes"] = per_broker if self.slaves else None
        for name, count in (("masters", self.masters), ("slaves", self.slaves), ("cluster", self.machines)):
            d[f"disk_{name}_bytes"] = None if per_broker is None or count is None else per_broker * count
        d["disk_used_pct"] = self.disk_used_pct
        return d


def slaves_per_set(role: str) -> int:
    return 0 if role == "standalone" else 1


def plan_mode(
    flush: str, role: str, workload: Workload, throughput: Throughput | None, measured: bool = True
) -> ModePlan:
    plan = ModePlan(flush, role, throughput, qualifies(flush, role, workload), disk_bytes=workload.disk_bytes)
    if throughput is None:
        plan.why_not = (
            f"no measurement meets p99 <= {workload.slo_p99_ms:g} ms at {workload.size} B"
            if measured
            else "not measured"
        )
        return plan
    slaves = slaves_per_set(role)
    by_throughput = max(1, math.ceil(workload.peak_rate * (1 + workload.headroom / 100.0) / throughput.msgs_per_s))
    wanted: dict[str, int | None] = {throughput.binding: by_throughput}
    if workload.disk_bytes is not None:
        wanted[BINDS_DISK] = sets_for_disk(workload, by_throughput)
        if wanted[BINDS_DISK] is None:
            smallest = disk_per_broker(workload, MAX_SETS).total_allocated_bytes
            plan.broker_sets_for = wanted
            plan.why_not = (
                f"a disk of {workload.disk_bytes:,} B holds {workload.disk_limit_bytes:,.0f} B below "
                f"diskMaxUsedSpaceRatio {workload.store['diskMaxUsedSpaceRatio']} %, less than a broker's "
                f"fewest files ({smallest:,} B)"
            )
            return plan
    wanted[BINDS_NETWORK] = sets_for_network(workload, slaves)
    plan.broker_sets_for = wanted
    # the first of the largest: throughput before disk before network on a tie
    plan.binding, sets = max(((k, v) for k, v in wanted.items() if v is not None), key=lambda kv: kv[1])
    plan.broker_sets, plan.masters, plan.slaves = sets, sets, sets * slaves
    plan.machines = sets * (1 + slaves)
    plan.disk = disk_per_broker(workload, sets)
    plan.network_in_mb_per_s = workload.peak_rate * workload.size / MB
    plan.network_out_mb_per_s = workload.peak_rate * workload.size * (workload.groups + slaves) / MB
    if not plan.qualifies:
        plan.why_not = f"keeps less than the workload's {workload.flush} {workload.role}"
    return plan


@dataclasses.dataclass
class Plan:
    workload: Workload
    modes: list[ModePlan]
    recommended: ModePlan | None

    def to_json(self) -> dict[str, Any]:
        return {
            "workload": self.workload.to_json(),
            "mode_order": [mode_name(f, r) for f, r in MODE_ORDER],
            "recommended": self.recommended.to_json() if self.recommended else None,
            "modes": [m.to_json() for m in self.modes],
        }


def make_plan(
    workload: Workload,
    saturations: list[Saturation],
    fits: Mapping[tuple[Any, ...], SizeFit],
    measured: Iterable[tuple[str, str]] | None = None,
) -> Plan:
    """Every mode's plan, and the cheapest that qualifies and meets the SLO. ``measured``: the
    (flush, role) pairs rmq was measured in at all (None: every one), so that a mode without a
    saturation point says whether it broke the SLO or was never run."""
    ran = set(MODE_ORDER if measured is None else measured)
    modes = [
        plan_mode(f, r, workload, throughput_at(f, r, workload.size, saturations, fits), (f, r) in ran)
        for f, r in MODE_ORDER
    ]
    base = modes[0].throughput
    for m in modes:
        if m.throughput is not None and base is not None:
            m.cost_ratio = (1 + slaves_per_set(m.role)) / m.throughput.msgs_per_s * base.msgs_per_s
    usable = [m for m in modes if m.usable]
    recommended = min(usable, key=lambda m: (m.machines, MODE_ORDER.index((m.flush, m.role)))) if usable else None
    return Plan(workload, modes, recommended)
