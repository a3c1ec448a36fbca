"""A send request encoded straight to its frame, without a RemotingCommand or a header dict: the
pure-Python twin of ``rmq.client._send_wire`` (one API, the same tests; ``rmq.client.send_wire``
picks one).

A SEND_MESSAGE_V2 or SEND_BATCH_MESSAGE frame (rmq.net.codec's layout, docs/protocol.md#sends)::

    offset  size  field
    0       4     total_length     int32, big-endian = 4 + H + B
    4       4     header_length    int32, big-endian = H (serialize type 0: JSON)
    8       H     header           {"code":C,"language":"PYTHON","version":V,"opaque":O,"flag":0,
                                    "extFields":{FIXED,PER_MESSAGE,"e":"QUEUE_ID"}}
    8+H     B     body

    FIXED        "a":"group","c":"defaultTopic","d":"queueNums","j":"0","k":"false","m":"batch"
                 (one producer's, encoded once: ``fixed_fields``)
    PER_MESSAGE  "b":"topic","f":"sysFlag","g":"bornTimestamp","h":"flag","i":"properties"
                 (once per message: ``message_fields``)
    QUEUE_ID     once per try, when the queue is chosen (``send_frame``)

Every value is a JSON string escaped as orjson writes it (what the generic codec writes), so a broker
reads these frames exactly as it reads those of ``RemotingCommand``s.
"""

from __future__ import annotations

import struct

import orjson

from rmq.net.frame import LANGUAGE, VERSION

_PREFIX = struct.Struct(">II")


def json_string(text: str) -> bytes:
    """``text`` as a quoted JSON string, escaped as orjson escapes it; UnicodeEncodeError for text
    that has no UTF-8 (lone surrogates), as the compiled twin raises."""
    try:
        return orjson.dumps(text)
    except orjson.JSONEncodeError:
        text.encode()  # raises the UnicodeEncodeError
        raise


def fixed_fields(group: str, default_topic: str, default_topic_queue_nums: int, batch: bool) -> bytes:
    """The members of a producer's send header that are the same for every one of its messages."""
    return b'"a":%s,"c":%s,"d":"%d","j":"0","k":"false","m":"%s"' % (
        json_string(group),
        json_string(default_topic),
        default_topic_queue_nums,
        b"true" if batch else b"false",
    )


def message_fields(fixed: bytes, topic: str, sys_flag: int, born_timestamp: int, flag: int, properties: str) -> bytes:
    """``fixed`` and the members of one message's send header, all but its queue id."""
    return b'%s,"b":%s,"f":"%d","g":"%d","h":"%d","i":%s' % (
        fixed,
        json_string(topic),
        sys_flag,
        born_timestamp,
        flag,
        json_string(properties),
    )


def send_frame(code: int, opaque: int, fields: bytes, queue_id: int, body: bytes, with_body: bool = True) -> bytes:
    """The whole frame of a send request: ``fields`` of ``message_fields``, the queue id of this try;
    without ``with_body``, all of it but the body's bytes (written after it by reference)."""
    header = b'{"code":%d,"language":"%s","version":%d,"opaque":%d,"flag":0,"extFields":{%s,"e":"%d"}}' % (
        code,
        LANGUAGE.encode(),
        VERSION,
        opaque,
        fields,
        queue_id,
    )
    prefix = _PREFIX.pack(4 + len(header) + len(body), len(header))
    return prefix + header + body if with_body else prefix + header
