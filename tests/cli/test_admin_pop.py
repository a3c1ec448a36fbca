"""rmq-admin consumer progress of a POP group (GET_POP_CONSUME_STATS): per queue the messages
invisible (popped, not acked) and acked, and the group's POP retry topic, whose messages are the
retrying ones. A real in-process broker, popped with the 4.x POP requests."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from rmq.broker.topic_config import TopicConfig
from rmq.cli.admin import main
from rmq.protocol.codes import ResponseCode
from rmq.protocol.pop import pop_retry_topic
from tests.helpers import wait_until
from tests.helpers.broker import InProcessBrokers, put
from tests.helpers.pop import Popper

TOPIC = "PopProgress"
GROUP = "PopProgressGroup"


def progress(namesrv: str, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["consumer", "progress", GROUP, *args, "-n", namesrv])
    return result.exit_code, result.output


def test_progress_shows_a_pop_groups_invisible_acked_and_retrying_messages(store_dir: Path, client):
    brokers = InProcessBrokers(store_dir)
    try:
        broker = brokers.start(reviveInterval="100", reviveQueueNum="2")
        namesrv = brokers.started[0].namesrv.address
        broker.topic_config_manager.update_topic_config(TopicConfig(TOPIC, 2, 2))
        for body, queue_id in ((b"a", 0), (b"b", 0), (b"c", 0), (b"d", 1)):
            put(broker, TOPIC, body, queue_id)
        popper = Popper(client, broker.broker_addr, TOPIC, GROUP)
        popped = {m.body: m for m in popper.pop(invisible_ms=60_000)}
        assert sorted(popped) == [b"a", b"b", b"c", b"d"]
        assert popper.ack(popped[b"a"]).code == ResponseCode.SUCCESS
        # b comes back unacked at once: into the group's POP retry topic
        assert popper.change(popped[b"b"], 100).code == ResponseCode.SUCCESS
        retry = pop_retry_topic(TOPIC, GROUP)

        def rows():
            code, out = progress(namesrv, "--json")
            assert code == 0, out
            return {(r["topic"], r["queueId"]): r for r in json.loads(out)}

        expected = {
            (TOPIC, 0): (3, 3, 1, 2),  # a acked, b handed to the retry topic, c invisible
            (TOPIC, 1): (1, 1, 1, 0),
            (retry, 0): (1, 0, 0, 0),
        }

        def shown():
            got = rows()
            return {
                key: (r["brokerOffset"], r["consumerOffset"], r["invisible"], r["acked"]) for key, r in got.items()
            } == expected and got

        got = wait_until(shown, 10, lambda: f"the progress shows the pops, the ack and the retry: {rows()}")
        assert got[(retry, 0)]["retrying"] == 1
        code, out = progress(namesrv)
        assert code == 0 and "Invisible: 2" in out and "Retrying: 1" in out and "Acked" in out
    finally:
        brokers.shutdown_all()
