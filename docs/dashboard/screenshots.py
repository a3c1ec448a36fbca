"""The screenshots of docs/dashboard.md: a small cluster (a name server, a master and its slave), a
little workload, rmq-dashboard over it, and a 1280 px wide full-page PNG of each page in this
directory. Run by hand from a checkout (not part of the suite), with Debian's chromium installed:

    PYTHONPATH=src python docs/dashboard/screenshots.py [--capacity-dir DIR]

The workload: three topics; group Billing read 8 of Orders' 40 messages and stopped (a lag of 32,
still connected); Shipping has caught up; Refunds fails every message of Payments, so with
retryMaxTimes 1 a payment goes to %RETRY%Refunds, then %DLQ%Refunds; a producer keeps sending 20
Inventory updates a second. ``--capacity-dir``: a plan rmq-capacity wrote,
for the capacity page (without one, the page says how to make one).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

from rmq.client import ConsumeConcurrentlyStatus, Message, Producer, PullConsumer, PushConsumer
from rmq.client.admin_client import AdminClient
from rmq.perf.procs import (
    Processes,
    broker_settings,
    start_broker_process,
    start_namesrv,
    wait_until,
)
from rmq.protocol.message import dlq_topic

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # the checkout, for tests.helpers

from tests.helpers.dashboard import chromium, start_dashboard  # noqa: E402  (after the path above)

FAST = {"rebalance_interval": 1.0, "persist_consumer_offset_interval": 0.2, "consume_from_where": "FIRST_OFFSET"}
DELAYS = {"messageDelayLevel": "1s 1s 1s 1s 1s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s 2s"}


def start_cluster(procs: Processes, root: Path) -> str:
    """A name server, a master and its slave; the name server's address."""
    _, namesrv = start_namesrv(procs.spawn)
    for name, extra in (("master", {}), ("slave", {"brokerRole": "SLAVE", "brokerId": "1"})):
        store = root / name
        store.mkdir()
        settings = broker_settings(store, **DELAYS, **extra)
        del settings["namesrvListenPort"]
        start_broker_process(procs.spawn, settings, namesrv, extra_args=("--log-level", "WARNING"))
    return namesrv


def workload(namesrv: str) -> tuple[list[object], Producer, str]:
    """The clients left running, the producer among them, and the client message id of the
    dead-lettered payment."""
    with AdminClient(namesrv) as admin:
        admin.update_topic("Orders", 4, 4)
        admin.update_topic("Payments", 2, 2)
        admin.update_topic("Inventory", 2, 2)
        admin.update_subscription_group({"groupName": "Refunds", "retryMaxTimes": 1})
    clients: list[object] = []

    def refunds(msgs):
        return ConsumeConcurrentlyStatus.RECONSUME_LATER

    for group, topic, listener, extra in (
        ("Shipping", "Orders", None, {}),
        ("Refunds", "Payments", refunds, {"max_reconsume_times": 1}),
    ):
        consumer = PushConsumer(group, namesrv, instance_name=group.lower(), **FAST, **extra)
        consumer.subscribe(topic)
        consumer.register_listener(listener or (lambda msgs: None))
        clients.append(consumer.start())
    producer = Producer("Shop", namesrv, instance_name="shop").start()
    clients.append(producer)
    for i in range(40):
        body = f'{{"order": {1000 + i}, "sku": "SKU-{i % 7}", "amount": {12 + i % 9}.50}}'.encode()
        producer.send(Message("Orders", body, tags="created", keys=f"order-{1000 + i}"))
    for i in range(12):
        producer.send(Message("Inventory", f"SKU-{i} -1".encode(), tags="reserve", keys=f"SKU-{i}"))
    doomed = producer.send(Message("Payments", b'{"payment": 4242, "card": "**** 4242"}', tags="card", keys="pay-4242"))
    producer.instance.send_heartbeat_to_all()
    # Billing read 8 orders, committed them and stopped reading: a lag of 32, still connected
    billing = PullConsumer("Billing", namesrv, instance_name="billing", auto_commit=False, max_poll_records=2, **FAST)
    billing.subscribe("Orders")
    clients.append(billing.start())
    handled = 0
    while handled < 8:
        handled += len(billing.poll(10))
    billing.commit()
    with AdminClient(namesrv) as admin:
        wait_until(lambda: admin.topic_exists(dlq_topic("Refunds")), 30, "the payment dead-lettered")
    return clients, producer, doomed.msg_id


def keep_sending(producer: Producer, stop: threading.Event) -> None:
    """Inventory updates, 20 a second, until ``stop``: the topic's and the brokers' TPS."""
    i = 0
    while not stop.wait(0.05):
        producer.send(Message("Inventory", f"SKU-{i % 12} -1".encode(), tags="reserve", keys=f"SKU-{i % 12}"))
        i += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capacity-dir", help="a plan rmq-capacity wrote, for the capacity page")
    args = parser.parse_args()
    procs = Processes()
    gate = threading.Event()
    clients: list[object] = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            namesrv = start_cluster(procs, Path(tmp))
            clients, producer, doomed = workload(namesrv)
            extra = ["--capacity-dir", args.capacity_dir] if args.capacity_dir else []
            _, url = start_dashboard(procs.spawn, namesrv, *extra)
            _, guarded = start_dashboard(procs.spawn, namesrv, "--login-required")
            trickle = threading.Thread(target=keep_sending, args=(producer, gate), daemon=True)
            trickle.start()
            time.sleep(11)  # the brokers' TPS are rates over their last 10 s
            shoot(url, guarded, doomed)
        finally:
            gate.set()
            time.sleep(0.1)  # the last trickle send
            for client in clients:
                client.shutdown()  # type: ignore[attr-defined]
            procs.stop_all()


def shoot(url: str, guarded: str, doomed: str) -> None:
    """Each page of the dashboard at ``url``; the login page of the one at ``guarded`` (--login-required)."""
    pages = {
        "cluster": "/",
        "topics": "/topics",
        "topic": "/topics/Orders",
        "consumers": "/consumers",
        "consumer": "/consumers/Billing",
        "messages": "/messages?mode=key&topic=Orders&key=order-1003",
        "message": f"/messages/{doomed}?topic=Payments",
        "producers": "/producers?group=Shop",
        "capacity": "/capacity",
        "login": f"{guarded}/login",
    }
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 720})
        for name, path in pages.items():
            page.goto(path if path.startswith("http") else url + path)
            page.screenshot(path=str(HERE / f"{name}.png"), full_page=True)
            print(f"{name}.png: {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
