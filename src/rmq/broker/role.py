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
    on_register_answer        a master's REGISTER_BROKER answered CONTROLLER_FENCED_MASTER_EPOCH
                              with the routed master's claim to a newer epoch, and the claim checks
                              out with this broker's cluster secret: the store refuses every put
                              (split brain would fork the log) until every name server that fenced
                              it takes its registration again (that master is gone from the routes)

Fencing needs cluster credentials (clusterAccessKey / clusterSecretKey): without them no answer can
prove a newer master, and a master never fences itself on a name server's word (4.x has no fencing
at all), or one forged registration would stop it.

The role is runtime only: a promoted broker restarted with its broker.conf comes back in the role
written there (a former master is restarted as a SLAVE and reconciles its log with its successor's).
"""

from __future__ import annotations

import hmac
import logging
import threading
from typing import TYPE_CHECKING, Protocol

from rmq._log import RateLimitedLog
from rmq.broker.config import BrokerRole
from rmq.errors import RemotingError, ResponseError
from rmq.net.codec import RemotingCommand, body_bytes
from rmq.protocol.acl import ROUTED_MASTER_ADDR, ROUTED_MASTER_CLAIM, ROUTED_MASTER_EPOCH, master_claim
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.replica import EpochTable
from rmq.protocol.route import MASTER_ID
from rmq.store.epoch import FIRST_EPOCH, EpochEntry

if TYPE_CHECKING:
    import concurrent.futures

    from rmq.broker.config import BrokerConfig
    from rmq.broker.consumer_offset import ConsumerOffsetManager
    from rmq.broker.schedule import ScheduleMessageService
    from rmq.broker.slave_sync import SlaveSynchronize
    from rmq.broker.timer import TimerMessageStore
    from rmq.broker.transaction import TransactionalMessageCheckService
    from rmq.net.client import RemotingClient
    from rmq.net.server import RemotingServer
    from rmq.store import MessageStore

log = logging.getLogger("rmq.broker")

EPOCH_FETCH_TIMEOUT = 3.0


class RoleServices(Protocol):
    """What a role switch touches of the broker (the controller passes itself): the role's own
    services start and stop with it. Here rather than in rmq.broker.services, which the slave sync
    named below imports."""

    @property
    def config(self) -> BrokerConfig: ...
    @property
    def broker_addr(self) -> str: ...
    @property
    def is_slave(self) -> bool: ...
    @property
    def store(self) -> MessageStore: ...
    @property
    def server(self) -> RemotingServer: ...
    @property
    def namesrv_client(self) -> RemotingClient: ...
    @property
    def consumer_offset_manager(self) -> ConsumerOffsetManager: ...
    @property
    def timer_message_store(self) -> TimerMessageStore: ...
    @property
    def slave_sync(self) -> SlaveSynchronize: ...
    @property
    def schedule_message_service(self) -> ScheduleMessageService: ...
    @property
    def transaction_check_service(self) -> TransactionalMessageCheckService: ...
    def serve_as_master(self) -> None: ...
    def serve_as_slave(self) -> None: ...
    def register_broker_all(self, force: bool = True, wait: bool = False) -> list[concurrent.futures.Future]: ...


class RoleSwitch:
    """Promotion, fencing and a slave's view of its master's epochs, for one broker."""

    def __init__(self, controller: RoleServices):
        self.controller = controller
        self._lock = threading.Lock()
        # the name servers whose last answer fenced this master with a claim that checked out
        self._fenced_by: set[str] = set()
        # controller mode: the master this slave was last told to follow (become_slave's arguments)
        self._following: tuple[str, str | None, int] | None = None
        self._unproven = RateLimitedLog(log)

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
        """This slave becomes the master of its broker name (scheduler thread); its new epoch, the
        next one after its store's newest."""
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
            entry = self._serve_as_master(role, None)
        c.register_broker_all(wait=True)
        return entry

    def become_master(self, epoch: int, sync_master: bool) -> EpochEntry:
        """Controller mode: the controllers named this broker master of its set in master ``epoch``
        (scheduler thread). A slave is promoted into that epoch (its store opens it at its end); a
        master of an older epoch goes on in the new one; a master already in it is left as it is
        (the controllers' notice and poll both say so). The epoch may be the newest its store
        holds: the controllers name the master of that term, so this broker was it, restarted (the
        controllers' brokers start as slaves) before another was elected, and it goes on in its
        term, as RocketMQ 5.x's changeToMaster does. ValueError for an older epoch."""
        c = self.controller
        role = BrokerRole.SYNC_MASTER if sync_master else BrokerRole.ASYNC_MASTER
        with self._lock:
            known = c.store.epoch
            if not c.is_slave and epoch == known:
                assert c.store.epochs is not None and c.store.epochs.last is not None
                return c.store.epochs.last
            if epoch < max(known, FIRST_EPOCH):
                why = f"its store already holds epoch {known}" if epoch < known else f"epochs begin at {FIRST_EPOCH}"
                raise ValueError(
                    f"broker {c.config.broker_name} at {c.broker_addr} cannot be master in epoch {epoch}: {why}"
                )
            if c.is_slave:
                entry = self._serve_as_master(role, epoch)
            else:
                entry = c.store.open_epoch(epoch)
                if c.store.sync_master != sync_master:
                    c.store.become_master(sync_master)
                    c.config.broker_role = role
                    c.server.loop.run_and_wait(c.serve_as_master)
            self._following = None
        c.register_broker_all(wait=True)
        return entry

    def _serve_as_master(self, role: BrokerRole, epoch: int | None) -> EpochEntry:
        """A slave's promotion (``self._lock`` held): the store opens ``epoch`` (None: the next one),
        then the master's services start."""
        c = self.controller
        entry = c.store.promote(role is BrokerRole.SYNC_MASTER, epoch)
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
        return entry

    # -- demotion --------------------------------------------------------------------------------

    def become_slave(self, master_addr: str, ha_addr: str | None, master_epoch: int) -> None:
        """Controller mode: the controllers named ``master_addr`` master of this broker's set in
        ``master_epoch`` (scheduler thread). A master stops taking sends at once (SERVICE_NOT_AVAILABLE:
        nothing more is acknowledged here), stops its master's services (HA service, delay and timer
        services, transaction checks) and replicates from the new master (its HA client connects to
        ``ha_addr``, None: the one the name servers answer; the connection first cuts what that master
        never had), naming its broker id (``brokerId``, the controllers'). It takes no send again
        until promoted. A slave follows the new master. Idempotent."""
        c = self.controller
        with self._lock:
            if self._following == (master_addr, ha_addr, master_epoch) and c.is_slave:
                return
            was_master = not c.is_slave
            if was_master:
                c.store.set_running(False)  # first: no send is taken from here on
                c.config.broker_role = BrokerRole.SLAVE
                c.schedule_message_service.shutdown()
                c.timer_message_store.shutdown()
                c.transaction_check_service.shutdown()
                c.consumer_offset_manager.slave = True
                c.store.stop_ha_service()
                # on the loop, the one thread left that puts: no put of the old role lands after it
                c.server.loop.run_and_wait(c.serve_as_slave)
                c.slave_sync.follow(master_addr)
                c.store.demote(self.fetch_master_epochs, ha_addr, c.config.broker_id)
            else:
                c.slave_sync.follow(master_addr)
                ha_client = c.store.ha_client
                if ha_client is not None:
                    # a new connection even to the same master in a new epoch: it takes the master's
                    # epoch table again, which a later election compares with the others'
                    ha_client.slave_id = c.config.broker_id
                    ha_client.follow(ha_addr)
            self._following = (master_addr, ha_addr, master_epoch)
        log.warning(
            "broker %s at %s (brokerId %d) %s master %s of epoch %d",
            c.config.broker_name,
            c.broker_addr,
            c.config.broker_id,
            "demoted: a slave of" if was_master else "follows",
            master_addr,
            master_epoch,
        )
        c.register_broker_all()

    # -- fencing ---------------------------------------------------------------------------------

    def on_register_answer(self, namesrv_addr: str, response: RemotingCommand) -> None:
        """A master's registration was answered (the name-server client's loop thread)."""
        store = self.controller.store
        if response.code == ResponseCode.SUCCESS:
            with self._lock:
                if namesrv_addr not in self._fenced_by:
                    return
                self._fenced_by.discard(namesrv_addr)
                if self._fenced_by or not store.fenced:
                    return
                store.unfence()
            log.warning(
                "name server %s routes broker %s at %s as master again (no newer master of its name is "
                "routed any more): taking sends again",
                namesrv_addr,
                self.controller.config.broker_name,
                self.controller.broker_addr,
            )
            return
        if response.code != ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH:
            return
        unproven = self._unproven_reason(response)
        if unproven is not None:
            self._unproven.warning(
                namesrv_addr,
                "name server %s refused broker %s as master (%s), but %s: not fencing",
                namesrv_addr,
                self.controller.broker_addr,
                response.remark,
                unproven,
            )
            return
        with self._lock:
            self._fenced_by.add(namesrv_addr)
            if store.fenced:
                return
            store.fence()
        log.error(
            "name server %s refused broker %s at %s as master: %s. Refusing every send until no name server "
            "routes that master any more; restart this broker as a slave (brokerRole=SLAVE, brokerId>0) to rejoin",
            namesrv_addr,
            self.controller.config.broker_name,
            self.controller.broker_addr,
            response.remark,
        )

    def _unproven_reason(self, response: RemotingCommand) -> str | None:
        """Why a fencing answer does not prove a newer master of this broker's name, or None."""
        c = self.controller
        credentials = c.config.cluster_credentials()
        if credentials is None:
            return "this broker has no cluster credentials (clusterAccessKey/clusterSecretKey) to check the answer with"
        ext = response.ext_fields or {}
        addr, epoch_text, claim = (ext.get(k) for k in (ROUTED_MASTER_ADDR, ROUTED_MASTER_EPOCH, ROUTED_MASTER_CLAIM))
        if not (addr and epoch_text and claim):
            return "the answer names no master with a signed claim to its epoch"
        try:
            epoch = int(epoch_text)
        except ValueError:
            return f"the routed master's epoch {epoch_text!r} is not a number"
        if addr == c.broker_addr or epoch <= c.store.epoch:
            return f"the routed master {addr} in epoch {epoch} is not newer than this one (epoch {c.store.epoch})"
        expected = master_claim(credentials.secret_key, c.config.broker_cluster_name, c.config.broker_name, addr, epoch)
        if not hmac.compare_digest(expected, claim):
            return f"the claim of {addr} to epoch {epoch} was not made with this cluster's secret (clusterSecretKey)"
        return None
