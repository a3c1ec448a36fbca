"""A transactional producer as RocketMQ 4.9's Java client speaks it, frame by frame, against a real
``rmq-broker``; our SDK consumes exactly what it committed.

The Java client cannot be fetched here (Maven Central is out of reach), so its frames are built from
the Java sources, independently of rmq's own encoders: DefaultMQProducerImpl.sendKernelImpl
(SEND_MESSAGE_V2 with sysFlag TRANSACTION_PREPARED_TYPE), endTransaction (END_TRANSACTION oneway,
EndTransactionRequestHeader's fields, 5.x's extra ``bname``), and
ClientRemotingProcessor.checkTransactionState (MessageDecoder.decode of the body, the answer's fields
as processTransactionState sets them). The C++ client runs for real: test_cpp_transaction.py.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time

import pytest

from rmq.client import PushConsumer
from rmq.net import RemotingClient, RemotingCommand
from tests.helpers import wait_until
from tests.helpers.transaction import wait_checker_past

pytestmark = [pytest.mark.compat, pytest.mark.slow]

GROUP = "java-tx-group"
# Java's RequestCode and MessageSysFlag values, as its sources have them
HEART_BEAT, SEND_MESSAGE_V2, END_TRANSACTION, CHECK_TRANSACTION_STATE = 34, 310, 37, 39
COMMIT_TYPE, ROLLBACK_TYPE, NOT_TYPE, PREPARED_TYPE = 8, 12, 0, 4


def java_properties(props: dict[str, str]) -> str:
    # MessageDecoder.messageProperties2String: name \x01 value \x02, each pair
    return "".join(f"{k}\x01{v}\x02" for k, v in props.items())


def java_decode(body: bytes) -> dict:
    """MessageDecoder.decode(byteBuffer, readBody=true, deCompressBody=false), field by field."""
    (total, magic, body_crc, queue_id, flag, queue_offset, physical_offset, sys_flag, born_ts) = struct.unpack_from(
        ">iiiiiqqiq", body, 0
    )
    pos = 48
    born_host = socket.inet_ntoa(body[pos : pos + 4]), struct.unpack_from(">i", body, pos + 4)[0]
    pos += 8
    (store_ts,) = struct.unpack_from(">q", body, pos)
    pos += 8 + 8  # STORETIMESTAMP, STOREHOST
    reconsume, prepared, body_len = struct.unpack_from(">iqi", body, pos)
    pos += 16
    payload = body[pos : pos + body_len]
    pos += body_len
    topic_len = body[pos]
    topic = body[pos + 1 : pos + 1 + topic_len].decode()
    pos += 1 + topic_len
    (props_len,) = struct.unpack_from(">h", body, pos)
    props_text = body[pos + 2 : pos + 2 + props_len].decode()
    props = dict(p.split("\x01", 1) for p in props_text.split("\x02") if p)
    assert total == len(body) and magic == -626843481  # 0xDAA320A7 as a Java int
    return {
        "topic": topic,
        "queue_id": queue_id,
        "queue_offset": queue_offset,
        "commit_log_offset": physical_offset,
        "body": payload,
        "body_crc": body_crc,
        "flag": flag,
        "properties": props,
        "sys_flag": sys_flag,
        "born": (born_ts, born_host),
        "store_timestamp": store_ts,
        "reconsume_times": reconsume,
        "prepared_transaction_offset": prepared,
    }


class JavaShapedProducer:
    """What TransactionMQProducer puts on the wire, built from the Java sources."""

    def __init__(self, broker_addr: str, local_states: dict[bytes, int], check_states: dict[bytes, int]):
        self.addr = broker_addr
        self.local_states = local_states
        self.check_states = check_states
        self.checked: list[dict] = []
        self.lock = threading.Lock()
        self.client = RemotingClient()
        self.client.register_processor(CHECK_TRANSACTION_STATE, self.on_check)
        self.client.start()
        self.seq = 0

    def close(self) -> None:
        self.client.shutdown()

    def heartbeat(self) -> None:
        body = {
            "clientID": "127.0.0.1@java-tx",
            "producerDataSet": [{"groupName": GROUP}, {"groupName": "CLIENT_INNER_PRODUCER"}],
            "consumerDataSet": [],
        }
        answer = self.client.invoke_sync(
            self.addr, RemotingCommand.request(HEART_BEAT, {}, json.dumps(body).encode()), 5
        )
        assert answer.code == 0, answer.remark

    def send_in_transaction(self, topic: str, body: bytes) -> str:
        """sendMessageInTransaction: the half message, the local state, END_TRANSACTION oneway."""
        self.seq += 1
        uniq_key = f"7F00000100002A9F0000{self.seq:012X}"
        props = {"TRAN_MSG": "true", "PGROUP": GROUP, "UNIQ_KEY": uniq_key, "WAIT": "true", "TAGS": "java"}
        header = {  # SendMessageRequestHeaderV2
            "a": GROUP, "b": topic, "c": "TBW102", "d": "4", "e": "0", "f": str(PREPARED_TYPE),
            "g": str(int(time.time() * 1000)), "h": "0", "i": java_properties(props), "j": "0", "k": "false",
            "m": "false",
        }  # fmt: skip
        sent = self.client.invoke_sync(self.addr, RemotingCommand.request(SEND_MESSAGE_V2, header, body), 5)
        assert sent.code == 0, sent.remark
        offset_msg_id = sent.ext_fields["msgId"]
        end = {  # EndTransactionRequestHeader, as endTransaction fills it (5.x adds bname)
            "producerGroup": GROUP,
            "tranStateTableOffset": sent.ext_fields["queueOffset"],
            "commitLogOffset": str(int(offset_msg_id[16:], 16)),  # MessageDecoder.decodeMessageId
            "commitOrRollback": str(self.local_states[body]),
            "fromTransactionCheck": "false",
            "msgId": uniq_key,
            "bname": "broker-a",
        }
        self.end_oneway(end, None)
        return uniq_key

    def end_oneway(self, fields: dict[str, str], remark: str | None) -> None:
        request = RemotingCommand.request(END_TRANSACTION, fields)
        request.remark = remark
        self.client.invoke_oneway(self.addr, request)

    def on_check(self, channel, request: RemotingCommand) -> None:
        """checkTransactionState: decode the message, ask the local state, answer oneway."""
        msg = java_decode(bytes(request.body))
        with self.lock:
            self.checked.append({**msg, "header": dict(request.ext_fields)})
        state = self.check_states.get(msg["body"], NOT_TYPE)
        ext = request.ext_fields
        fields = {
            "producerGroup": GROUP,
            "tranStateTableOffset": ext["tranStateTableOffset"],
            "commitLogOffset": ext["commitLogOffset"],
            "commitOrRollback": str(state),
            "fromTransactionCheck": "true",
            "msgId": msg["properties"]["UNIQ_KEY"],
            "transactionId": ext["transactionId"],
        }
        threading.Thread(target=self.end_oneway, args=(fields, None)).start()  # Java's checkExecutor


def test_java_shaped_transactional_producer_commits_and_rolls_back(tx_cluster):
    topic = tx_cluster.create_topic("JavaTx", queues=1)
    local = {b"j-commit": COMMIT_TYPE, b"j-rollback": ROLLBACK_TYPE, b"j-later": NOT_TYPE, b"j-later-no": NOT_TYPE}
    checks = {b"j-later": COMMIT_TYPE, b"j-later-no": ROLLBACK_TYPE}
    producer = JavaShapedProducer(tx_cluster.broker_addr, local, checks)
    received: list[bytes] = []
    consumer = PushConsumer("java-tx-readers", tx_cluster.namesrv_addr, consume_from_where="FIRST_OFFSET")
    consumer.subscribe(topic)
    consumer.register_listener(lambda msgs: received.extend(m.body for m in msgs))
    try:
        producer.heartbeat()
        keys = {body: producer.send_in_transaction(topic, body) for body in local}
        with consumer:
            wait_until(lambda: sorted(received) == [b"j-commit", b"j-later"], 20, lambda: f"consumed {received}")
            wait_until(lambda: len(producer.checked) >= 2, 10, "both open transactions checked")
            # a round after both answers reached their copies: ended, or they would be asked again
            with producer.lock:
                copies = [c["queue_offset"] for c in producer.checked]
            wait_checker_past(tx_cluster, max(copies))
            assert sorted(received) == [b"j-commit", b"j-later"]
    finally:
        producer.close()
    # what Java's checkTransactionState decodes: the message in its real topic, with its ids
    by_body = {c["body"]: c for c in producer.checked}
    assert sorted(c["body"] for c in producer.checked) == [b"j-later", b"j-later-no"]  # once each: answered
    later = by_body[b"j-later"]
    assert later["topic"] == topic and later["queue_id"] == 0
    assert later["properties"]["UNIQ_KEY"] == keys[b"j-later"] == later["header"]["msgId"]
    assert later["header"]["transactionId"] == keys[b"j-later"]
    assert later["header"]["commitLogOffset"] == str(later["commit_log_offset"])
    assert later["header"]["tranStateTableOffset"] == str(later["queue_offset"])
    assert later["properties"]["PGROUP"] == GROUP and later["properties"]["TRANSACTION_CHECK_TIMES"] == "1"
    assert set(later["header"]) >= {"tranStateTableOffset", "commitLogOffset", "msgId", "transactionId", "offsetMsgId"}
    assert [m.body for m in tx_cluster.messages(topic)] == [b"j-commit", b"j-later"]
