"""The header fields of a send, by position: SEND_MESSAGE (10) spells them out, SEND_MESSAGE_V2 (310)
and SEND_BATCH_MESSAGE (320) name them with one letter (RocketMQ's SendMessageRequestHeaderV2).

    a producerGroup  b topic  c defaultTopic  d defaultTopicQueueNums  e queueId  f sysFlag
    g bornTimestamp  h flag  i properties  j reconsumeTimes  k unitMode  l maxReconsumeTimes  m batch
    (n brokerName: sent by 5.x clients, ignored)

A broker reads them through ``rmq.protocol.headers.send_header`` (one decode per request).
"""

from __future__ import annotations

FIELDS = (
    ("producerGroup", "a"),
    ("topic", "b"),
    ("defaultTopic", "c"),
    ("defaultTopicQueueNums", "d"),
    ("queueId", "e"),
    ("sysFlag", "f"),
    ("bornTimestamp", "g"),
    ("flag", "h"),
    ("properties", "i"),
    ("reconsumeTimes", "j"),
    ("unitMode", "k"),
    ("maxReconsumeTimes", "l"),
    ("batch", "m"),
)
LONG_KEYS = tuple(long for long, _ in FIELDS)
SHORT_KEYS = tuple(short for _, short in FIELDS)
# SEND_MESSAGE's name -> SEND_MESSAGE_V2's letter
V2 = dict(FIELDS)
