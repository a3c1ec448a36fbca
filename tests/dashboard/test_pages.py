"""rmq-dashboard's pages in headless Chromium against a live cluster (an rmq-namesrv and an rmq-broker
process), without ACL: what an operator sees of what was sent, and the writes' forms."""

from __future__ import annotations

import dataclasses
import datetime
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from rmq.client import ConsumeConcurrentlyStatus, Message, Producer, PullConsumer, PushConsumer
from rmq.client.admin_client import AdminClient
from rmq.perf.procs import Processes
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.message import dlq_topic
from tests.helpers import wait_until
from tests.helpers.dashboard import start_dashboard
from tests.helpers.processes import Cluster
from tests.helpers.requests import offset_request

LAG_TOPIC, LAG_GROUP = "DashOrders", "DashBilling"
TRACE_TOPIC, DLQ_GROUP = "DashPayments", "DashFailing"
RESET_GROUP = "DashAudit"
PRODUCER_GROUP = "DashShop"
MARKUP_TOPIC = "DashMarkup"
MARKUP = '<script>document.title="owned"</script><b id="injected">bold</b>'

FAST = {"rebalance_interval": 1.0, "persist_consumer_offset_interval": 0.2}


@dataclasses.dataclass
class Site:
    url: str
    cluster: Cluster
    consumer_client_id: str
    producer_client_id: str
    doomed_id: str


@pytest.fixture(scope="module")
def site(module_processes: Processes, tmp_path_factory) -> Iterator[Site]:
    """A cluster with: 5 messages on DashOrders, of which group DashBilling (a lite pull consumer,
    online) consumed and committed 2 (lag 3, one connection); DashAudit committed all 5 and is
    offline; on DashPayments a message group DashFailing (retryMaxTimes 1) failed twice, so it went
    to %RETRY% then %DLQ%; on DashMarkup a body of HTML and a binary one; and the dashboard over it."""
    store = tmp_path_factory.mktemp("dashboard") / "broker-store"
    store.mkdir()
    cluster = Cluster(module_processes.spawn, store).start()
    clients: list[PushConsumer | PullConsumer | Producer] = []
    try:
        cluster.create_topic(LAG_TOPIC, queues=1)
        cluster.create_topic(TRACE_TOPIC, queues=1)
        cluster.create_topic(MARKUP_TOPIC, queues=1)
        with AdminClient(cluster.namesrv_addr) as admin:
            admin.update_subscription_group({"groupName": DLQ_GROUP, "retryMaxTimes": 1})

        def failing(msgs):
            return ConsumeConcurrentlyStatus.RECONSUME_LATER

        failer = PushConsumer(
            DLQ_GROUP,
            cluster.namesrv_addr,
            instance_name="failing",
            max_reconsume_times=1,
            consume_from_where="FIRST_OFFSET",
            **FAST,
        )
        failer.subscribe(TRACE_TOPIC)
        failer.register_listener(failing)
        clients.append(failer.start())
        producer = Producer(PRODUCER_GROUP, cluster.namesrv_addr, instance_name="shop").start()
        clients.append(producer)
        for i in range(5):
            producer.send(Message(LAG_TOPIC, f"order {i}".encode(), tags="created", keys=f"order-{i}"))
        doomed = producer.send(Message(TRACE_TOPIC, b'{"payment": 42}', tags="card", keys="payment-42"))
        producer.send(Message(MARKUP_TOPIC, MARKUP.encode(), keys="markup", properties={"note": MARKUP}))
        producer.send(Message(MARKUP_TOPIC, bytes(range(256)), keys="binary"))
        producer.instance.send_heartbeat_to_all()  # now that it knows the broker, not in 30 s
        # a consumer that handled 2 of the 5 orders and stays online
        billing = PullConsumer(
            LAG_GROUP,
            cluster.namesrv_addr,
            instance_name="billing",
            consume_from_where="FIRST_OFFSET",
            auto_commit=False,
            max_poll_records=2,
        )
        billing.subscribe(LAG_TOPIC)
        clients.append(billing.start())
        assert [m.body for m in billing.poll(30)] == [b"order 0", b"order 1"]
        billing.commit()
        commit = offset_request(RequestCode.UPDATE_CONSUMER_OFFSET, LAG_TOPIC, 0, RESET_GROUP, commitOffset=5)
        assert cluster.call(commit).code == ResponseCode.SUCCESS
        wait_until(
            lambda: sum(cluster.max_offsets(dlq_topic(DLQ_GROUP)).values()) == 1, 30, "the payment dead-lettered"
        )
        _, url = start_dashboard(module_processes.spawn, cluster.namesrv_addr)
        yield Site(url, cluster, billing.instance.client_id, producer.instance.client_id, doomed.msg_id)
    finally:
        for client in clients:
            client.shutdown()
        cluster.close()


