"""Real RocketMQ clients with credentials against a broker with aclEnable: npm ali-ons@3.12.0 (its
Channel.beforeRequest signs) and PyPI rocketmq==0.4.4 (the C++ client's set_session_credentials)
sign the way rmq checks, so their sends, pulls, heartbeats and offset commits pass; a wrong secret
is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.acl import start_acl_cluster
from tests.helpers.compat import bodies

pytestmark = [pytest.mark.compat, pytest.mark.slow]

COUNT = 50
RULES = """\
accounts:
  - accessKey: admin-key
    secretKey: admin-secret
    admin: true
  - accessKey: app-key-1
    secretKey: app-secret-1
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [AclTopic=PUB|SUB]
    groupPerms: [acl-consumers=SUB, acl-producers=PUB]
"""


@pytest.fixture
def acl_cluster(spawn, tmp_path: Path):
    cluster = start_acl_cluster(spawn, tmp_path, RULES, ("admin-key", "admin-secret"))
    try:
        yield cluster
    finally:
        cluster.close()


def test_a_real_client_with_credentials_produces_and_consumes(family_clients, acl_cluster):
    clients, family = family_clients, family_clients.family
    topic = acl_cluster.create_topic("AclTopic")
    clients.runner.env.update(ACL_ACCESS_KEY="app-key-1", ACL_SECRET_KEY="app-secret-1")
    sent = clients.produce(acl_cluster.namesrv_addr, topic, "acl-producers", COUNT, "TagA", "acl")
    assert len(sent) == COUNT and {s["status"] for s in sent} == {family.send_ok}

    got = clients.consume(acl_cluster.namesrv_addr, topic, "acl-consumers", "*", COUNT, idle_seconds=15)
    assert set(bodies(got)) == {f"acl-body-{i}" for i in range(COUNT)}
    acl_cluster.wait_caught_up("acl-consumers", topic)  # its offset commits were let through too


def test_a_real_client_with_a_wrong_secret_is_refused(family_clients, acl_cluster):
    topic = acl_cluster.create_topic("AclTopic")
    family_clients.runner.env.update(ACL_ACCESS_KEY="app-key-1", ACL_SECRET_KEY="not-the-secret")
    # ali-ons gives up with "Send [4] times, still failed"; the C++ client, refused the same way
    # (the broker logs "Check signature failed for accessKey=app-key-1"), says "No route info".
    with pytest.raises(AssertionError, match="exited"):
        family_clients.produce(acl_cluster.namesrv_addr, topic, "acl-producers", 1, "TagA", "acl")
    offsets = acl_cluster.max_offsets(topic)
    assert offsets and sum(offsets.values()) == 0, "nothing was stored"
