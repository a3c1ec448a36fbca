"""A broker's role at runtime: a slave promoted to master, a master the name servers fenced, and the
epoch table a slave fetches from its master (RocketMQ 5.x controller mode's ideas, without the
controller: an operator, or a script, decides who is promoted).

    promote(role)             PROMOTE_TO_MASTER (9103), ``rmq-admin broker promote``; on the
                              scheduler thread: the store stops replicating, drops a record it got
                              only part of, opens a new epoch at its end and takes puts (HA service
                              on haListenPort); the broker then runs as a master (brokerId 0, the
                              delay service, SYNC_FLUSH / SYNC_MASTER completions on its loop) and
                              registers with every name server at once, so clients move to it
                              within one route refresh
    fetch_master_epochs()     the slave's HA client asks it before every connection: GET_EPOCH_TABLE
                              (9102) to the master the name servers named (``masterAddr``)
    on_register_answer        a master's REGISTER_BROKER answered CONTROLLER_FENCED_MASTER_EPOCH:
                              another master of its name has a newer epoch; the store refuses every
                              put from then on (split brain would fork the log), until a restart

The role is runtime only: a promoted broker restarted with its broker.conf comes back in the role
written there (a former master is restarted as a SLAVE and reconciles its log with its successor's).
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from rmq.broker.config import BrokerRole
from rmq.errors import RemotingError, ResponseError
from rmq.net.codec import RemotingCommand, body_bytes
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.replica import EpochTable
from rmq.protocol.route import MASTER_ID
from rmq.store.epoch import EpochEntry

if TYPE_CHECKING:
    from rmq.broker.controller import BrokerController

log = logging.getLogger("rmq.broker")

EPOCH_FETCH_TIMEOUT = 3.0


class RoleSwitch:
    """Promotion, fencing and a slave's view of its master's epochs, for one broker."""

    def __init__(self, controller: BrokerController):
        self.controller = controller
        self._lock = threading.Lock()

    # -- a slave: its master's epochs ------------------------------------------------------------

    def fetch_master_epochs(self) -> tuple[list[EpochEntry], int]:
        """The master's epoch table and CommitLog end (the HA client's thread; blocks briefly)."""
        c = self.controller
        master = c.slave_sync.master_addr
        if master is None:
            raise RemotingError("no master registered yet for " + c.config.broker_name)
        response = c.namesrv_client.invoke_sync(
            master, RemotingCommand.request(RequestCode.GET_EPOCH_TABLE, {}), EPOCH_FETCH_TIMEOUT
        )
        if response.code != ResponseCode.SUCCESS:
            raise ResponseError(response.code, response.remark, master)
        table = EpochTable.decode(body_bytes(response.body))
        return [EpochEntry(epoch, start) for epoch, start in table.epochs], table.max_offset

    # -- promotion -------------------------------------------------------------------------------

    def promote(self, role: BrokerRole) -> EpochEntry:
        """This slave becomes the master of its broker name (scheduler thread); its new epoch."""
        c = self.controller
        if role is BrokerRole.SLAVE:
            raise ValueError("a slave is promoted to ASYNC_MASTER or SYNC_MASTER, not SLAVE")
        with self._lock:
            if not c.is_slave:
                raise ValueError(f"broker {c.config.broker_name} at {c.broker_addr} is already a master")
            if c.store.fenced:
                raise ValueError(f"broker {c.config.broker_name} at {c.broker_addr} is fenced: restart it")
            if c.store.epoch == 0:
                # its new term would be epoch 1 again, which its old master's log also claims
                raise ValueError(
                    f"broker {c.config.broker_name} at {c.broker_addr} never took its master's epoch table "
                    "(it never replicated): promote a slave that did"
                )
            entry = c.store.promote(role is BrokerRole.SYNC_MASTER)
            c.config.broker_role = role
            c.config.broker_id = MASTER_ID
            c.consumer_offset_manager.slave = False
            c.server.loop.run_and_wait(c.serve_as_master)
            c.schedule_message_service.start()
            c.timer_message_store.start(promoted=True)
            c.transaction_check_service.start()
        log.warning(
            "broker %s at %s promoted to %s: epoch %d from CommitLog offset %d",
            c.config.broker_name,
            c.broker_addr,
            role.value,
            entry.epoch,
            entry.start_offset,
        )
        c.register_broker_all(wait=True)
        return entry

    # -- fencing ---------------------------------------------------------------------------------

    def on_register_answer(self, namesrv_addr: str, response: RemotingCommand) -> None:
        """A master's registration was answered (the name-server client's loop thread)."""
        store = self.controller.store
        if response.code != ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH or store.fenced:
            return
        store.fence()
        log.error(
            "name server %s refused broker %s at %s as master: %s. Refusing every send from now on; "
            "restart this broker as a slave (brokerRole=SLAVE, brokerId>0) to rejoin",
            namesrv_addr,
            self.controller.config.broker_name,
            self.controller.broker_addr,
            response.remark,
        )
