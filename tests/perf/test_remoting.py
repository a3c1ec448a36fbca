"""rmq-perf's remoting frames: a burst built from templates is what the broker's codec reads, and
answers are told apart by the two numbers read from their raw headers."""

from __future__ import annotations

from rmq.net.codec import FrameDecoder, RemotingCommand, encode
from rmq.perf.load import LoadSpec, RmqDriver
from rmq.perf.remoting import take_answers
from rmq.protocol.codes import RequestCode


def answer(opaque: int, code: int, **ext: str) -> bytes:
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2)
    request.opaque = opaque
    return encode(RemotingCommand.response_to(request, code, "" if code == 0 else "refused", ext))


def test_a_burst_is_frames_the_codec_reads_each_with_its_own_opaque_and_born_time():
    driver = RmqDriver(LoadSpec("rmq", "127.0.0.1", 1, "TopicA", size=100, queues=4), worker=0)
    data, keys = driver.requests(5)
    commands = FrameDecoder().feed(data)
    assert [c.opaque for c in commands] == keys and len(set(keys)) == 5
    assert {c.code for c in commands} == {RequestCode.SEND_MESSAGE_V2}
    assert [c.ext_fields["e"] for c in commands] == ["1", "2", "3", "0", "1"]  # the queues in turn
    assert all(c.body == b"x" * 100 and c.ext_int("g") > 1_600_000_000_000 for c in commands)
    more, next_keys = driver.requests(1)
    assert next_keys[0] not in keys and FrameDecoder().feed(more)[0].opaque == next_keys[0]


def test_answers_are_read_by_opaque_and_code_and_a_partial_frame_waits_for_its_rest():
    ok = answer(1_000_000_007, 0, msgId="0A", queueId="1", queueOffset="12")
    busy = answer(1_000_000_008, 2)  # SYSTEM_BUSY
    buf = bytearray(ok + busy + ok[:30])
    assert take_answers(buf) == [(1_000_000_007, 0), (1_000_000_008, 2)]
    assert buf == ok[:30]
    buf += ok[30:]
    assert take_answers(buf) == [(1_000_000_007, 0)] and buf == b""


def test_an_answer_whose_header_does_not_start_with_its_code_is_read_too():
    # Java's broker writes the header's keys in another order: the code is found where it is
    header = b'{"extFields":{"queueId":"1"},"flag":1,"language":"JAVA","opaque":1000000042,"code":0}'
    frame = (4 + len(header)).to_bytes(4, "big") + len(header).to_bytes(4, "big") + header
    assert take_answers(bytearray(frame)) == [(1_000_000_042, 0)]
    refused = header.replace(b'"code":0', b'"code":17')
    frame = (4 + len(refused)).to_bytes(4, "big") + len(refused).to_bytes(4, "big") + refused
    assert take_answers(bytearray(frame)) == [(1_000_000_042, 17)]
