"""POP requests built by hand from docs/pop.md (not with an SDK), and what their answers hold."""

from __future__ import annotations

from rmq._clock import now_ms
from rmq.net import RemotingClient, RemotingCommand
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.pop import PROPERTY_POP_CK, AckRequest, ExtraInfo, PopRequest
from rmq.protocol.record import StoredMessage
from tests.helpers.requests import call, records


def pop_request(
    topic: str,
    group: str = "PopGroup",
    *,
    max_msgs: int = 32,
    invisible_ms: int = 60_000,
    poll_ms: int = 0,
    queue_id: int = -1,
    exp: str | None = None,
    exp_type: str | None = None,
    order: bool = False,
) -> RemotingCommand:
    header = PopRequest(
        group, topic, queue_id, max_msgs, invisible_ms, poll_ms, now_ms(), exp_type=exp_type, exp=exp, order=order
    )
    return RemotingCommand.request(RequestCode.POP_MESSAGE, header.fields())


def ack_request(message: StoredMessage, topic: str, group: str = "PopGroup", extra_info: str | None = None):
    """ACK_MESSAGE of a popped message (its POP_CK, unless ``extra_info``)."""
    extra = extra_info if extra_info is not None else message.properties[PROPERTY_POP_CK]
    header = AckRequest(group, topic, message.queue_id, extra, message.queue_offset)
    return RemotingCommand.request(RequestCode.ACK_MESSAGE, header.fields())


def change_request(message: StoredMessage, topic: str, invisible_ms: int, group: str = "PopGroup", extra_info=None):
    extra = extra_info if extra_info is not None else message.properties[PROPERTY_POP_CK]
    header = AckRequest(group, topic, message.queue_id, extra, message.queue_offset, invisible_ms)
    return RemotingCommand.request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header.fields())


class Popper:
    """One consumer of a POP group on one broker, by hand-built requests."""

    def __init__(self, client: RemotingClient, addr: str, topic: str, group: str = "PopGroup"):
        self.client, self.addr, self.topic, self.group = client, addr, topic, group

    def pop(self, timeout: float = 5.0, **options) -> list[StoredMessage]:
        """The messages one POP_MESSAGE answers (none on POLLING_TIMEOUT; any other code fails)."""
        answer = call(self.client, self.addr, pop_request(self.topic, self.group, **options), timeout)
        if answer.code == ResponseCode.POLLING_TIMEOUT:
            return []
        assert answer.code == ResponseCode.SUCCESS, (answer.code, answer.remark)
        return records(answer.body)

    def ack(self, message: StoredMessage) -> RemotingCommand:
        return call(self.client, self.addr, ack_request(message, self.topic, self.group))

    def change(self, message: StoredMessage, invisible_ms: int) -> RemotingCommand:
        return call(self.client, self.addr, change_request(message, self.topic, invisible_ms, self.group))


def changed(message: StoredMessage, answer: RemotingCommand) -> StoredMessage:
    """``message`` with the POP_CK a CHANGE_MESSAGE_INVISIBLETIME answer makes it (as a client
    rebuilds it: the new checkpoint starts at the message's own offset)."""
    info = ExtraInfo.decode(message.properties[PROPERTY_POP_CK])
    fields = answer.ext_fields
    new = info.changed(message.queue_offset, int(fields["popTime"]), int(fields["invisibleTime"]),
                       int(fields["reviveQid"]))  # fmt: skip
    properties = {**message.properties, PROPERTY_POP_CK: new.encode()}
    return StoredMessage(**{**message.__dict__, "properties": properties})
