"""Request headers decoded once (rmq.protocol.headers): what a broker's ACL check and its processor
both read, whichever spelling the client used."""

from __future__ import annotations

import pytest

from rmq.net import RemotingCommand
from rmq.protocol import headers
from rmq.protocol.codes import RequestCode
from rmq.protocol.fields import BadRequest
from rmq.protocol.send_header import V2

LONG = {"producerGroup": "P", "topic": "Orders", "queueId": "3", "sysFlag": "0", "maxReconsumeTimes": "5"}


@pytest.mark.parametrize("code", [RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE])
def test_a_v2_code_with_long_names_reads_every_field_by_its_long_name(code):
    header = headers.send_header(RemotingCommand.request(code, dict(LONG)))
    assert (header.topic, header.queue_id, header.max_reconsume_times) == ("Orders", 3, 5)
    assert header.batch == (code == RequestCode.SEND_BATCH_MESSAGE)


def test_the_short_topic_wins_when_a_v2_send_has_both_spellings():
    ext = {V2[k]: v for k, v in LONG.items()} | {"b": "Orders", "topic": "Payments"}
    assert headers.send_header(RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, ext)).topic == "Orders"


def test_a_malformed_field_is_named_as_the_client_spelled_it():
    ext = {V2[k]: v for k, v in LONG.items()} | {"e": "zero"}
    with pytest.raises(BadRequest, match="header field 'e' is 'zero'"):
        headers.send_header(RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, ext))
    with pytest.raises(BadRequest, match="header field 'queueId' is 'zero'"):
        headers.send_header(RemotingCommand.request(RequestCode.SEND_MESSAGE, dict(LONG, queueId="zero")))


def test_a_request_is_decoded_once_and_its_readers_share_the_header():
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE, dict(LONG))
    first = headers.send_header(request)
    request.ext_fields["topic"] = "Payments"  # what a second decode would read differently
    assert headers.send_header(request) is first and first.topic == "Orders"
