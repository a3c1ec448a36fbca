"""Issue 13, acceptance 5, with real processes: 10,000 messages due at random times over the next
60 s each arrive in their topic within a second of their time, none early, none twice, none lost,
across a broker stopped with SIGTERM and, later, killed with SIGKILL, each time started again.

A message due while the broker is down cannot arrive on time: for those the second counts from
when the broker is back. "Arrive" is the delivered record's store time, the moment a consumer can
pull it; the whole topic is read back at the end (this test's ~70 s is the suite's one long timer
test: everything else about timers is short).
"""

from __future__ import annotations

import random
from concurrent.futures import wait
from datetime import datetime, timezone

from rmq._clock import now_ms
from rmq.client import Message, Producer
from tests.helpers import wait_until
from tests.helpers.requests import pull_all

MESSAGES = 10_000
SPREAD_MS = 60_000
QUEUES = 4
LATENESS_BOUND_MS = 1000
SIGTERM_AT_S = 20
SIGKILL_AT_S = 40


def test_ten_thousand_timed_messages_across_a_restart_and_a_crash(cluster):
    topic = cluster.create_topic("TimedAcceptance", QUEUES)
    rng = random.Random(13)
    due: dict[str, int] = {}
    start = now_ms()
    with Producer("timed-acceptance", namesrv_addr=cluster.namesrv_addr) as producer:
        futures = []
        for i in range(MESSAGES):
            at = now_ms() + rng.randrange(200, SPREAD_MS)
            message = Message(topic, f"m{i}".encode(), deliver_at=datetime.fromtimestamp(at / 1000, timezone.utc))
            futures.append((at, producer.send_async(message)))
            if len(futures) % 500 == 0:
                wait([f for _, f in futures[-500:]], timeout=30)
        for at, future in futures:
            due[future.result(timeout=30).msg_id] = at
    sent_in = now_ms() - start
    assert sent_in < SIGTERM_AT_S * 1000, f"sending took {sent_in} ms"

    down: list[tuple[int, int]] = []
    wait_until(lambda: now_ms() - start > SIGTERM_AT_S * 1000, SIGTERM_AT_S + 5, "the time to stop it")
    stopped = now_ms()
    cluster.restart_broker()  # SIGTERM, then started again on the same store
    down.append((stopped, now_ms()))
    wait_until(lambda: now_ms() - start > SIGKILL_AT_S * 1000, SIGKILL_AT_S + 5, "the time to kill it")
    killed = now_ms()
    cluster.kill_broker()
    cluster.start_broker()
    down.append((killed, now_ms()))

    last_due = max(due.values())
    wait_until(lambda: now_ms() > last_due + 2 * LATENESS_BOUND_MS, 40, "every message due")
    got = pull_all(cluster.client, cluster.broker_addr, topic, QUEUES)
    ids = [m.uniq_key for m in got]
    assert len(ids) == len(set(ids)), f"{len(ids) - len(set(ids))} delivered twice"
    assert set(ids) == set(due), f"{len(set(due) - set(ids))} never delivered"

    early, late = [], []
    for message in got:
        at = due[message.uniq_key]
        if message.store_timestamp < at:
            early.append((message.uniq_key, at - message.store_timestamp))
        ready = max([at] + [up for gone, up in down if gone <= at <= up])
        if message.store_timestamp - ready > LATENESS_BOUND_MS:
            late.append((message.uniq_key, message.store_timestamp - ready))
    assert not early, f"{len(early)} early, e.g. {early[:5]} (ms)"
    assert not late, f"{len(late)} more than {LATENESS_BOUND_MS} ms late, e.g. {late[:5]} (ms); down {down}"
