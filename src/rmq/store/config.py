"""MessageStoreConfig: the store's settings, typed, under RocketMQ's names (declared in rmq.settings)."""

from __future__ import annotations

import dataclasses

from rmq.settings import BrokerRole, FlushDiskType, SettingsView, parse_delay_levels, setting

__all__ = ["BrokerRole", "FlushDiskType", "MessageStoreConfig"]

# The store host of a store used without a broker (a broker passes its resolved brokerIP1).
STANDALONE_STORE_IP = "127.0.0.1"


@dataclasses.dataclass
class MessageStoreConfig(SettingsView):
    """Settings of a MessageStore (``rmq.settings`` declares each one's type, default and help)."""

    store_path_root_dir: str = setting("storePathRootDir")
    mapped_file_size_commit_log: int = setting("mappedFileSizeCommitLog")
    mapped_file_size_consume_queue: int = setting("mappedFileSizeConsumeQueue")
    flush_disk_type: FlushDiskType = setting("flushDiskType")
    flush_interval_commit_log: int = setting("flushIntervalCommitLog")
    flush_commit_log_least_pages: int = setting("flushCommitLogLeastPages")
    flush_commit_log_thorough_interval: int = setting("flushCommitLogThoroughInterval")
    flush_interval_consume_queue: int = setting("flushIntervalConsumeQueue")
    sync_flush_timeout: int = setting("syncFlushTimeout")
    sync_flush_inline_max_micros: int = setting("syncFlushInlineMaxMicros")
    os_page_cache_busy_time_out_mills: int = setting("osPageCacheBusyTimeOutMills")
    file_reserved_time: int = setting("fileReservedTime")
    delete_when: str = setting("deleteWhen")
    disk_max_used_space_ratio: int = setting("diskMaxUsedSpaceRatio")
    disk_space_clean_forcibly_ratio: float = setting("diskSpaceCleanForciblyRatio")
    disk_space_warning_level_ratio: float = setting("diskSpaceWarningLevelRatio")
    clean_resource_interval: int = setting("cleanResourceInterval")
    max_message_size: int = setting("maxMessageSize")
    max_hash_slot_num: int = setting("maxHashSlotNum")
    max_index_num: int = setting("maxIndexNum")
    message_delay_level: str = setting("messageDelayLevel")
    timer_wheel_enable: bool = setting("timerWheelEnable")
    timer_precision_ms: int = setting("timerPrecisionMs")
    timer_max_delay_sec: int = setting("timerMaxDelaySec")
    mapped_file_size_timer_log: int = setting("mappedFileSizeTimerLog")
    access_message_in_memory_max_ratio: int = setting("accessMessageInMemoryMaxRatio")
    # the store host written in every record and in msgIds: brokerIP1 and the broker's listenPort
    broker_ip1: str = setting("brokerIP1")  # declared optional (None until a broker resolves it)
    listen_port: int = setting("listenPort")
    # replication (the HA service lives in the store, as in RocketMQ)
    broker_role: BrokerRole = setting("brokerRole")
    ha_listen_port: int = setting("haListenPort")  # declared optional: listenPort + 1 unless set
    ha_listen_address: str | None = setting("haListenAddress")
    ha_master_address: str | None = setting("haMasterAddress")
    ha_send_heartbeat_interval: int = setting("haSendHeartbeatInterval")
    ha_housekeeping_interval: int = setting("haHousekeepingInterval")
    ha_max_connections: int | None = setting("haMaxConnections")
    ha_transfer_batch_size: int = setting("haTransferBatchSize")
    ha_max_gap_not_in_sync: int = setting("haMaxGapNotInSync")
    slave_timeout: int = setting("slaveTimeout")
    in_sync_replicas: int = setting("inSyncReplicas")
    min_in_sync_replicas: int = setting("minInSyncReplicas")
    all_ack_in_sync_state_set: bool = setting("allAckInSyncStateSet")
    ha_max_time_slave_not_catchup: int = setting("haMaxTimeSlaveNotCatchup")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.broker_ip1 is None:
            self.broker_ip1 = STANDALONE_STORE_IP
        if self.ha_listen_port is None:
            self.ha_listen_port = self.listen_port + 1

    @property
    def sync_master(self) -> bool:
        """Sends wait for a slave's ack (SYNC_MASTER)."""
        return self.broker_role is BrokerRole.SYNC_MASTER

    @property
    def slave(self) -> bool:
        return self.broker_role is BrokerRole.SLAVE

    @property
    def sync_flush(self) -> bool:
        return self.flush_disk_type is FlushDiskType.SYNC_FLUSH

    @property
    def delay_level_ms(self) -> list[int]:
        """Delay of level L at index L - 1."""
        return list(parse_delay_levels(self.message_delay_level).values())

    @property
    def delete_hours(self) -> set[int]:
        return {int(h) for h in self.delete_when.split(";") if h.strip()}
