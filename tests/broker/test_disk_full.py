"""A broker process whose store fills its disk (a tiny tmpfs and a filler file): above
diskSpaceWarningLevelRatio sends are refused with SERVICE_NOT_AVAILABLE and RocketMQ's remark, and our
producer says so; pulls and offset commits go on; once the filler goes, sends resume; after a
restart the store is clean and holds everything that was acknowledged. New topics cost a page per
queue written, not a 6 MB ConsumeQueue file, and deleting them gives it back."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from rmq.client import Message, Producer
from rmq.errors import ResponseError
from rmq.net import RemotingCommand
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.record import decode_record
from rmq.settings import camel_to_snake
from rmq.store import GetMessageStatus, MessageStore, MessageStoreConfig
from tests.helpers import wait_until
from tests.helpers.disk import fill, tiny_tmpfs, used_ratio
from tests.helpers.processes import Cluster
from tests.helpers.requests import offset_request, send_request

TOPIC = "DiskFullTopic"
QUEUES = 2
GROUP = "disk-full-consumers"
# One CommitLog file holds all the test writes: no level deletes a file that holds unread messages.
STORE_FILES = {
    "mappedFileSizeCommitLog": str(1024 * 1024),
    "mappedFileSizeConsumeQueue": str(20 * 1000),
    "maxHashSlotNum": "256",
    "maxIndexNum": "1024",
}
REMARK = re.compile(
    r"^service not available now\. It may be caused by one of the following reasons: the broker's disk is "
    r"full \[CL: +0\.9\d CQ: +0\.9\d INDEX: +0\.9\d\], messages are put to the slave, message store has been "
    r"shut down, etc\.$"
)


@contextmanager
def cluster_on_tmpfs(spawn, tmp_path: Path, size: str, **settings: str) -> Iterator[Cluster]:
    """A Cluster whose store is on a tmpfs of ``size``, with the small ``STORE_FILES`` unless
    ``settings`` say otherwise."""
    with tiny_tmpfs(tmp_path / "tiny", size) as mount_point:
        cluster = Cluster(spawn, mount_point / "store")
        cluster.settings.update({**STORE_FILES, **settings})
        try:
            yield cluster.start()
        finally:
            cluster.close()
            for proc in (cluster.broker_proc, cluster.namesrv_proc):
                if proc is not None and proc.poll() is None:
                    proc.terminate()
                    proc.wait(10)


@pytest.fixture
def full_disk_cluster(spawn, tmp_path: Path) -> Iterator[Cluster]:
    with cluster_on_tmpfs(spawn, tmp_path, "4m") as cluster:
        yield cluster


def test_a_full_disk_refuses_sends_serves_pulls_and_resumes(full_disk_cluster: Cluster):
    cluster = full_disk_cluster
    cluster.create_topic(TOPIC, QUEUES)
    mount_point = cluster.store.parent
    acked: list[bytes] = []
    with Producer("disk-full-producers", namesrv_addr=cluster.namesrv_addr) as producer:
        for i in range(40):
            producer.send(Message(TOPIC, b"before-%03d" % i, keys=f"k{i}"))
            acked.append(b"before-%03d" % i)

        filler = mount_point / "filler"
        fill(filler, leave=256 * 1024)  # past 0.90, yet room to write: the store refuses on its own
        assert used_ratio(mount_point) > 0.9

        def send_refused():
            # until the broker's next disk check (every second) sends still go in
            body = b"while-filling-%03d" % len(acked)
            answer = cluster.call(send_request(TOPIC, body))
            if answer.code == ResponseCode.SUCCESS:
                acked.append(body)
                return None
            return answer

        refused = wait_until(send_refused, 5, "a send refused once the disk is past diskSpaceWarningLevelRatio")
        assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE
        assert REMARK.match(refused.remark), refused.remark
        # the producer tries again (another broker, if it had one), then says why
        with pytest.raises(ResponseError) as raised:
            producer.send(Message(TOPIC, b"refused too"))
        assert raised.value.code == ResponseCode.SERVICE_NOT_AVAILABLE and "disk is full" in str(raised.value)

        # reads, queries and offset commits go on
        assert sorted(m.body for m in cluster.messages(TOPIC)) == sorted(acked)
        for queue_id, max_offset in cluster.max_offsets(TOPIC).items():
            commit = offset_request(RequestCode.UPDATE_CONSUMER_OFFSET, TOPIC, queue_id, GROUP, commitOffset=max_offset)
            assert cluster.call(commit).code == ResponseCode.SUCCESS
            answer = cluster.call(offset_request(RequestCode.QUERY_CONSUMER_OFFSET, TOPIC, queue_id, GROUP))
            assert answer.code == ResponseCode.SUCCESS and int(answer.ext_fields["offset"]) == max_offset
        assert cluster.call(send_request(TOPIC, b"still refused")).code == ResponseCode.SERVICE_NOT_AVAILABLE

        filler.unlink()
        wait_until(
            lambda: cluster.call(send_request(TOPIC, b"after-000")).code == ResponseCode.SUCCESS,
            5,
            "sends accepted again once the filler is gone",
        )
        acked.append(b"after-000")  # the refused tries stored nothing: the last pull shows it
        for i in range(1, 20):
            producer.send(Message(TOPIC, b"after-%03d" % i))
            acked.append(b"after-%03d" % i)
    assert sorted(m.body for m in cluster.messages(TOPIC)) == sorted(acked)

    # a clean stop leaves a clean store: nothing cut, every record whole, every acked message there
    cluster.broker_proc.terminate()
    assert cluster.broker_proc.wait(10) == 0
    config = MessageStoreConfig(
        store_path_root_dir=str(cluster.store),
        **{camel_to_snake(key): int(value) for key, value in STORE_FILES.items()},
    )
    with MessageStore(config) as store:
        assert store.last_exit_ok and "cut the tail" not in (store.recovery_report or "")
        bodies = []
        for queue_id in range(QUEUES):
            offset = 0
            while (got := store.get_message("g", TOPIC, queue_id, offset, 100)).status is GetMessageStatus.FOUND:
                bodies += [decode_record(m, check_crc=True).body for m in got.messages]
                offset = got.next_begin_offset
        assert sorted(bodies) == sorted(acked)
        assert len(store.query_message(TOPIC, "k39").messages) == 1
    cluster.start_broker()
    assert sorted(m.body for m in cluster.messages(TOPIC)) == sorted(acked)


def test_one_byte_sends_to_new_topics_cost_a_page_each_and_deleting_them_gives_it_back(spawn, tmp_path: Path):
    # issue 22: with ConsumeQueue files fallocated whole (6,000,000 bytes at the default size), 35
    # one-byte sends to new topics filled a 256 MB disk; here 2 would fill this 16 MB one
    with cluster_on_tmpfs(spawn, tmp_path, "16m", mappedFileSizeConsumeQueue="6000000") as cluster:
        mount_point = cluster.store.parent
        assert cluster.call(send_request("Warm", b"x")).code == ResponseCode.SUCCESS  # the CommitLog file
        used_before = used_bytes(mount_point)
        topics = [f"New{i:02d}" for i in range(40)]
        for topic in topics:  # auto-created from TBW102, as a client's first send does
            answer = cluster.call(send_request(topic, b"x"))
            assert answer.code == ResponseCode.SUCCESS, (topic, answer.remark)
        queue_root = cluster.store / "consumequeue"
        for topic in topics:
            queue_file = queue_root / topic / "0" / ("0" * 20)
            assert queue_file.stat().st_size == 6_000_000 and queue_file.stat().st_blocks * 512 == 4096
        assert used_bytes(mount_point) - used_before < len(topics) * 4096 + 64 * 1024

        for topic in topics:
            request = RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic})
            assert cluster.call(request).code == ResponseCode.SUCCESS
        assert sorted(p.name for p in queue_root.iterdir() if p.name.startswith("New")) == []
        # the 40 pages (160 KiB) came back; the config files are as big as before the sends
        assert used_bytes(mount_point) <= used_before + 32 * 1024
        assert cluster.call(send_request("New00", b"again")).code == ResponseCode.SUCCESS
        assert [m.body for m in cluster.messages("New00")] == [b"again"]


def used_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return (st.f_blocks - st.f_bfree) * st.f_frsize