def test_the_cluster_page_lists_the_broker_with_its_role(page: Page, site: Site):
    page.goto("/")
    row = page.locator("#brokers tbody tr", has_text=site.cluster.broker_addr)
    expect(row).to_contain_text("broker-a")
    expect(row).to_contain_text("ASYNC_MASTER")
    expect(page.locator("#namesrvs")).to_contain_text(site.cluster.namesrv_addr)


def test_the_topic_page_shows_the_topic_and_its_messages(page: Page):
    page.goto("/topics")
    expect(page.locator("#topics")).not_to_contain_text("%RETRY%")  # system topics hidden by default
    page.get_by_role("link", name=LAG_TOPIC, exact=True).click()
    expect(page.locator("#topic-name")).to_have_text(LAG_TOPIC)
    expect(page.locator("#message-count")).to_have_text("5")
    expect(page.locator("#groups tbody tr", has_text=LAG_GROUP)).to_contain_text("3")
    page.goto("/topics")
    page.get_by_label("system topics").check()  # submits the filter
    expect(page.locator("#topics")).to_contain_text(f"%RETRY%{LAG_GROUP}")


def test_the_consumer_page_shows_the_groups_lag_and_connection(page: Page, site: Site):
    page.goto("/consumers")
    row = page.locator("#consumers tbody tr", has_text=LAG_GROUP)
    expect(row.locator("td").nth(1)).to_have_text("3")
    row.get_by_role("link", name=LAG_GROUP).click()
    expect(page.locator("#total-lag")).to_have_text("3")
    cells = page.locator(f'table.progress[data-topic="{LAG_TOPIC}"] tbody tr').first.locator("td")
    # broker, queue, broker offset, consumer offset, lag
    for i, shown in enumerate(["broker-a", "0", "5", "2", "3"]):
        expect(cells.nth(i)).to_have_text(shown)
    expect(page.locator("#connections")).to_contain_text(site.consumer_client_id)


def test_a_message_found_by_key_shows_its_body_and_properties(page: Page):
    page.goto("/messages")
    page.get_by_label("Topic").fill(LAG_TOPIC)
    page.get_by_label("Key").fill("order-3")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#results tbody tr")).to_have_count(1)
    page.locator("#results tbody a").click()
    expect(page.locator("#body")).to_have_text("order 3")
    properties = page.locator("#properties")
    expect(properties.locator("tr", has_text="KEYS")).to_contain_text("order-3")
    expect(properties.locator("tr", has_text="TAGS")).to_contain_text("created")
    # not consumed yet: DashBilling's offset is 2
    expect(page.locator("#trace")).to_contain_text(f"{LAG_GROUP}: not consumed yet")


def test_a_dead_lettered_message_shows_its_retry_and_dlq_in_its_trace(page: Page, site: Site):
    page.goto(f"/messages?mode=id&id={site.doomed_id}&topic={TRACE_TOPIC}")
    page.locator("#results tbody a").click()
    trace = page.locator("#trace")
    expect(trace.locator("li.retry")).to_contain_text(f"Retry 1 in %RETRY%{DLQ_GROUP}")
    expect(trace.locator("li.dlq")).to_contain_text(f"Dead letter in %DLQ%{DLQ_GROUP}")
    trace.locator("li.dlq a").click()
    expect(page.locator("#origin")).to_contain_text(f"topic {TRACE_TOPIC}")
    expect(page.locator("#body")).to_have_text('{"payment": 42}')


def test_resetting_an_offset_from_the_form_changes_the_lag(page: Page):
    page.goto(f"/consumers/{RESET_GROUP}")
    expect(page.locator("#total-lag")).to_have_text("0")
    an_hour_ago = datetime.datetime.now() - datetime.timedelta(hours=1)
    page.get_by_label("Consume again from").fill(an_hour_ago.strftime("%Y-%m-%dT%H:%M:%S"))
    page.get_by_role("button", name="Reset").click()
    expect(page.locator(".flash")).to_contain_text(f"{RESET_GROUP} on {LAG_TOPIC} reset: broker-a/0 to 0")
    expect(page.locator("#total-lag")).to_have_text("5")


