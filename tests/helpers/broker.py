"""An in-process broker for the broker tests: started as ``rmq-broker`` puts one together (with its
embedded name server), on free loopback ports and small files; messages put straight into its store
and read back from its queues."""

from __future__ import annotations

from pathlib import Path

from rmq.broker.config import load_broker_config
from rmq.broker.controller import BrokerController
from rmq.broker.topic_config import TopicConfig
from rmq.cli.broker import BrokerStartup
from rmq.net import RemotingClient, RemotingCommand
from rmq.perf.procs import broker_settings, wait_until
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.record import StoredMessage, decode_record
from rmq.store import PutMessageResult
from tests.helpers.requests import call, send_request


def new_startup(store_dir: Path, **overrides: str) -> BrokerStartup:
    """An in-process broker and its embedded name server, as ``rmq-broker`` puts them together."""
    return BrokerStartup(*load_broker_config(None, broker_settings(store_dir, **overrides)))


class InProcessBrokers:
    """Brokers started for one test; ``shutdown_all`` stops every one still running."""

    def __init__(self, store_dir: Path):
        self.store_dir = store_dir
        self.started: list[BrokerStartup] = []

    def start(self, **overrides: str) -> BrokerController:
        startup = new_startup(self.store_dir, **overrides).start()
        self.started.append(startup)
        assert startup.controller is not None
        return startup.controller

    def shutdown_all(self) -> None:
        for startup in self.started:
            startup.shutdown()


def create_topic(broker: BrokerController, topic: str, queues: int = 4) -> None:
    """Create ``topic`` on an in-process broker, as UPDATE_AND_CREATE_TOPIC would."""
    broker.topic_config_manager.update_topic_config(TopicConfig(topic, queues, queues))


def put(broker: BrokerController, topic: str, body: bytes, queue_id: int = 0, **properties: str) -> PutMessageResult:
    """Store a message as the send path does (a DELAY goes through SCHEDULE_TOPIC_XXXX first)."""
    result = broker.put_inner(topic, queue_id, body, properties)
    assert result.ok, result.status
    return result


def messages_in(broker: BrokerController, topic: str, queue_id: int = 0) -> list[StoredMessage]:
    """The first 32 messages of a queue, decoded."""
    got = broker.store.get_message("test", topic, queue_id, 0, 32)
    return [decode_record(m) for m in got.messages]


def wait_for_message(
    broker: BrokerController, topic: str, count: int, timeout: float = 10.0, queue_id: int = 0
) -> StoredMessage:
    """The ``count``-th message of the queue, once it is there."""
    found = wait_until(
        lambda: messages_in(broker, topic, queue_id)[count - 1 :],
        timeout,
        f"message {count} of {topic} queue {queue_id} arrived",
    )
    return found[0]


def stored_count(broker: BrokerController, topic: str) -> int:
    """How many messages the topic's first 8 queues hold."""
    return sum(broker.store.get_max_offset_in_queue(topic, q) for q in range(8))


def assert_still_serving(broker: BrokerController, client: RemotingClient) -> None:
    """The broker (and the connection) still take a plain send."""
    r = call(client, broker.broker_addr, send_request("StillThere", b"ok"))
    assert r.code == ResponseCode.SUCCESS, r.remark


# the group send_back fails messages for unless told another
RETRY_GROUP = "G_retry"


def send_back(
    client, broker, offset: int, delay_level: int = 0, max_reconsume_times: int | None = None, group: str = RETRY_GROUP
) -> RemotingCommand:
    """CONSUMER_SEND_MSG_BACK of the message at CommitLog ``offset``: the consumer failed it."""
    ext = {"group": group, "offset": offset, "delayLevel": delay_level, "originMsgId": "", "originTopic": "T"}
    if max_reconsume_times is not None:
        ext["maxReconsumeTimes"] = max_reconsume_times
    request = RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, ext)
    return client.invoke_sync(broker.broker_addr, request, timeout=3.0)
