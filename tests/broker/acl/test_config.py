"""plain_acl.yml read into rules: RocketMQ's own example, and the files that cannot be used."""

from __future__ import annotations

import pytest

from rmq.broker.acl.config import DENY, PUB, SUB, AclConfigError, load_plain_acl, parse_plain_acl

# distribution/conf/plain_acl.yml of RocketMQ 4.9.4, as shipped
ROCKETMQ_EXAMPLE = """\
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*

accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      # the group should convert to retry topic
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB

  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    # if it is admin, it could access all resources
    admin: true
"""


def test_rocketmqs_example_file_reads_as_rocketmq_reads_it():
    rules = parse_plain_acl(ROCKETMQ_EXAMPLE)
    assert [p.pattern for p in rules.global_white_remote_addresses] == ["10.10.103.*", "192.168.0.*"]
    first, second = rules.accounts["RocketMQ"], rules.accounts["rocketmq2"]
    assert first.secret_key == "12345678"  # a YAML number, read as the text written
    assert not first.admin and first.default_topic_perm == DENY and first.default_group_perm == SUB
    assert first.resource_perms == {
        "topicA": DENY,
        "topicB": PUB | SUB,
        "topicC": SUB,
        "%RETRY%groupA": DENY,
        "%RETRY%groupB": PUB | SUB,
        "%RETRY%groupC": SUB,
    }
    assert not first.white_remote_address.match("192.168.1.5")
    assert second.admin and second.white_remote_address.match("192.168.1.5")
    # unset default permissions are DENY, as in 4.x
    assert second.default_topic_perm == DENY and second.default_group_perm == DENY


def test_an_empty_file_has_no_account_and_no_white_address():
    rules = parse_plain_acl("")
    assert rules.accounts == {} and rules.global_white_remote_addresses == []


@pytest.mark.parametrize(
    "text, line, says",
    [
        ("accounts:\n  - accessKey: abcdefg\n    secretKey: [oops\n", 4, "not valid YAML"),
        (
            "accounts:\n  - accessKey: abcdefgh\n    secretKey: 12345678\n    topicPerms:\n      - topicA=PUSH\n",
            5,
            "'topicA=PUSH': expected one of DENY, PUB, SUB",
        ),
        (
            "accounts:\n  - accessKey: abcdefgh\n    secretKey: 12345678\n    topicPerms:\n      - topicA\n",
            5,
            "is not 'name=PERM'",
        ),
        (
            "accounts:\n  - accessKey: abcdefgh\n    secretKey: 12345678\n    defaultTopicPerm: ALL\n",
            4,
            "defaultTopicPerm is 'ALL'",
        ),
        (
            "accounts:\n  - accessKey: abcdefgh\n    secretKey: 12345678\n    topicPerm:\n      - a=SUB\n",
            4,
            "unknown field 'topicPerm'",
        ),
        (
            "accounts:\n  - accessKey: abcdefgh\n    secretKey: 12345678\n    admin: maybe\n",
            4,
            "admin must be true or false",
        ),
        (
            "accounts:\n  - accessKey: abcdefgh\n    secretKey: 12345678\n    whiteRemoteAddress: 10.0.0.300\n",
            4,
            "whiteRemoteAddress",
        ),
        ("globalWhiteRemoteAddresses:\n  - 10.0.*\n", 2, "globalWhiteRemoteAddresses"),
        ("accounts:\n  - accessKey: abc\n    secretKey: 12345678\n", 2, "accessKey must be longer than 6"),
        ("accounts:\n  - secretKey: 12345678\n", 2, "has no accessKey"),
        (
            "accounts:\n  - {accessKey: abcdefgh, secretKey: 12345678}\n"
            "  - {accessKey: abcdefgh, secretKey: 87654321}\n",
            3,
            "accessKey 'abcdefgh' appears twice",
        ),
        ("acounts: []\n", 1, "unknown field 'acounts'"),
    ],
)
def test_a_file_that_cannot_be_used_is_refused_naming_its_line_and_field(text, line, says):
    with pytest.raises(AclConfigError) as refused:
        parse_plain_acl(text, "conf/plain_acl.yml")
    message = str(refused.value)
    assert message.startswith(f"conf/plain_acl.yml, line {line}: "), message
    assert says in message


def test_no_error_shows_a_secret_key():
    with pytest.raises(AclConfigError) as refused:
        parse_plain_acl("accounts:\n  - accessKey: abcdefgh\n    secretKey: short1\n")
    assert "short1" not in str(refused.value) and "secretKey must be longer than 6" in str(refused.value)


def test_a_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(AclConfigError, match="cannot read .*plain_acl.yml"):
        load_plain_acl(tmp_path / "conf" / "plain_acl.yml")
