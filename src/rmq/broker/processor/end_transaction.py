"""END_TRANSACTION (37), as RocketMQ's EndTransactionProcessor serves it: a producer commits or rolls
back a half message, after its local transaction or when the broker checked it back
(``rmq.broker.transaction`` does the work; the header is ``rmq.protocol.transaction``'s).

Java and C++ producers send it oneway: an answer goes out only to a request that asks for one.
A slave refuses it (SLAVE_NOT_AVAILABLE): half messages are ended on their master.
"""

from __future__ import annotations

import logging

from rmq.broker.processor.base import Processor
from rmq.broker.services import EndTransactionServices
from rmq.errors import RequestRefused
from rmq.net.codec import RemotingCommand
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.transaction import EndTransactionHeader

log = logging.getLogger("rmq.broker")


class EndTransactionProcessor(Processor[EndTransactionServices]):
    def handlers(self):
        return {RequestCode.END_TRANSACTION: self.end_transaction}

    def end_transaction(self, channel, request: RemotingCommand):
        if self.controller.is_slave:
            return RemotingCommand.response_to(
                request,
                ResponseCode.SLAVE_NOT_AVAILABLE,
                remark=f"broker {self.controller.broker_addr} is a slave: end transactions on its master",
            )
        try:
            header = EndTransactionHeader.from_ext_fields(request.ext_fields)
            code = self.controller.transactions.end_transaction(header, request.remark)
        except RequestRefused as refused:
            if request.is_oneway:  # nobody hears the refusal: the log is where it shows
                log.warning("END_TRANSACTION from %s refused: %s", channel.remote_address, refused.remark)
            raise
        if code is None:
            return None
        return RemotingCommand.response_to(request, code)
