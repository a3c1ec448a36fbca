"""The broker's requests to name servers (RocketMQ's BrokerOuterAPI): REGISTER_BROKER (103) and
UNREGISTER_BROKER (104), exactly as docs/nameserver.md#registration lays them out, so that an rmq broker registers
with an Apache name server as well as with rmq's.

    REGISTER_BROKER extFields: brokerName, brokerAddr, clusterName, haServerAddr, brokerId,
                               compressed ("false"), bodyCrc32; a master adds its epoch (rmq's)
                               and, with cluster credentials, its masterClaim to that epoch;
                               in controller mode, controllerMode ("true");
                               with cluster credentials, AccessKey and Signature (plain ACL)
    body: {"topicConfigSerializeWrapper": {"topicConfigTable": {...}, "dataVersion": {...}},
           "filterServerList": []}

Registration never blocks the event loop: ``register_all`` sends to every name server at once and
reports each outcome to a callback on the client's loop; ``wait`` blocks only callers that are not
on a loop (start-up, shutdown).
"""

from __future__ import annotations

import concurrent.futures
import functools
import logging
from collections.abc import Callable
from typing import Any

import orjson

from rmq.net.client import RemotingClient
from rmq.net.codec import RemotingCommand
from rmq.protocol.acl import MASTER_CLAIM, SessionCredentials, master_claim
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.crc import crc32
from rmq.protocol.replica import REGISTER_CONTROLLER_MODE, REGISTER_EPOCH

log = logging.getLogger("rmq.broker")


class NamesrvApi:
    def __init__(self, client: RemotingClient, timeout_ms: int, credentials: SessionCredentials | None = None):
        """``credentials``: the cluster account every write is signed with (the client itself
        signs nothing: it also asks the master broker for its epochs and metadata)."""
        self.client = client
        self.timeout = timeout_ms / 1000
        self.credentials = credentials

    def _request(self, code: int, ext: dict[str, str], body: bytes = b"") -> RemotingCommand:
        ext = dict(ext)
        if self.credentials is not None:
            self.credentials.sign(ext, body)
        return RemotingCommand.request(code, ext, body)

    def register_all(
        self,
        namesrv_addrs: list[str],
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        topic_config_wrapper: dict[str, Any],
        wait: bool = False,
        on_answer: Callable[[str, RemotingCommand], None] | None = None,
        epoch: int | None = None,
        controller_mode: bool = False,
    ) -> list[concurrent.futures.Future]:
        """REGISTER_BROKER with every name server; the futures resolve to each answer (or error).
        ``on_answer(namesrv_addr, response)`` sees every answer (a slave learns its master from
        ``masterAddr``; a master, that it was fenced), on the client's loop thread. A master sends its
        ``epoch``: an rmq name server refuses a master older than the one it routes. ``controller_mode``:
        the epochs are the controllers' (an rmq name server lets a newer one replace a live master
        of controller mode even unsigned, where it has no cluster account)."""
        body = orjson.dumps({"topicConfigSerializeWrapper": topic_config_wrapper, "filterServerList": []})
        ext = {
            "brokerName": broker_name,
            "brokerAddr": broker_addr,
            "clusterName": cluster_name,
            "haServerAddr": ha_server_addr,
            "brokerId": str(broker_id),
            "compressed": "false",
            "bodyCrc32": str(crc32(body)),
        }
        if epoch is not None:
            ext[REGISTER_EPOCH] = str(epoch)  # a master's term; Apache name servers ignore it
            if self.credentials is not None:
                ext[MASTER_CLAIM] = master_claim(
                    self.credentials.secret_key, cluster_name, broker_name, broker_addr, epoch
                )
        if controller_mode:
            ext[REGISTER_CONTROLLER_MODE] = "true"
        futures = []
        for addr in namesrv_addrs:
            request = self._request(RequestCode.REGISTER_BROKER, ext, body)
            future = self.client.invoke_async(addr, request, self.timeout)
            future.add_done_callback(functools.partial(_log_outcome, "register with", addr))
            if on_answer is not None:
                future.add_done_callback(functools.partial(_pass_answer, on_answer, addr))
            futures.append(future)
        if wait:
            concurrent.futures.wait(futures, self.timeout + 1)
        return futures

    def unregister_all(
        self, namesrv_addrs: list[str], cluster_name: str, broker_addr: str, broker_name: str, broker_id: int
    ) -> None:
        """UNREGISTER_BROKER with every name server, waiting (briefly) for the answers."""
        ext = {
            "brokerName": broker_name,
            "brokerAddr": broker_addr,
            "clusterName": cluster_name,
            "brokerId": str(broker_id),
        }
        futures = []
        for addr in namesrv_addrs:
            future = self.client.invoke_async(addr, self._request(RequestCode.UNREGISTER_BROKER, ext), self.timeout)
            future.add_done_callback(functools.partial(_log_outcome, "unregister from", addr))
            futures.append(future)
        concurrent.futures.wait(futures, self.timeout + 1)


def _pass_answer(
    on_answer: Callable[[str, RemotingCommand], None], addr: str, future: concurrent.futures.Future
) -> None:
    if future.exception() is None:
        on_answer(addr, future.result())


def _log_outcome(what: str, addr: str, future: concurrent.futures.Future) -> None:
    error = future.exception()
    if error is not None:
        log.warning("cannot %s name server %s: %s", what, addr, error)
        return
    response = future.result()
    if response.code != ResponseCode.SUCCESS:
        log.warning(
            "name server %s refused to %s it: code %d %s", addr, what.split()[0], response.code, response.remark
        )
    else:
        log.debug("%s name server %s: ok", what, addr)
