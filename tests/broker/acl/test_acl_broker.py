"""A broker process with aclEnable: what our SDK and hand-built requests get through it, how it
answers the others, and plain_acl.yml edited under it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from rmq.client import Message, Producer, PushConsumer
from rmq.client.admin_client import AdminClient
from rmq.errors import ResponseError
from rmq.net import RemotingClient, RemotingCommand
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.record import decode_msg_id
from tests.helpers import wait_until
from tests.helpers.acl import start_acl_cluster, write_acl_rules
from tests.helpers.broker import broker_settings
from tests.helpers.processes import Cluster
from tests.helpers.requests import (
    batch_body,
    call,
    offset_request,
    records,
    send_request,
    update_topic_request,
)

ADMIN = ("admin-key", "admin-secret")
PRODUCER = ("producer-key", "producer-secret")
CONSUMER = ("consumer-key", "consumer-secret")
RULES = """\
accounts:
  - accessKey: admin-key
    secretKey: admin-secret
    admin: true
  - accessKey: producer-key
    secretKey: producer-secret
    defaultTopicPerm: DENY
    topicPerms: [Orders=PUB]
  - accessKey: consumer-key
    secretKey: consumer-secret
    defaultTopicPerm: SUB
    defaultGroupPerm: DENY
    groupPerms: [billing=SUB]
  - accessKey: auditor-key
    secretKey: auditor-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [Payments=SUB]
    groupPerms: [billing=SUB]
"""
AUDITOR = ("auditor-key", "auditor-secret")
# How soon an edit of plain_acl.yml must be in force.
RELOAD_WITHIN = 2.0
# An account an edit adds so that its reload shows: the edit is in force once this key signs in.
RELOAD_PROBE = ("reload-probe-key", "reload-probe-secret")
PROBE_ACCOUNT = f"""\
  - accessKey: {RELOAD_PROBE[0]}
    secretKey: {RELOAD_PROBE[1]}
    defaultTopicPerm: PUB
