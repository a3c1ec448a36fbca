"""QUERY_MESSAGE (by key) and VIEW_MESSAGE_BY_ID over the wire: whole records back to back."""

from __future__ import annotations

from rmq.net.codec import RemotingCommand
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.record import decode_msg_id, decode_records
from tests.helpers import wait_until
from tests.helpers.broker import put


def query(client, broker, topic: str, key: str, **ext) -> RemotingCommand:
    fields = {"topic": topic, "key": key, "maxNum": 32, "beginTimestamp": 0, "endTimestamp": 2**63 - 1}
    fields.update(ext)
    return client.invoke_sync(broker.broker_addr, RemotingCommand.request(RequestCode.QUERY_MESSAGE, fields), 3.0)


def test_query_by_key_returns_every_match_of_the_topic_only(broker, client):
    for i in range(5):
        put(broker, "TopicQ", f"m{i}".encode(), i % 2, KEYS="order-1 shared" if i < 3 else "order-2")
    put(broker, "OtherTopic", b"other", KEYS="order-1")
    answer = query(client, broker, "TopicQ", "order-1")
    assert answer.code == ResponseCode.SUCCESS
    assert sorted(m.body for m in decode_records(bytes(answer.body))) == [b"m0", b"m1", b"m2"]
    assert int(answer.ext_fields["indexLastUpdatePhyoffset"]) >= 0
    limited = query(client, broker, "TopicQ", "order-1", maxNum=2)
    assert len(decode_records(bytes(limited.body))) == 2


def test_query_without_match_is_query_not_found(broker, client):
    put(broker, "TopicQ", b"m", KEYS="k")
    for topic, key, ext in (("TopicQ", "nope", {}), ("Nope", "k", {}), ("TopicQ", "k", {"endTimestamp": 1})):
        answer = query(client, broker, topic, key, **ext)
        assert answer.code == ResponseCode.QUERY_NOT_FOUND and "can not find message" in answer.remark


def test_view_by_id_returns_the_record_a_msg_id_points_at(broker, client):
    put(broker, "TopicQ", b"first")
    second = put(broker, "TopicQ", b"second", TAGS="t")
    ip, port, offset = decode_msg_id(second.msg_id)
    assert f"{ip}:{port}" == broker.broker_addr
    request = RemotingCommand.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": offset})
    answer = client.invoke_sync(broker.broker_addr, request, 3.0)
    assert answer.code == ResponseCode.SUCCESS
    (message,) = decode_records(bytes(answer.body))
    assert message.body == b"second" and message.msg_id == second.msg_id and message.tags == "t"

    for bad in (offset + 3, 10**9, -1):
        request = RemotingCommand.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": bad})
        answer = client.invoke_sync(broker.broker_addr, request, 3.0)
        assert answer.code == ResponseCode.SYSTEM_ERROR and str(bad) in answer.remark


def test_a_slave_answers_queries_on_what_it_copied(start_broker, client, tmp_path):
    master = start_broker(storePathRootDir=str(tmp_path / "master"))
    slave = start_broker(
        storePathRootDir=str(tmp_path / "slave"),
        brokerRole="SLAVE",
        brokerId="1",
        namesrvAddr=master.config.namesrv_addr,
    )
    sent = put(master, "TopicQ", b"copied", KEYS="order-9")
    wait_until(lambda: slave.store.get_max_offset_in_queue("TopicQ", 0) == 1, 10, "the message replicated")
    found = query(client, slave, "TopicQ", "order-9")
    assert [m.body for m in decode_records(bytes(found.body))] == [b"copied"]
    _, _, offset = decode_msg_id(sent.msg_id)  # a slave's records are the master's, at the same offsets
    request = RemotingCommand.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": offset})
    (message,) = decode_records(bytes(client.invoke_sync(slave.broker_addr, request, 3.0).body))
    assert message.msg_id == sent.msg_id