def test_a_topic_made_from_the_form_is_routed_and_a_missing_one_is_a_404(page: Page):
    page.goto("/topics")
    form = page.locator("#create-topic")
    form.get_by_label("Topic").fill("DashMade")
    form.get_by_label("Queues").fill("2")
    form.get_by_role("button").click()
    expect(page.locator("#topic-name")).to_have_text("DashMade")
    expect(page.locator("#route tbody tr")).to_contain_text("2")
    response = page.goto("/topics/NoSuchTopic")
    assert response is not None and response.status == 404
    expect(page.locator("#error")).to_contain_text("TOPIC_NOT_EXIST")


def test_a_form_posted_without_the_sessions_csrf_token_is_refused(site: Site):
    request = urllib.request.Request(f"{site.url}/topics", data=b"topic=Forged&queues=1", method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 403 and b"CSRF" in refused.value.read()
    assert not site.cluster.max_offsets("Forged")


def test_the_producer_page_shows_a_groups_connections(page: Page, site: Site):
    page.goto("/producers")
    page.get_by_label("Producer group").fill(PRODUCER_GROUP)
    page.get_by_role("button", name="Show connections").click()
    expect(page.locator("#producers tbody tr")).to_contain_text(site.producer_client_id)
    page.get_by_label("Producer group").fill("NobodysGroup")
    page.get_by_role("button", name="Show connections").click()
    expect(page.locator("#missing")).to_contain_text("has no producer online")


def test_the_capacity_page_without_a_report_says_how_to_make_one(page: Page):
    page.goto("/capacity")
    expect(page.locator("#no-report")).to_contain_text("No capacity report directory is configured")
    expect(page.locator("main")).to_contain_text("rmq-capacity perf-logs --out plan")


def test_a_body_and_properties_of_markup_are_shown_as_text_and_binary_as_hex(page: Page):
    page.goto(f"/messages?mode=key&topic={MARKUP_TOPIC}&key=markup")
    page.locator("#results tbody a").click()
    expect(page.locator("#body")).to_have_text(MARKUP)
    expect(page.locator("#properties tr", has_text="note")).to_contain_text(MARKUP)
    assert page.locator("#injected").count() == 0 and page.title() != "owned"
    page.goto(f"/messages?mode=key&topic={MARKUP_TOPIC}&key=binary")
    page.locator("#results tbody a").click()
    expect(page.locator("h2", has_text="Body")).to_contain_text("256 bytes, shown as hex (not UTF-8)")
    expect(page.locator("#body")).to_contain_text("00 01 02 03")


def test_a_resent_message_is_stored_again_in_its_topic(page: Page, site: Site):
    page.goto(f"/messages?mode=key&topic={MARKUP_TOPIC}&key=markup")
    page.locator("#results tbody a").click()
    page.get_by_role("button", name=f"Resend to {MARKUP_TOPIC}").click()
    expect(page.locator(".flash")).to_contain_text(f"resent to {MARKUP_TOPIC}: new message")
    assert site.cluster.max_offsets(MARKUP_TOPIC) == {0: 3}


def test_a_time_range_search_lists_the_topics_messages_and_a_reversed_range_is_a_400(page: Page):
    page.goto(f"/messages?mode=time&topic={LAG_TOPIC}")
    an_hour_ago = datetime.datetime.now() - datetime.timedelta(hours=1)
    page.get_by_label("From").fill(an_hour_ago.strftime("%Y-%m-%dT%H:%M:%S"))
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#results tbody tr")).to_have_count(5)
    expect(page.locator("#results tbody tr").first).to_contain_text("order-0")
    response = page.goto(f"/messages?mode=time&topic={LAG_TOPIC}&begin=2024-05-02T00:00:00&end=2024-05-01T00:00:00")
    assert response is not None and response.status == 400
    expect(page.locator("#error")).to_have_text("end must be after begin")


def test_a_topic_deleted_from_its_page_after_typing_its_name_is_gone(page: Page, site: Site):
    site.cluster.create_topic("DashDoomed", queues=1)
    page.goto("/topics/DashDoomed")
    form = page.locator("#delete-topic")
    form.get_by_role("button").click()  # not confirmed: the browser asks for the name first
    expect(page.locator("#topic-name")).to_have_text("DashDoomed")
    form.get_by_label("Type the topic's name").fill("DashDoomed")
    form.get_by_role("button").click()
    expect(page.locator(".flash")).to_contain_text("topic DashDoomed deleted")
    expect(page.locator("#topics")).not_to_contain_text("DashDoomed")
    assert not site.cluster.max_offsets("DashDoomed")
