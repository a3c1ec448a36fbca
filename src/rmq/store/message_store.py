"""MessageStore: lifecycle, recovery, flush services and retention around the compiled StoreCore.

The hot paths (``put_message``, ``put_messages``, ``get_message``, ``look_message_by_offset``) are
the compiled methods of ``rmq.store._store.StoreCore``, inherited as they are so a put costs no extra
Python frame; see their docstrings (and ``rmq/store/_store.pyi``).

Start-up order (crash safety): take the ``lock`` file, read ``abort`` (present = the last run
crashed), map the files, recover, and only then create ``abort`` again and accept puts. Shutdown
stops puts, lets the services finish (completing every pending SYNC_FLUSH put), flushes, and
removes ``abort`` last. The store's service threads (flush, group commit, retention) are in
docs/threads.md.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from rmq._service import ServiceThread
from rmq.errors import RecordError, StoreError, StoreLockedError
from rmq.protocol.message import MessageProperty, encode_properties, topic_error
from rmq.protocol.record import StoredMessage, decode_record, ipv4_to_int
from rmq.store._index import IndexService
from rmq.store._store import PutMessageResult, StoreCheckpoint, StoreCore, TagFilter
from rmq.store.config import BrokerRole, MessageStoreConfig
from rmq.store.epoch import EpochEntry, EpochFile, divergence_point
from rmq.store.ha import EpochSource, HAClient, HASecurity, HAService
from rmq.store.services import (
    CleanCommitLogService,
    CommitCompletionService,
    FlushConsumeQueueService,
    FlushRealTimeService,
    GroupCommitService,
    PrefaultService,
)
from rmq.store.status import PutMessageStatus

log = logging.getLogger("rmq.store")

# RocketMQ's margin when choosing where to start re-dispatch after a crash: store timestamps are
# wall-clock ms and may step back a little.
CHECKPOINT_MARGIN_MS = 3000


@dataclasses.dataclass(frozen=True)
class DiskUsage:
    """Used fractions of the disks under the CommitLog, the ConsumeQueues and the index."""

    commit_log: float
    consume_queue: float
    index: float

    def __str__(self) -> str:
        # RocketMQ's SendMessageProcessor.diskUtil(), which its SERVICE_NOT_AVAILABLE remark quotes
        return f"CL: {self.commit_log:5.2f} CQ: {self.consume_queue:5.2f} INDEX: {self.index:5.2f}"


@dataclasses.dataclass
class QueryMessageResult:
    """Messages found by key (whole stored records, zero-copy), and how far the index reached."""

    messages: list[memoryview]
    index_last_update_timestamp: int
    index_last_update_phy_offset: int


class MessageStore(StoreCore):
    """A RocketMQ store: CommitLog, ConsumeQueues, IndexFile, checkpoint, under one root directory.

    Use ``with MessageStore(config) as store:`` or ``start()`` / ``shutdown()``.
    """

    def __init__(self, config: MessageStoreConfig | None = None, **settings) -> None:
        self.config = config if config is not None else MessageStoreConfig(**settings)
        c = self.config
        super().__init__(
            os.path.abspath(c.store_path_root_dir),
            mapped_file_size_commit_log=c.mapped_file_size_commit_log,
            mapped_file_size_consume_queue=c.mapped_file_size_consume_queue,
            max_message_size=c.max_message_size,
            store_ip=c.broker_ip1,
            store_port=c.listen_port,
            sync_flush=c.sync_flush,
            sync_flush_timeout=c.sync_flush_timeout / 1000,
            delay_level_ms=c.delay_level_ms,
            sync_master=c.sync_master,
            slave_timeout=c.slave_timeout / 1000,
            ha_max_gap_not_in_sync=c.ha_max_gap_not_in_sync,
            slave=c.slave,
        )
        self._lock_fd: int | None = None
        self._disk_check_lock = threading.Lock()
        self._services: list[ServiceThread] = []
        self.last_exit_ok: bool | None = None
        self.recovery_report: str | None = None
        self._completion_handed_over = False
        self.ha_service: HAService | None = None
        self.ha_client: HAClient | None = None
        self.ha_security: HASecurity | None = None
        # the master terms this store's log went through (epoch.json), loaded by ``start``
        self.epochs: EpochFile | None = None
        # controller mode: the brokers whose acks a SYNC_MASTER put waits for (None: a slave's)
        self.sync_state_set: frozenset[int] | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def abort_path(self) -> str:
        return os.path.join(self.store_path, "abort")

    def start(self) -> MessageStore:
        """Lock the directory, recover, start the services and accept puts."""
        if self.closed:
            raise StoreError(f"store {self.store_path} was shut down: open it again as a new MessageStore")
        os.makedirs(self.store_path, exist_ok=True)
        self._take_lock_file()
        try:
            self.last_exit_ok = not os.path.exists(self.abort_path)
            checkpoint = StoreCheckpoint(os.path.join(self.store_path, "checkpoint"))
            index = IndexService(
                os.path.join(self.store_path, "index"), self.config.max_hash_slot_num, self.config.max_index_num
            )
            self.attach(index, checkpoint)
            self.epochs = EpochFile(self.store_path)
            self.commit_log.load()
            self.load_consume_queues()
            index.load(self.last_exit_ok, checkpoint.index_msg_timestamp)
            self._recover()
            with open(self.abort_path, "wb") as f:
                os.fsync(f.fileno())
            if (self.sync_flush or self.sync_master) and not self._completion_handed_over:
                # the completer stops first: the group commit's last round completes what is left
                self._services.append(CommitCompletionService(self))
            if self.config.sync_flush:
                self._services.append(GroupCommitService(self))
            else:
                self._services.append(FlushRealTimeService(self))
            self._services += [PrefaultService(self), FlushConsumeQueueService(self), CleanCommitLogService(self)]
            for service in self._services:
                service.start()
            self.set_running(True)
        except BaseException:
            self._release_lock_file()
            raise
        return self

    def start_ha(
        self, epoch_source: EpochSource | None = None, security: HASecurity | None = None, slave_id: int | None = None
    ) -> None:
        """After ``start``: replicate. A master opens its first epoch if its store has none and
        listens on haListenPort for slaves (HAService); a slave copies its master's CommitLog
        (HAClient), after reconciling its log with the master's epoch table, which
        ``epoch_source()`` fetches (the broker asks the master; without one, a slave replicates as
        4.x does). A store used on its own does neither. ``security``: the cluster credentials and
        TLS both sides use (kept for a promotion's HA service too). ``slave_id``: the broker id a
        slave names to its master (controller mode's)."""
        assert self.epochs is not None, "start() first"
        self.ha_security = security
        if self.config.slave:
            self.ha_client = HAClient(self, epoch_source, security)
            self.ha_client.slave_id = slave_id
            self.ha_client.start()
        else:
            self.epochs.ensure_started(self.get_max_phy_offset())
            self.ha_service = HAService(self, security).start()

    @property
    def epoch(self) -> int:
        """The newest master term this store knows (0 before any)."""
        return self.epochs.current_epoch if self.epochs is not None else 0

    def reconcile_with_master(self, theirs: list[EpochEntry], their_max: int) -> tuple[int, int, int]:
        """A slave, before it replicates: cut what its log holds past the last point it shares with
        its master's (``divergence_point`` of the two epoch tables), then take the master's table.
        The cut comes first: a crash in between leaves the old table, and the next try cuts again.
        Returns ``(point, bytes, records)`` dropped (HA client thread)."""
        assert self.epochs is not None, "start() first"
        mine, my_max = self.epochs.entries, self.get_max_phy_offset()
        point = divergence_point(mine, my_max, theirs, their_max)
        dropped_bytes = dropped_records = 0
        if point < my_max:
            dropped_bytes, dropped_records = self.truncate_to(point)
            log.warning(
                "%s: dropped %d bytes (%d records) of CommitLog after offset %d: its master never had them "
                "(epochs here %s, on the master %s, which ends at %d)",
                self.store_path,
                dropped_bytes,
                dropped_records,
                point,
                [(e.epoch, e.start_offset) for e in mine],
                [(e.epoch, e.start_offset) for e in theirs],
                their_max,
            )
        if theirs != mine:
            self.epochs.adopt(theirs)
        return point, dropped_bytes, dropped_records

    def promote(self, sync_master: bool, epoch: int | None = None) -> EpochEntry:
        """A slave becomes its broker name's master: replication stops, a record copied only in part
        is dropped (the dispatch finished every whole one), a new epoch opens at the CommitLog's end
        (``epoch``: the controllers' master epoch, else the next one) and slaves may connect to
        haListenPort. The controllers' epoch may be this store's newest: a master restarted (as a
        slave, the controllers' brokers start so) goes on in its own term, whose entry stays.
        Puts are accepted from the next ``set_running(True)``: the caller (``rmq.broker.role``) first
        readies the broker to answer them as a master's. StoreError for an ``epoch`` older than this
        store's newest, before anything changed."""
        assert self.epochs is not None, "start() first"
        if epoch is not None and epoch < self.epoch:
            raise StoreError(
                f"{self.store_path}: cannot become master in epoch {epoch}: this store already knows epoch {self.epoch}"
            )
        if self.ha_client is not None:
            self.ha_client.shutdown()
            self.ha_client = None
        self.close_replica_file()
        if self.reput_offset < self.get_max_phy_offset():
            dropped = self.truncate_to(self.reput_offset)
            log.info("%s: dropped the %d bytes of a record copied only in part", self.store_path, dropped[0])
        if epoch is not None and epoch == self.epoch and self.epochs.last is not None:
            entry = self.epochs.last
        else:
            entry = self.epochs.begin(self.get_max_phy_offset(), epoch)
        self.config.broker_role = BrokerRole.SYNC_MASTER if sync_master else BrokerRole.ASYNC_MASTER
        self.become_master(sync_master)
        self.ha_service = HAService(self, self.ha_security).start()
        log.warning(
            "%s: promoted to %s, epoch %d from offset %d",
            self.store_path,
            self.config.broker_role.value,
            entry.epoch,
            entry.start_offset,
        )
        return entry

    def open_epoch(self, epoch: int) -> EpochEntry:
        """A master (restarted, say) goes on in the controllers' newer master ``epoch``, from its
        CommitLog's end; puts wait meanwhile, so that none of the old term lands after the new one's
        start (StoreError for an epoch not newer than this store's newest)."""
        assert self.epochs is not None, "start() first"
        self.acquire_put_lock()
        try:
            entry = self.epochs.begin(self.get_max_phy_offset(), epoch)
        finally:
            self.release_put_lock()
        log.warning("%s: master in epoch %d from offset %d", self.store_path, entry.epoch, entry.start_offset)
        return entry

    def demote(self, epoch_source: EpochSource | None, ha_address: str | None, slave_id: int | None) -> None:
        """A master whose puts are refused (``set_running(False)``, and ``become_slave`` run by the
        only thread that may put: ``rmq.broker.role``) replicates another master from now on: its HA
        service stops (its slaves go), and an HA client copies from ``ha_address`` (None: the one
        the name servers answer), naming ``slave_id``, after cutting what the new master never had
        (``reconcile_with_master``). The first half: ``stop_ha_service``."""
        self.stop_ha_service()
        self.config.broker_role = BrokerRole.SLAVE
        self.sync_state_set = None  # the set of its term as master: a next term gets its own
        self.ha_client = HAClient(self, epoch_source, self.ha_security)
        self.ha_client.slave_id = slave_id
        self.ha_client.master_address = ha_address
        self.ha_client.start()
        log.warning(
            "%s: demoted to slave of %s at epoch %d, CommitLog ending at %d",
            self.store_path,
            ha_address or "the routed master",
            self.epoch,
            self.get_max_phy_offset(),
        )

    def stop_ha_service(self) -> None:
        """A master's slaves are let go (a demotion, or shutdown)."""
        if self.ha_service is not None:
            self.ha_service.shutdown()
            self.ha_service = None

    def set_sync_state_set(self, broker_ids: frozenset[int]) -> None:
        """Controller mode: from now on a SYNC_MASTER put completes once the sync state set
        ``broker_ids`` (the master's own id among them) holds it, as ``rmq.store.ha.sync_state_set_rule``
        says (allAckInSyncStateSet, inSyncReplicas, minInSyncReplicas); kept across a promotion's new
        HA service. Any thread."""
        self.sync_state_set = frozenset(broker_ids)
        if self.ha_service is not None:
            self.ha_service.set_sync_state_set(self.sync_state_set)

    def hand_over_commit_completion(self) -> None:
        """Before ``start``: the caller completes SYNC_FLUSH puts itself, calling ``complete_commits``
        when ``commit_event_fd`` is readable and at least every 100 ms; no store thread does.
        Callbacks then run on the caller's thread (the broker's event loop), except for the puts
        still waiting at shutdown, completed on the thread that shuts the store down."""
        self._completion_handed_over = True

    def shutdown(self) -> None:
        """Refuse new puts, complete pending ones, flush everything, close every file and mapping
        the store opened (``StoreCore.close``), mark the exit as clean. Idempotent; a store shut
        down is not started again (make a new one)."""
        if self._lock_fd is None:
            return
        self.set_running(False)
        self.stop_ha_service()
        if self.ha_client is not None:
            self.ha_client.shutdown()
            self.ha_client = None
        self.close_replica_file()
        for service in self._services:
            service.shutdown()
        self._services = []
        self.abandon_commits()  # SYNC_MASTER: no slave will ack what is still waiting
        self.flush_commit_log(0)
        self.flush_logics()
        self.index_service.shutdown()
        self.checkpoint.close()
        self.close()
        os.unlink(self.abort_path)
        self._release_lock_file()

    def __enter__(self) -> MessageStore:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.shutdown()

    def _take_lock_file(self) -> None:
        path = os.path.join(self.store_path, "lock")
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise StoreLockedError(
                f"store {self.store_path} is locked by another process (pid {holder}); "
                "stop it or use another storePathRootDir"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._lock_fd = fd

    def _release_lock_file(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing drops the flock
            self._lock_fd = None

    # -- recovery ----------------------------------------------------------------------------

    def _recover(self) -> None:
        files = self.commit_log.mapped_files
        if self.last_exit_ok:
            # clean exit: the last files are enough to find the end
            start, redispatch = max(0, len(files) - 3), False
        else:
            # crash: re-dispatch from the newest file whose first record is older than everything the
            # checkpoint says is durable (ConsumeQueues and index included)
            cp = self.checkpoint
            times = [cp.physic_msg_timestamp, cp.logics_msg_timestamp]
            if cp.index_msg_timestamp > 0:
                times.append(cp.index_msg_timestamp)
            min_ts = min(times) - CHECKPOINT_MARGIN_MS
            start, redispatch = 0, True
            for i in range(len(files) - 1, -1, -1):
                ts = self.first_store_timestamp(files[i])
                if 0 < ts <= min_ts:
                    start = i
                    break
        began = time.monotonic()
        end, records, cut = self.recover(start, redispatch)
        min_phy = self.commit_log.get_min_offset()
        for queue in self.consume_queues():
            queue.correct_min_offset(min_phy)
        self.recovery_report = (
            f"{'clean' if self.last_exit_ok else 'crash'} recovery from file {start}: "
            f"{records} records checked{' and re-dispatched' if redispatch else ''} in "
            f"{time.monotonic() - began:.3f} s, CommitLog ends at {end}"
        )
        if cut:
            self.recovery_report += f"; cut the tail: {cut}"
            log.warning("%s: %s", self.store_path, self.recovery_report)
        else:
            log.info("%s: %s", self.store_path, self.recovery_report)

    # -- flush -------------------------------------------------------------------------------

    def checkpoint_physic(self, least_pages: int = 0) -> None:
        """Flush the CommitLog; once everything written before the flush is durable, record its
        store time in the checkpoint."""
        timestamp, end = self.last_store_timestamp, self.commit_log.get_max_offset()
        self.flush_commit_log(least_pages)
        if self.commit_log.get_flushed_where() >= end and timestamp:
            self.checkpoint.physic_msg_timestamp = timestamp

    def flush_logics(self) -> None:
        """Flush every ConsumeQueue and the index, then the checkpoint."""
        timestamp = self.last_store_timestamp
        for queue in self.consume_queues():
            queue.flush()
        if timestamp:
            self.checkpoint.logics_msg_timestamp = timestamp
        index_timestamp = self.index_service.flush()
        if index_timestamp:
            self.checkpoint.index_msg_timestamp = index_timestamp
        self.checkpoint.flush()

    # -- conveniences over the compiled put --------------------------------------------------

    def put(
        self,
        topic: str,
        body: bytes,
        queue_id: int = 0,
        *,
        tags: str | None = None,
        keys: str | list[str] | None = None,
        properties: dict[str, str] | None = None,
        wait: bool = True,
        **fields,
    ) -> PutMessageResult:
        """Put with properties as keyword arguments (tools and tests); under SYNC_FLUSH and
        ``wait``, block until the group commit completes it."""
        props = dict(properties or {})
        if tags is not None:
            props[MessageProperty.TAGS] = tags
        if keys is not None:
            props[MessageProperty.KEYS] = keys if isinstance(keys, str) else " ".join(keys)
        born_host = fields.pop("born_host", 0)
        if isinstance(born_host, str):
            fields["born_host"] = ipv4_to_int(born_host)
        elif born_host:
            fields["born_host"] = born_host
        if not (wait and self.sync_flush):
            return self.put_message(topic, queue_id, body, encode_properties(props), **fields)
        return self.put_message_and_wait(topic, queue_id, body, encode_properties(props), **fields)

    def put_message_and_wait(
        self, topic: str, queue_id: int, body: bytes, properties: bytes, **fields: int
    ) -> PutMessageResult:
        """``put_message`` that blocks until the record is durable (SYNC_FLUSH) or at once (ASYNC)."""
        done = threading.Event()
        result = self.put_message(topic, queue_id, body, properties, callback=lambda _: done.set(), **fields)
        if result.pending:
            done.wait(self.config.sync_flush_timeout / 1000 + 5)
        return result

    # -- reads -------------------------------------------------------------------------------

    def message_in_queue(self, queue: Any, offset: int) -> StoredMessage | None:
        """The message at ``offset`` of a ConsumeQueue, decoded; None when the queue or the CommitLog
        no longer holds it, or its record cannot be read (logged): the broker's own readers of a
        queue (transaction checks, POP revive) skip such a message and go on."""
        entry = queue.get_entry(offset)
        if entry is None:
            return None
        record = self.look_message_by_offset(entry[0], entry[1])
        if record is None:
            return None
        try:
            return decode_record(record, check_crc=False)
        except RecordError as e:
            log.error("%s offset %d: unreadable record at %d (%s)", queue.topic, offset, entry[0], e)
            return None

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        queue = self.find_consume_queue(topic, queue_id)
        return queue.min_offset if queue is not None else 0

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """The offset the next message of this queue gets (0 for an unknown queue)."""
        queue = self.find_consume_queue(topic, queue_id)
        return queue.max_offset_in_queue if queue is not None else 0

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        return self.offset_in_queue_by_time(topic, queue_id, timestamp)

    def get_message_store_timestamp(self, topic: str, queue_id: int, queue_offset: int) -> int:
        """Store time of one message of a queue, or -1."""
        queue = self.find_consume_queue(topic, queue_id)
        entry = queue.get_entry(queue_offset) if queue is not None else None
        return self.store_timestamp_at(entry[0]) if entry is not None else -1

    def get_earliest_message_time(self, topic: str | None = None, queue_id: int = 0) -> int:
        """Store time of the oldest message of a queue (or of the whole CommitLog), or -1."""
        if topic is None:
            return self.store_timestamp_at(self.commit_log.get_min_offset())
        return self.get_message_store_timestamp(topic, queue_id, self.get_min_offset_in_queue(topic, queue_id))

    def get_min_phy_offset(self) -> int:
        return self.commit_log.get_min_offset()

    def get_max_phy_offset(self) -> int:
        return self.commit_log.get_max_offset()

    def get_commit_log_data(self, offset: int) -> memoryview | None:
        """Zero-copy view of the CommitLog from ``offset`` to the end of what its file holds (HA)."""
        mapped_file = self.commit_log.find_file(offset)
        if mapped_file is None:
            return None
        start = offset - mapped_file.file_from_offset
        if start >= mapped_file.wrote_position:
            return None
        return mapped_file.read(start, mapped_file.wrote_position - start)

    def query_message(
        self, topic: str, key: str, max_num: int = 32, begin: int = 0, end: int = 2**63 - 1
    ) -> QueryMessageResult:
        """Messages of ``topic`` whose UNIQ_KEY or one of whose KEYS is ``key``, stored in [begin, end]
        (ms), newest first. The index may return hash collisions: each record's keys are re-checked."""
        found = []
        for offset in self.index_service.query(topic, key, max_num, begin, end):
            record = self.look_message_by_offset(offset)
            if record is None:
                continue
            message = decode_record(record, check_crc=False)
            if message.topic == topic and (
                key in message.keys or message.properties.get(MessageProperty.UNIQ_KEY) == key
            ):
                found.append(record)
                if len(found) >= max_num:
                    break
        return QueryMessageResult(found, self.checkpoint.index_msg_timestamp, self.index_service.max_phy_offset)

    def tag_filter(self, tags: list[str], exact: bool = True) -> TagFilter:
        return TagFilter.of_tags(tags, exact)

    # -- retention ---------------------------------------------------------------------------

    def disk_used_ratio(self, path: str | None = None) -> float:
        """Used fraction of the disk under ``path`` (default: the CommitLog's directory)."""
        path = self.commit_log.store_path if path is None else path
        st = os.statvfs(path if os.path.isdir(path) else self.store_path)
        return 1.0 - st.f_bfree / st.f_blocks if st.f_blocks else 0.0

    def disk_usage(self) -> DiskUsage:
        return DiskUsage(
            self.disk_used_ratio(),
            self.disk_used_ratio(os.path.join(self.store_path, "consumequeue")),
            self.disk_used_ratio(self.index_service.store_path),
        )

    def check_disk_space(self, usage: DiskUsage | None = None) -> DiskUsage:
        """RocketMQ's ``CleanCommitLogService.isSpaceFull``: while the CommitLog's or the
        ConsumeQueues' disk is fuller than diskSpaceWarningLevelRatio the store is full and refuses
        puts (SERVICE_NOT_AVAILABLE); below it, puts resume. Each change is logged once. The
        broker's scheduler calls it every second, the clean service before each clean."""
        usage = self.disk_usage() if usage is None else usage
        level = self.config.disk_space_warning_level_ratio
        used = max(usage.commit_log, usage.consume_queue)
        with self._disk_check_lock:
            was_full = self.mark_disk_full(used > level)
            if used > level and not was_full:
                log.error(
                    "disk of %s maybe full soon (%s), above diskSpaceWarningLevelRatio %.2f: "
                    "marked full, writes are refused",
                    self.store_path,
                    usage,
                    level,
                )
            elif used <= level and was_full:
                log.warning("disk space of %s OK (%s): marked writeable again", self.store_path, usage)
        return usage

    def clean_expired_files(
        self, now_ms: int | None = None, disk_used_ratio: Callable[[], float] | None = None, force: bool = False
    ) -> int:
        """RocketMQ's three disk levels: delete CommitLog files older than fileReservedTime hours
        when it is deleteWhen o'clock (or ``force``), or at any hour while the disk is fuller than
        diskMaxUsedSpaceRatio; delete the oldest files even if not expired while it is fuller than
        diskSpaceCleanForciblyRatio (above diskSpaceWarningLevelRatio, ``check_disk_space`` also
        refuses puts). Never the file being written. Then ConsumeQueue and index files wholly below
        the new min offset. ``now_ms`` and ``disk_used_ratio`` are injectable for tests. Returns how
        many CommitLog files went."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        ratio_of = disk_used_ratio or self.disk_used_ratio
        limit = self.config.disk_max_used_space_ratio / 100
        forcibly = self.config.disk_space_clean_forcibly_ratio
        delete_time = force or time.localtime(now_ms / 1000).tm_hour in self.config.delete_hours
        expire_before = now_ms - self.config.file_reserved_time * 3_600_000
        deleted = 0
        while True:
            files = self.commit_log.mapped_files
            if len(files) <= 1:
                break
            oldest = files[0]
            ratio = ratio_of()
            expired = os.stat(oldest.path).st_mtime * 1000 <= expire_before and (delete_time or ratio > limit)
            disk_full = not expired and ratio > forcibly
            if not (expired or disk_full):
                break
            self.acquire_put_lock()
            try:
                self.commit_log.delete_first_file()
                self.commit_files_changed()
            finally:
                self.release_put_lock()
            log.info("deleted CommitLog file %s (%s)", oldest.path, "expired" if expired else "disk full")
            deleted += 1
        self._clean_logics()
        return deleted

    def _clean_logics(self) -> None:
        min_phy = self.commit_log.get_min_offset()
        self.acquire_put_lock()
        try:
            for queue in self.consume_queues():
                queue.delete_expired_files(min_phy)
        finally:
            self.release_put_lock()
        self.index_service.delete_expired_files(min_phy)

    def delete_topic(self, topic: str) -> int:
        """Destroy ``topic``'s ConsumeQueues and their files (RocketMQ's deleteTopics), giving their
        space back; its records stay in the CommitLog until retention deletes the files that hold
        them. A later put to the topic starts its queues again at offset 0. Returns how many queues
        went."""
        reason = topic_error(topic)
        if reason is not None:  # a name that is not a topic's must not become a path to remove
            raise StoreError(f"cannot delete the queues of {topic!r}: {reason}")
        self.acquire_put_lock()
        try:
            queues = self.consume_queue_table.pop(topic, {})
            for queue in queues.values():
                queue.destroy()
        finally:
            self.release_put_lock()
        with contextlib.suppress(OSError):
            os.rmdir(os.path.join(self.store_path, "consumequeue", topic))
        if queues:
            log.info("%s: deleted the %d ConsumeQueues of topic %s", self.store_path, len(queues), topic)
        return len(queues)


def new_store(store_path: str, **settings) -> MessageStore:
    """A MessageStore at ``store_path`` (not started), other settings by their snake_case names."""
    if "store_path_root_dir" in settings:
        raise StoreError("give the store path once, as store_path")
    return MessageStore(MessageStoreConfig(store_path_root_dir=store_path, **settings))


__all__ = ["DiskUsage", "MessageStore", "QueryMessageResult", "new_store", "PutMessageStatus"]