"""


@pytest.fixture
def acl_cluster(spawn, tmp_path: Path):
    """A name server and a broker with aclEnable and RULES; ``client`` signs as the admin."""
    cluster = start_acl_cluster(spawn, tmp_path, RULES, ADMIN)
    try:
        yield cluster
    finally:
        cluster.close()


def answer(cluster: Cluster, request: RemotingCommand, credentials=None) -> RemotingCommand:
    """``request`` sent by a client of its own, signed with ``credentials`` (None: unsigned)."""
    with RemotingClient(credentials=credentials) as client:
        return call(client, cluster.broker_addr, request)


def refused(cluster: Cluster, request: RemotingCommand, credentials=None) -> str:
    response = answer(cluster, request, credentials)
    assert response.code == ResponseCode.NO_PERMISSION, (response.code, response.remark)
    return response.remark


def test_signed_sdk_clients_send_consume_and_commit_offsets(acl_cluster):
    topic = acl_cluster.create_topic("Orders", queues=2)
    with Producer("orders-producer", acl_cluster.namesrv_addr, credentials=PRODUCER) as producer:
        sent = [producer.send(Message(topic, f"order-{i}".encode())) for i in range(20)]
    assert all(r.status.name == "SEND_OK" for r in sent)

    got: list[bytes] = []
    consumer = PushConsumer(
        "billing",
        acl_cluster.namesrv_addr,
        credentials=CONSUMER,
        consume_from_where="FIRST_OFFSET",
        persist_consumer_offset_interval=0.3,
    )
    consumer.subscribe(topic, "*")
    consumer.register_listener(lambda msgs: got.extend(m.body for m in msgs))
    with consumer.start():
        wait_until(lambda: len(got) >= 20, 20, "the consumer got every order")
        acl_cluster.wait_caught_up("billing", topic)  # offsets committed through the ACL
    assert sorted(got) == sorted(f"order-{i}".encode() for i in range(20))


def test_unsigned_wrongly_signed_and_unknown_keys_are_refused(acl_cluster):
    topic = acl_cluster.create_topic("Orders", queues=1)
    send = send_request(topic, b"x")
    assert "No accessKey is configured" in refused(acl_cluster, send)
    assert "Check signature failed for accessKey=producer-key" in refused(
        acl_cluster, send_request(topic, b"x"), ("producer-key", "not-the-secret")
    )
    assert refused(acl_cluster, send_request(topic, b"x"), ("nobody-key", "producer-secret")) == (
        "No acl config for accessKey=nobody-key"
    )
    assert answer(acl_cluster, send_request(topic, b"x"), PRODUCER).code == ResponseCode.SUCCESS
    assert acl_cluster.max_offsets(topic) == {0: 1}  # only the signed send was stored


def test_out_of_permission_requests_are_refused_saying_key_resource_and_permission(acl_cluster):
    acl_cluster.create_topic("Orders", queues=1)
    acl_cluster.create_topic("Payments", queues=1)
    assert refused(acl_cluster, send_request("Payments", b"x"), PRODUCER) == (
        "No permission for topic:Payments: accessKey=producer-key needs PUB, has DENY"
    )
    commit = offset_request(RequestCode.UPDATE_CONSUMER_OFFSET, "Orders", 0, "analytics", commitOffset=0)
    assert refused(acl_cluster, commit, CONSUMER) == (
        "No permission for group:analytics: accessKey=consumer-key needs SUB, has DENY"
    )
    commit = offset_request(RequestCode.UPDATE_CONSUMER_OFFSET, "Orders", 0, "billing", commitOffset=0)
    assert answer(acl_cluster, commit, CONSUMER).code == ResponseCode.SUCCESS


def test_admin_requests_need_an_admin_account(acl_cluster):
    assert refused(acl_cluster, update_topic_request("Created"), PRODUCER).startswith(
        f"Need admin permission for request code={int(RequestCode.UPDATE_AND_CREATE_TOPIC)}"
    )
    with AdminClient(acl_cluster.namesrv_addr, credentials=PRODUCER) as admin:
        with pytest.raises(ResponseError) as error:
            admin.update_topic("Created")
        assert error.value.code == ResponseCode.NO_PERMISSION
    with AdminClient(acl_cluster.namesrv_addr, credentials=ADMIN) as admin:
        admin.update_topic("Created")
        assert admin.topic_exists("Created")


def test_commit_log_digests_need_an_admin_account(acl_cluster):
    """GET_COMMIT_LOG_DIGESTS (ha-verify) hashes for a while: an admin request, not any signed client's."""
    ext = {"startOffset": 0, "endOffset": 0, "rangeSize": 1024}
    digests = RemotingCommand.request(RequestCode.GET_COMMIT_LOG_DIGESTS, ext)
    assert "No accessKey is configured" in refused(acl_cluster, digests)
    assert refused(acl_cluster, digests, PRODUCER).startswith(
        f"Need admin permission for request code={int(RequestCode.GET_COMMIT_LOG_DIGESTS)}"
    )
    assert answer(acl_cluster, digests, ADMIN).code == ResponseCode.SUCCESS


def test_a_wrong_secret_is_a_prompt_clear_error_for_a_producer(acl_cluster):
    topic = acl_cluster.create_topic("Orders", queues=1)
    with Producer("orders-producer", acl_cluster.namesrv_addr, credentials=("producer-key", "guessed")) as producer:
        with pytest.raises(ResponseError) as error:  # the broker's answer, not a timeout
            producer.send(Message(topic, b"x"))
    assert error.value.code == ResponseCode.NO_PERMISSION
    assert "Check signature failed for accessKey=producer-key" in str(error.value)


def test_edits_take_effect_within_two_seconds_and_a_broken_file_keeps_the_last_rules(acl_cluster):
    topic = acl_cluster.create_topic("Payments", queues=1)
    assert answer(acl_cluster, send_request(topic, b"x"), PRODUCER).code == ResponseCode.NO_PERMISSION

    write_acl_rules(
        acl_cluster.store, RULES.replace("topicPerms: [Orders=PUB]", "topicPerms: [Orders=PUB, Payments=PUB]")
    )
    wait_until(
        lambda: answer(acl_cluster, send_request(topic, b"x"), PRODUCER).code == ResponseCode.SUCCESS,
        RELOAD_WITHIN,
        "the producer may send to Payments after the edit",
    )

    write_acl_rules(acl_cluster.store, RULES + "    topicPerms: [Payments=SUBB\n")
    log = acl_cluster.store / "logs" / "broker.log"
    wait_until(
        lambda: "cannot be used, keeping the rules loaded before" in log.read_text(),
        RELOAD_WITHIN + 1,
        "the broker logs why it keeps its rules",
    )
    assert "plain_acl.yml, line" in log.read_text()
    assert answer(acl_cluster, send_request(topic, b"x"), PRODUCER).code == ResponseCode.SUCCESS
    assert "producer-secret" not in log.read_text()

    write_acl_rules(acl_cluster.store, RULES)
    wait_until(
        lambda: answer(acl_cluster, send_request(topic, b"x"), PRODUCER).code == ResponseCode.NO_PERMISSION,
        RELOAD_WITHIN,
        "Payments closed again once the file is fixed",
    )


