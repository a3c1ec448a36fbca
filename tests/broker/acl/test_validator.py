"""Which requests the plain ACL lets through (PlainAccessValidator.validate), request by request."""

from __future__ import annotations

import json

import pytest

from rmq.broker.acl.config import parse_plain_acl
from rmq.broker.acl.validator import PlainAccessValidator, needed_resources
from rmq.errors import RequestRefused
from rmq.net import RemotingCommand
from rmq.net.codec_py import ext_fields_for_wire
from rmq.protocol.acl import SessionCredentials
from rmq.protocol.codes import RequestCode, ResponseCode
from tests.helpers.requests import heartbeat_request, offset_request, pull_request, send_request

RULES = """\
globalWhiteRemoteAddresses: [10.10.103.*]
accounts:
  - accessKey: producer-key
    secretKey: producer-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [Orders=PUB, Audit=PUB|SUB, Closed=DENY]
  - accessKey: consumer-key
    secretKey: consumer-secret
    whiteRemoteAddress: 192.168.7.*
    defaultTopicPerm: SUB
    defaultGroupPerm: DENY
    groupPerms: [billing=SUB]
  - accessKey: admin-key
    secretKey: admin-secret
    admin: true
"""
CLIENT = "10.0.0.5"
PRODUCER = SessionCredentials("producer-key", "producer-secret")
CONSUMER = SessionCredentials("consumer-key", "consumer-secret")
ADMIN = SessionCredentials("admin-key", "admin-secret")


@pytest.fixture
def validator() -> PlainAccessValidator:
    return PlainAccessValidator(parse_plain_acl(RULES))


def signed(request: RemotingCommand, credentials: SessionCredentials) -> RemotingCommand:
    request.ext_fields = ext_fields_for_wire(request.ext_fields)  # what the broker would receive
    credentials.sign(request.ext_fields, request.body)
    return request


def refusal(validator: PlainAccessValidator, request: RemotingCommand, host: str = CLIENT) -> str:
    with pytest.raises(RequestRefused) as refused:
        validator.validate(host, request)
    assert refused.value.code == ResponseCode.NO_PERMISSION
    return refused.value.remark


def test_a_signed_send_with_pub_on_its_topic_passes(validator):
    validator.validate(CLIENT, signed(send_request("Orders", b"x"), PRODUCER))


def test_unsigned_unknown_key_and_wrong_secret_are_refused_saying_which(validator):
    assert "No accessKey is configured" in refusal(validator, send_request("Orders", b"x"))
    stranger = SessionCredentials("stranger-key", "producer-secret")
    assert (
        refusal(validator, signed(send_request("Orders", b"x"), stranger)) == "No acl config for accessKey=stranger-key"
    )
    wrong = SessionCredentials("producer-key", "guessed-secret")
    assert "Check signature failed for accessKey=producer-key" in refusal(
        validator, signed(send_request("Orders", b"x"), wrong)
    )


def test_a_request_changed_after_signing_is_refused(validator):
    request = signed(send_request("Orders", b"x"), PRODUCER)
    request.body = b"y"
    assert "Check signature failed" in refusal(validator, request)
    request = signed(send_request("Orders", b"x"), PRODUCER)
    request.ext_fields["b"] = "Audit"  # the topic of SEND_MESSAGE_V2
    assert "Check signature failed" in refusal(validator, request)


def test_permissions_follow_the_topic_list_then_the_default(validator):
    assert refusal(validator, signed(send_request("Closed", b"x"), PRODUCER)) == (
        "No permission for topic:Closed: accessKey=producer-key needs PUB, has DENY"
    )
    assert "topic:Elsewhere: accessKey=producer-key needs PUB, has DENY" in refusal(
        validator, signed(send_request("Elsewhere", b"x"), PRODUCER)
    )
    # PUB alone does not allow reading the topic back
    pull = pull_request("Orders", 0, 0, group="billing")
    assert "topic:Orders: accessKey=producer-key needs SUB, has PUB" in refusal(validator, signed(pull, PRODUCER))


def test_a_pull_needs_sub_on_the_topic_and_on_the_group(validator):
    validator.validate(CLIENT, signed(pull_request("Orders", 0, 0, group="billing"), CONSUMER))
    other_group = signed(pull_request("Orders", 0, 0, group="analytics"), CONSUMER)
    assert "group:analytics: accessKey=consumer-key needs SUB, has DENY" in refusal(validator, other_group)


