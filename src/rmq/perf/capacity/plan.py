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

    broker sets       ceil(peak x (1 + headroom) / saturation msgs/s of one set)
    record bytes      91 + size + topic bytes + properties bytes (rmq.protocol.layout's CommitLog
                      record: UNIQ_KEY and WAIT as a Java producer sends them, TAGS and KEYS if used)
    CommitLog/broker  avg x record bytes x retention_s / sets; files of mappedFileSizeCommitLog
    ConsumeQueue      20 B a message: avg x retention_s / sets x 20; files of 300,000 entries per queue
    IndexFile         per file 40 + 4 x maxHashSlotNum + 20 x maxIndexNum bytes (mapped whole), holding
                      maxIndexNum - 1 entries (entry 0 is never used); UNIQ_KEY and each key indexed
    network in        peak x size over the cluster (message bodies; per master: / sets)
    network out       peak x size x (groups + slaves per set): each group reads every message once,
                      and each slave gets a copy
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from typing import Any

from rmq.client.msg_id import UNIQ_ID_LENGTH
from rmq.errors import ConfigError
from rmq.perf.capacity.model import MB, Saturation, SizeFit
from rmq.protocol.layout import REC_FIXED_OVERHEAD
from rmq.protocol.message import MessageProperty, encode_properties, topic_error
from rmq.settings import load_settings

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
STORE_SETTINGS = ("mappedFileSizeCommitLog", "mappedFileSizeConsumeQueue", "maxHashSlotNum", "maxIndexNum")


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
    at_least: bool = False  # every load measured met the SLO: the set may do more

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def throughput_at(
    flush: str, role: str, size: int, saturations: Iterable[Saturation], fits: Mapping[tuple[Any, ...], SizeFit]
) -> Throughput | None:
    """rmq's single-send saturation throughput of a mode at ``size``: measured at that size, else
    fitted over the sizes measured; None when neither."""
    for s in saturations:
        p = s.point
        if (p.system, p.peer_mode, p.flush, p.role, p.batch, p.size) == ("rmq", "", flush, role, 1, size):
            low, high, _ = p.spread
            how = f"measured at {size} B, {p.in_flight} in flight" + (f", {p.rate} msgs/s offered" if p.rate else "")
            return Throughput(p.msgs_per_s, how, p.cell_ids, p.run_ids, (low, high), not s.bounded)
    fit = fits.get(("rmq", "", flush, role, 1))
    if fit is None:
        return None
    sizes = ", ".join(f"{s} B" for s in fit.sizes)
    return Throughput(fit.msgs_per_s(size), f"fitted 1/x = a + b*size over {sizes}", fit.cell_ids, fit.run_ids)


@dataclasses.dataclass
class Disk:
    """Bytes one broker (a master; its slave the same) holds for the retention."""

    messages: float
    record_bytes: int
    commit_log_bytes: float
    commit_log_allocated: int
    consume_queue_bytes: float
    consume_queue_allocated: int
    index_entries: float
    index_files: int
    index_allocated: int

    @property
    def total_allocated(self) -> int:
        return self.commit_log_allocated + self.consume_queue_allocated + self.index_allocated

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "total_allocated": self.total_allocated}


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
    per_queue = messages / workload.queues
    cq_files_per_queue = max(1, math.ceil(per_queue * CQ_ENTRY_BYTES / cq_file))
    index_entries = messages * (1 + workload.keys)
    slots, entries = store["maxHashSlotNum"], store["maxIndexNum"]
    index_files = max(1, math.ceil(index_entries / (entries - 1)))
    index_file_bytes = INDEX_HEADER_BYTES + INDEX_SLOT_BYTES * slots + INDEX_ENTRY_BYTES * entries
    return Disk(
        messages=messages,
        record_bytes=rec,
        commit_log_bytes=commit_log,
        commit_log_allocated=max(1, math.ceil(commit_log / cl_file)) * cl_file,
        consume_queue_bytes=messages * CQ_ENTRY_BYTES,
        consume_queue_allocated=cq_files_per_queue * workload.queues * cq_file,
        index_entries=index_entries,
        index_files=index_files,
        index_allocated=index_files * index_file_bytes,
    )


@dataclasses.dataclass
class ModePlan:
    """One mode's answer to the workload."""

    flush: str
    role: str
    throughput: Throughput | None
    qualifies: bool  # at least the workload's flush and role
    broker_sets: int | None = None
    masters: int | None = None
    slaves: int | None = None
    machines: int | None = None
    disk: Disk | None = None
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

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["mode"] = self.name
        d["throughput"] = self.throughput.to_json() if self.throughput else None
        d["disk"] = self.disk.to_json() if self.disk else None
        return d


def slaves_per_set(role: str) -> int:
    return 0 if role == "standalone" else 1


def plan_mode(
    flush: str, role: str, workload: Workload, throughput: Throughput | None, measured: bool = True
) -> ModePlan:
    plan = ModePlan(flush, role, throughput, qualifies(flush, role, workload))
    if throughput is None:
        plan.why_not = (
            f"no measurement meets p99 <= {workload.slo_p99_ms:g} ms at {workload.size} B"
            if measured
            else "not measured"
        )
        return plan
    sets = max(1, math.ceil(workload.peak_rate * (1 + workload.headroom / 100.0) / throughput.msgs_per_s))
    slaves = slaves_per_set(role)
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
