"""The fastjson quirks Java brokers and clients write: unquoted integer keys, objects as map keys."""

from __future__ import annotations

from rmq.protocol.java_json import loads_java_json, loads_mq_tables
from rmq.protocol.message_queue import MessageQueue


def test_java_unquoted_integer_keys_are_read():
    assert loads_java_json('{"offsetTable":{"T@g":{0:12,1 : 3}}}') == {"offsetTable": {"T@g": {"0": 12, "1": 3}}}


def test_mq_tables_read_fastjson_bodies():
    body = (
        '{"consumeTps":1.5,"offsetTable":{{"brokerName":"b","queueId":3,"topic":"T"}:'
        '{"brokerOffset":9,"consumerOffset":4,"lastTimestamp":0}, {"brokerName":"b","queueId":0,"topic":"T"}:'
        '{"brokerOffset":1,"consumerOffset":1,"lastTimestamp":5}}}'
    )
    parsed = loads_mq_tables(body)
    assert parsed["consumeTps"] == 1.5
    assert parsed["offsetTable"][MessageQueue("T", "b", 3)]["consumerOffset"] == 4
    assert loads_mq_tables('{"offsetTable":[{"brokerName":"b","queueId":0,"topic":"T","offset":2}]}') == {
        "offsetTable": [{"brokerName": "b", "queueId": 0, "topic": "T", "offset": 2}]
    }