def test_offsets_and_heartbeats_need_sub_on_topic_and_group(validator):
    for code in (RequestCode.UPDATE_CONSUMER_OFFSET, RequestCode.QUERY_CONSUMER_OFFSET):
        validator.validate(CLIENT, signed(offset_request(code, "Orders", 0, "billing", commitOffset=3), CONSUMER))
        other_group = offset_request(code, "Orders", 0, "analytics", commitOffset=3)
        assert "group:analytics" in refusal(validator, signed(other_group, CONSUMER))
    validator.validate(CLIENT, signed(heartbeat_request("c1", "billing", "Orders"), CONSUMER))
    assert "group:analytics" in refusal(validator, signed(heartbeat_request("c1", "analytics", "Orders"), CONSUMER))
    assert "group:billing: accessKey=producer-key needs SUB" in refusal(
        validator, signed(heartbeat_request("c1", "billing", "Orders"), PRODUCER)
    )


def test_a_retry_topic_is_its_group(validator):
    assert needed_resources(pull_request("%RETRY%billing", 0, 0, group="billing")) == {"%RETRY%billing": 8}
    validator.validate(CLIENT, signed(pull_request("%RETRY%billing", 0, 0, group="billing"), CONSUMER))
    # a send back into a retry topic needs SUB on the group, not PUB on a topic
    validator.validate(CLIENT, signed(send_request("%RETRY%billing", b"x"), CONSUMER))
    assert "group:analytics" in refusal(validator, signed(send_request("%RETRY%analytics", b"x"), CONSUMER))


def test_admin_requests_need_an_admin_account(validator):
    create = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "New", "perm": "6"})
    assert refusal(validator, signed(create, PRODUCER)) == (
        f"Need admin permission for request code={int(RequestCode.UPDATE_AND_CREATE_TOPIC)}, "
        "but accessKey=producer-key is not"
    )
    validator.validate(CLIENT, signed(create, ADMIN))
    # an admin account without topic or group lists may do anything
    validator.validate(CLIENT, signed(pull_request("Anything", 0, 0, group="anyone"), ADMIN))


def test_requests_that_touch_no_resource_need_only_a_valid_signature(validator):
    validator.validate(
        CLIENT, signed(RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": "Closed"}), PRODUCER)
    )


def test_white_addresses_pass_without_a_signature(validator):
    unsigned = send_request("Closed", b"x")
    validator.validate("10.10.103.9", unsigned)  # the global white list needs no key at all
    assert "No accessKey" in refusal(validator, unsigned, host="192.168.7.1")
    # an account's white address: its key, no signature, no permission check (as 4.x)
    keyed = send_request("Closed", b"x")
    keyed.ext_fields = {**ext_fields_for_wire(keyed.ext_fields), "AccessKey": "consumer-key"}
    validator.validate("192.168.7.1", keyed)
    assert "Check signature failed" in refusal(validator, keyed, host="192.168.8.1")


def test_message_traces_may_always_be_written(validator):
    validator.validate(CLIENT, signed(send_request("RMQ_SYS_TRACE_TOPIC", b"x"), PRODUCER))


def test_a_malformed_heartbeat_is_refused_not_crashed_on(validator):
    request = RemotingCommand.request(RequestCode.HEART_BEAT, {}, json.dumps({"consumerDataSet": 1}).encode())
    with pytest.raises(RequestRefused):
        validator.validate(CLIENT, signed(request, CONSUMER))


def test_locking_queues_needs_sub_on_the_group(validator):
    def lock(group: str, *topics: str) -> RemotingCommand:
        mqs = [{"topic": t, "brokerName": "broker-a", "queueId": 0} for t in topics]
        body = json.dumps({"consumerGroup": group, "clientId": "c1", "mqSet": mqs}).encode()
        return RemotingCommand.request(RequestCode.LOCK_BATCH_MQ, {}, body)

    validator.validate(CLIENT, signed(lock("billing", "Orders", "%RETRY%billing"), CONSUMER))
    assert refusal(validator, signed(lock("analytics", "Orders"), CONSUMER)) == (
        "No permission for group:analytics: accessKey=consumer-key needs SUB, has DENY"
    )
    # PUB|SUB on the topic is not enough without the group
    assert refusal(validator, signed(lock("billing", "Audit"), PRODUCER)) == (
        "No permission for group:billing: accessKey=producer-key needs SUB, has DENY"
    )