def test_white_addresses_let_unsigned_requests_through_from_loopback_only_when_listed(acl_cluster):
    topic = acl_cluster.create_topic("Orders", queues=1)
    write_acl_rules(acl_cluster.store, "globalWhiteRemoteAddresses: [10.10.103.*]\n" + RULES + PROBE_ACCOUNT)
    wait_until(
        lambda: answer(acl_cluster, send_request(topic, b"x"), RELOAD_PROBE).code == ResponseCode.SUCCESS,
        RELOAD_WITHIN,
        "the edit in force (its new account signs in)",
    )
    # refused before the edit too: only with the edit in force does this say 127.0.0.1 is not listed
    assert "No accessKey is configured" in refused(acl_cluster, send_request(topic, b"x"))

    write_acl_rules(acl_cluster.store, "globalWhiteRemoteAddresses: [127.0.0.*]\n" + RULES)
    wait_until(
        lambda: answer(acl_cluster, send_request(topic, b"x")).code == ResponseCode.SUCCESS,
        RELOAD_WITHIN,
        "unsigned requests from a globally white address pass",
    )

    # an account's white address: its key without a signature
    write_acl_rules(
        acl_cluster.store, RULES.replace("    admin: true\n", "    admin: true\n    whiteRemoteAddress: 127.0.0.1\n")
    )
    keyed = send_request(topic, b"x")
    keyed.ext_fields["AccessKey"] = "admin-key"
    wait_until(
        lambda: answer(acl_cluster, send_request(topic, b"x")).code == ResponseCode.NO_PERMISSION,
        RELOAD_WITHIN,
        "the global white list is gone",
    )
    assert answer(acl_cluster, keyed).code == ResponseCode.SUCCESS


def test_a_broker_does_not_start_on_a_file_it_cannot_use(spawn, tmp_path: Path):
    store = tmp_path / "store"
    store.mkdir()
    write_acl_rules(store, RULES.replace("defaultTopicPerm: SUB", "defaultTopicPerm: READ"))
    settings = broker_settings(store, aclEnable="true")
    argv = ["-m", "rmq.cli.broker", *(a for k, v in settings.items() for a in ("--set", f"{k}={v}"))]
    proc = spawn(*argv, stderr=subprocess.PIPE, text=True)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode != 0
    assert "plain_acl.yml, line 11: accounts[2] (consumer-key).defaultTopicPerm is 'READ'" in err


def long_named(code: int, topic: str, body: bytes) -> RemotingCommand:
    """A send of ``code`` whose header spells every field out (``topic``, not V2's ``b``), as some
    clients send V2 codes."""
    request = send_request(topic, body, code=RequestCode.SEND_MESSAGE)
    request.code = code
    return request


@pytest.mark.parametrize("code", [RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE])
def test_a_v2_send_naming_a_denied_topic_only_in_its_long_name_is_refused(acl_cluster, code):
    # issue 22, defect 2: the check read the topic from `b` only, the send processor from `topic` too
    acl_cluster.create_topic("Orders", queues=1)
    acl_cluster.create_topic("Payments", queues=1)
    body = batch_body([(b"m1", {}), (b"m2", {})]) if code == RequestCode.SEND_BATCH_MESSAGE else b"x"
    assert refused(acl_cluster, long_named(code, "Payments", body), PRODUCER) == (
        "No permission for topic:Payments: accessKey=producer-key needs PUB, has DENY"
    )
    assert answer(acl_cluster, long_named(code, "Orders", body), PRODUCER).code == ResponseCode.SUCCESS
    assert acl_cluster.max_offsets("Payments") == {0: 0}
    assert acl_cluster.max_offsets("Orders")[0] >= 1


def stored_offset(cluster: Cluster, topic: str, body: bytes, **kwargs) -> int:
    """Send ``body`` to ``topic`` as the admin; the CommitLog offset it was stored at."""
    response = cluster.call(send_request(topic, body, **kwargs))
    assert response.code == ResponseCode.SUCCESS, response.remark
    return decode_msg_id(response.ext_fields["msgId"])[2]


def test_viewing_a_message_by_id_needs_sub_on_its_topic(acl_cluster):
    acl_cluster.create_topic("Orders", queues=1)
    offset = stored_offset(acl_cluster, "Orders", b"secret order")
    view = RemotingCommand.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(offset)})
    response = answer(acl_cluster, view, PRODUCER)  # PUB only: it may send there, not read
    assert response.code == ResponseCode.NO_PERMISSION
    assert response.remark == "No permission for topic:Orders: accessKey=producer-key needs SUB, has PUB"
    assert b"secret order" not in bytes(response.body or b"")
    view = RemotingCommand.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(offset)})
    response = answer(acl_cluster, view, CONSUMER)
    assert response.code == ResponseCode.SUCCESS
    assert [m.body for m in records(response.body)] == [b"secret order"]


def test_querying_messages_by_key_needs_sub_on_the_topic_and_answers_only_its_messages(acl_cluster):
    acl_cluster.create_topic("Orders", queues=1)
    acl_cluster.create_topic("Payments", queues=1)
    stored_offset(acl_cluster, "Orders", b"order", keys="K-42")
    stored_offset(acl_cluster, "Payments", b"payment", keys="K-42")

    def query(topic: str) -> RemotingCommand:
        fields = {"topic": topic, "key": "K-42", "maxNum": "32", "beginTimestamp": "0", "endTimestamp": str(2**62)}
        return RemotingCommand.request(RequestCode.QUERY_MESSAGE, fields)

    assert refused(acl_cluster, query("Orders"), AUDITOR) == (
        "No permission for topic:Orders: accessKey=auditor-key needs SUB, has DENY"
    )
    found = wait_until(
        lambda: (r := answer(acl_cluster, query("Payments"), AUDITOR)).code == ResponseCode.SUCCESS and r,
        5,
        "the index answers the key",
    )
    assert [(m.topic, m.body) for m in records(found.body)] == [("Payments", b"payment")]


def test_a_send_back_needs_sub_on_the_group_and_on_the_original_topic(acl_cluster):
    acl_cluster.create_topic("Orders", queues=1)
    acl_cluster.create_topic("Payments", queues=1)
    order = stored_offset(acl_cluster, "Orders", b"order")
    payment = stored_offset(acl_cluster, "Payments", b"payment")

    def send_back(offset: int, group: str = "billing") -> RemotingCommand:
        # delayLevel -1: straight to the group's dead letter topic, where it can be counted
        fields = {"group": group, "offset": str(offset), "delayLevel": "-1", "originMsgId": "x"}
        return RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, fields)

    assert refused(acl_cluster, send_back(order), AUDITOR) == (
        "No permission for topic:Orders: accessKey=auditor-key needs SUB, has DENY"
    )
    assert refused(acl_cluster, send_back(payment, "analytics"), AUDITOR) == (
        "No permission for group:analytics: accessKey=auditor-key needs SUB, has DENY"
    )
    assert answer(acl_cluster, send_back(payment), AUDITOR).code == ResponseCode.SUCCESS
    assert [m.body for m in acl_cluster.messages("%DLQ%billing")] == [b"payment"]


def test_resetting_a_groups_offsets_needs_that_groups_permission(acl_cluster):
    acl_cluster.create_topic("Orders", queues=1)
    for _ in range(3):
        stored_offset(acl_cluster, "Orders", b"order")
    for group in ("billing", "analytics"):
        commit = offset_request(RequestCode.UPDATE_CONSUMER_OFFSET, "Orders", 0, group, commitOffset=1)
        assert acl_cluster.call(commit).code == ResponseCode.SUCCESS

    def reset(group: str) -> RemotingCommand:  # to the end, as `rmq-admin consumer reset-offset` sends it
        fields = {"topic": "Orders", "group": group, "timestamp": "-1", "isForce": "true"}
        return RemotingCommand.request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, fields)

    def committed(group: str) -> str:
        query = offset_request(RequestCode.QUERY_CONSUMER_OFFSET, "Orders", 0, group)
        return acl_cluster.call(query).ext_fields["offset"]

    assert refused(acl_cluster, reset("analytics"), CONSUMER) == (
        "No permission for group:analytics: accessKey=consumer-key needs SUB, has DENY"
    )
    assert committed("analytics") == "1"
    assert answer(acl_cluster, reset("billing"), CONSUMER).code == ResponseCode.SUCCESS
    assert committed("billing") == "3"
    assert acl_cluster.call(reset("analytics")).code == ResponseCode.SUCCESS  # the admin may
    assert committed("analytics") == "3"
